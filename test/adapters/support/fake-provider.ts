/**
 * A scripted provider on 127.0.0.1, port 0: answers queued responses in
 * order and records every request it received (method, path, headers, body)
 * and whether the client went away before the answer was complete.
 */
import { createServer, type IncomingHttpHeaders, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScriptedResponse {
  status?: number;
  headers?: Record<string, string>;
  body?: string | Buffer;
  /** Write the body in pieces of this many bytes, one event-loop turn apart. */
  chunkBytes?: number;
  /** Write this much of the body, then stall without ending the response. */
  stallAfterBytes?: number;
  /** Never answer. */
  hang?: boolean;
  /** Destroy the socket instead of answering. */
  reset?: boolean;
  /** Answer 200, then write only this text every `keepAliveEveryMs` (a stream of keep-alive comments), never ending. */
  keepAlive?: string;
  keepAliveEveryMs?: number;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  text: string;
  json: Record<string, unknown>;
  /** Set when the client closed the connection before the response finished. */
  clientClosed: Promise<void>;
  clientClosedEarly: boolean;
}

export class FakeProvider {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: ScriptedResponse[] = [];
  private readonly openResponses = new Set<ServerResponse>();
  private readonly arrivals: { count: number; resolve: () => void }[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<FakeProvider> {
    let provider: FakeProvider | null = null;
    const server = createServer((req, res) => {
      void provider?.handle(req, res);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    provider = new FakeProvider(server, `http://127.0.0.1:${port}`);
    return provider;
  }

  /** Resolves once `count` requests have arrived (whatever the machine's load). */
  received(count = 1): Promise<void> {
    if (this.requests.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.arrivals.push({ count, resolve }));
  }

  enqueue(...responses: ScriptedResponse[]): void {
    this.queue.push(...responses);
  }

  reset(): void {
    this.requests.length = 0;
    this.queue.length = 0;
  }

  get pending(): number {
    return this.queue.length;
  }

  async close(): Promise<void> {
    for (const res of this.openResponses) res.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(req: import('node:http').IncomingMessage, res: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of req) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let markClosed: () => void = () => undefined;
    const clientClosed = new Promise<void>((resolve) => {
      markClosed = resolve;
    });
    const record: RecordedRequest = {
      method: req.method ?? '',
      path: req.url ?? '',
      headers: req.headers,
      text,
      json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>),
      clientClosed,
      clientClosedEarly: false,
    };
    this.requests.push(record);
    for (const waiter of this.arrivals.filter((arrival) => arrival.count <= this.requests.length)) {
      this.arrivals.splice(this.arrivals.indexOf(waiter), 1);
      waiter.resolve();
    }
    this.openResponses.add(res);
    res.on('close', () => {
      this.openResponses.delete(res);
      if (!res.writableFinished) record.clientClosedEarly = true;
      markClosed();
    });

    const scripted = this.queue.shift();
    if (scripted === undefined) {
      res.writeHead(599, { 'content-type': 'text/plain' }).end('fake provider: nothing scripted');
      return;
    }
    if (scripted.reset === true) {
      req.socket.destroy();
      return;
    }
    if (scripted.hang === true) return;
    if (scripted.keepAlive !== undefined) {
      res.writeHead(200, { 'content-type': 'text/event-stream', ...scripted.headers });
      while (!res.destroyed) {
        res.write(scripted.keepAlive);
        await new Promise((resolve) => setTimeout(resolve, scripted.keepAliveEveryMs ?? 50));
      }
      return;
    }

    const body = typeof scripted.body === 'string' ? Buffer.from(scripted.body, 'utf8') : (scripted.body ?? Buffer.alloc(0));
    res.writeHead(scripted.status ?? 200, { 'content-type': 'application/json', ...scripted.headers });
    if (scripted.stallAfterBytes !== undefined) {
      res.write(body.subarray(0, scripted.stallAfterBytes));
      return;
    }
    if (scripted.chunkBytes === undefined) {
      res.end(body);
      return;
    }
    for (let at = 0; at < body.length; at += scripted.chunkBytes) {
      if (res.destroyed) return;
      res.write(body.subarray(at, at + scripted.chunkBytes));
      await new Promise((resolve) => setImmediate(resolve));
    }
    res.end();
  }
}

/**
 * Wraps fetch so the response body arrives in pieces of exactly `size`
 * bytes, whatever TCP did: splits land inside multi-byte characters, SSE
 * field names, `\r\n` pairs and JSON strings.
 */
export function rechunkingFetch(size: number): typeof fetch {
  return async (input, init) => {
    const response = await fetch(input, init);
    if (response.body === null) return response;
    const source = response.body.getReader();
    let carry = new Uint8Array(0);
    const body = new ReadableStream<Uint8Array>({
      async pull(controller) {
        while (carry.length < size) {
          const next = await source.read();
          if (next.done) {
            if (carry.length > 0) controller.enqueue(carry);
            carry = new Uint8Array(0);
            controller.close();
            return;
          }
          const merged = new Uint8Array(carry.length + next.value.length);
          merged.set(carry);
          merged.set(next.value, carry.length);
          carry = merged;
        }
        controller.enqueue(carry.slice(0, size));
        carry = carry.slice(size);
      },
      cancel(reason) {
        return source.cancel(reason);
      },
    });
    return new Response(body, { status: response.status, statusText: response.statusText, headers: response.headers });
  };
}
