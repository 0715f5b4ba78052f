/**
 * A client that reuses an idle keep-alive connection gets its answer, not a
 * reset, even when the service's event loop was busy for a few seconds (a
 * large answer being stored, a loaded machine): the service keeps idle
 * connections longer than clients and proxies keep theirs, so it is never
 * the side that closes one while a request is on its way.
 */
import http from 'node:http';
import { startTestServer, ADMIN_TOKEN, type TestServer } from '../support/server';
import { SERVER_KEEP_ALIVE_MS } from '../../src/server';

function post(url: string, agent: http.Agent): Promise<{ status: number; body: string; keepAlive: string | undefined }> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` } }, (response) => {
      let body = '';
      response.setEncoding('utf8');
      response.on('data', (chunk: string) => (body += chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, body, keepAlive: response.headers['keep-alive'] as string | undefined }));
    });
    request.on('error', reject);
    request.end(JSON.stringify({ query: '{ viewer { name } }' }));
  });
}

/** Holds the whole process (and so the service in it) busy, as a long synchronous piece of work would. */
function busyFor(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until) { /* busy */ }
}

describe('keep-alive connections (sqlite)', () => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer('sqlite');
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('tells clients how long an idle connection stays open: longer than a proxy or client keeps one (60 s)', async () => {
    const agent = new http.Agent({ keepAlive: true });
    const answer = await post(t.url, agent);
    agent.destroy();
    expect(answer.status).toBe(200);
    expect(SERVER_KEEP_ALIVE_MS).toBeGreaterThan(60_000);
    expect(answer.keepAlive).toBe(`timeout=${SERVER_KEEP_ALIVE_MS / 1000}`);
  });

  it('answers a request sent on a connection idle for 6 s while the service was busy, instead of resetting it', async () => {
    const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    expect((await post(t.url, agent)).status).toBe(200);
    // The connection idles past Node's default keep-alive timeout (5 s) while the event loop is
    // blocked; the request below is written before the server's timers run again.
    busyFor(6_000);
    const again = await post(t.url, agent);
    agent.destroy();
    expect(again.status).toBe(200);
    expect(JSON.parse(again.body)).toEqual({ data: { viewer: { name: expect.any(String) } } });
  }, 30_000);
});
