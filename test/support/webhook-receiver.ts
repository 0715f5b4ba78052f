/**
 * A webhook receiver on loopback: records every request (headers and the raw
 * body) and answers as the test says (a status, or no answer at all).
 */
import crypto from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  event: string;
  delivery: string;
  signature: string | null;
  contentType: string;
  body: string;
  json: { event: string; delivery: string; occurredAt: string; data: Record<string, unknown> };
}

/** What to answer a request: an HTTP status, or 'hang' (keep the request open until the receiver closes). */
export type Answer = number | 'hang';

export interface WebhookReceiver {
  url: string;
  received: ReceivedRequest[];
  /** Decides each answer; by default 200. */
  answer: (request: ReceivedRequest, index: number) => Answer;
  /** Resolves once `count` requests matching `filter` arrived. */
  waitFor(count: number, filter?: (request: ReceivedRequest) => boolean, timeoutMs?: number): Promise<ReceivedRequest[]>;
  close(): Promise<void>;
}

export function verifySignature(secret: string, request: ReceivedRequest): boolean {
  const expected = `sha256=${crypto.createHmac('sha256', secret).update(request.body, 'utf8').digest('hex')}`;
  return request.signature !== null && request.signature.length === expected.length && crypto.timingSafeEqual(Buffer.from(request.signature), Buffer.from(expected));
}

export async function startWebhookReceiver(): Promise<WebhookReceiver> {
  const hanging: ServerResponse[] = [];
  const waiters: (() => void)[] = [];
  const receiver: WebhookReceiver = {
    url: '',
    received: [],
    answer: () => 200,
    async waitFor(count, filter = () => true, timeoutMs = 30_000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const matching = receiver.received.filter(filter);
        if (matching.length >= count) return matching;
        const left = deadline - Date.now();
        if (left <= 0) throw new Error(`expected ${count} webhook requests, got ${matching.length}: ${JSON.stringify(receiver.received.map((r) => [r.event, r.delivery]))}`);
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, Math.min(left, 500));
          waiters.push(() => {
            clearTimeout(timer);
            resolve();
          });
        });
      }
    },
    async close() {
      for (const response of hanging) response.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
  const server = http.createServer((request: IncomingMessage, response: ServerResponse) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      const header = (name: string) => {
        const value = request.headers[name];
        return typeof value === 'string' ? value : null;
      };
      const received: ReceivedRequest = {
        event: header('x-promptwire-event') ?? '',
        delivery: header('x-promptwire-delivery') ?? '',
        signature: header('x-promptwire-signature'),
        contentType: header('content-type') ?? '',
        body,
        json: JSON.parse(body) as ReceivedRequest['json'],
      };
      const index = receiver.received.length;
      receiver.received.push(received);
      for (const wake of waiters.splice(0)) wake();
      const answer = receiver.answer(received, index);
      if (answer === 'hang') {
        hanging.push(response);
        return;
      }
      response.statusCode = answer;
      response.end('ok');
    });
  });
  server.keepAliveTimeout = 100;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', () => resolve()));
  receiver.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
  return receiver;
}
