import http from 'node:http';
import { RequestQueue } from '../../src/request-queue';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';

describe('RequestQueue', () => {
  const manualTurns = () => {
    const turns: (() => void)[] = [];
    return { defer: (callback: () => void) => void turns.push(callback), next: () => turns.shift()?.(), pending: () => turns.length };
  };

  it('starts one request per turn, in arrival order', () => {
    const turns = manualTurns();
    const queue = new RequestQueue({ limit: 10, defer: turns.defer });
    const started: number[] = [];
    for (const n of [1, 2, 3]) expect(queue.offer(() => started.push(n))).toBe(true);
    expect(started).toEqual([]);
    expect(turns.pending()).toBe(1);
    turns.next();
    expect(started).toEqual([1]);
    turns.next();
    turns.next();
    expect(started).toEqual([1, 2, 3]);
    expect(turns.pending()).toBe(0);
    expect(queue.length).toBe(0);
  });

  it('refuses an offer when the queue is full, and takes more once it drains', () => {
    const turns = manualTurns();
    const queue = new RequestQueue({ limit: 2, defer: turns.defer });
    expect(queue.offer(() => undefined)).toBe(true);
    expect(queue.offer(() => undefined)).toBe(true);
    expect(queue.offer(() => undefined)).toBe(false);
    expect(queue.length).toBe(2);
    turns.next();
    expect(queue.offer(() => undefined)).toBe(true);
  });

  it('keeps going when a start throws', () => {
    const turns = manualTurns();
    const queue = new RequestQueue({ limit: 10, defer: turns.defer });
    const started: string[] = [];
    queue.offer(() => {
      throw new Error('boom');
    });
    queue.offer(() => started.push('after'));
    expect(() => turns.next()).toThrow('boom');
    turns.next();
    expect(started).toEqual(['after']);
  });

  it('stays compact over many requests', () => {
    const turns = manualTurns();
    const queue = new RequestQueue({ limit: 5000, defer: turns.defer });
    let count = 0;
    for (let i = 0; i < 3000; i += 1) queue.offer(() => (count += 1));
    while (turns.pending() > 0) turns.next();
    expect(count).toBe(3000);
    expect(queue.length).toBe(0);
  });
});

describe('a server with more waiting requests than MAX_QUEUED_REQUESTS', () => {
  let server: TestServer;
  beforeAll(async () => {
    server = await startTestServer('sqlite', { env: { MAX_QUEUED_REQUESTS: '2' } });
  });
  afterAll(async () => {
    await server.stop();
  });

  const post = (agent: http.Agent, body: string) =>
    new Promise<{ status: number; retryAfter: string | undefined; body: { errors?: { message: string; extensions?: { code?: string } }[] } }>((resolve, reject) => {
      const request = http.request(server.url, { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` } }, (response) => {
        let text = '';
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (text += chunk));
        response.on('end', () => resolve({ status: response.statusCode ?? 0, retryAfter: response.headers['retry-after'] as string | undefined, body: JSON.parse(text) }));
      });
      request.on('error', reject);
      request.end(body);
    });

  it('answers the ones beyond the limit with 503, Retry-After and SERVICE_UNAVAILABLE, and serves the rest', async () => {
    const agent = new http.Agent({ keepAlive: true });
    const body = JSON.stringify({ query: '{ snippets(limit: 1) { identifier } }' });
    try {
      // Open six connections first: a new connection is accepted one per turn, so
      // requests on fresh connections would not arrive together.
      await Promise.all(Array.from({ length: 6 }, () => post(agent, body)));
      const answers = Array.from({ length: 6 }, () => post(agent, body));
      // Hold the event loop until every request has reached the server's sockets,
      // so that all six are read in one turn.
      await new Promise((resolve) => setTimeout(resolve, 0));
      const until = Date.now() + 100;
      while (Date.now() < until) {
        // busy: the server cannot read yet
      }
      const results = await Promise.all(answers);
      const refused = results.filter((result) => result.status === 503);
      const served = results.filter((result) => result.status === 200);
      expect(served.length).toBeGreaterThanOrEqual(2);
      expect(refused.length).toBeGreaterThanOrEqual(1);
      expect(served.length + refused.length).toBe(6);
      for (const result of refused) {
        expect(result.retryAfter).toBe('1');
        expect(result.body.errors?.[0]?.extensions?.code).toBe('SERVICE_UNAVAILABLE');
        expect(result.body.errors?.[0]?.message).toMatch(/MAX_QUEUED_REQUESTS/);
      }
      // The queue drains: the next request is served.
      expect((await post(agent, body)).status).toBe(200);
    } finally {
      agent.destroy();
    }
  });

  it('still answers health probes', async () => {
    const response = await fetch(server.url.replace('/graphql', '/healthz'));
    expect(response.status).toBe(200);
  });
});
