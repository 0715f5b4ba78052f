/**
 * The HTTP door itself: health endpoints, unknown paths, bodies that are not
 * JSON or too large, request ids, and CSRF prevention. Every refusal that is
 * a GraphQL error uses the error vocabulary of api.md.
 */
import http from 'node:http';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';

const API_CODES = ['BAD_USER_INPUT', 'NOT_FOUND', 'CONFLICT', 'UNAUTHENTICATED', 'FORBIDDEN', 'INTERNAL_SERVER_ERROR'];

interface ErrorBody {
  data?: unknown;
  errors?: { message: string; extensions?: { code?: string } }[];
}

function origin(t: TestServer): string {
  return new URL(t.url).origin;
}

async function post(t: TestServer, body: string, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(t.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}`, ...headers },
    body,
  });
}

/** Sends a body with node:http so the request can be larger than the server reads (fetch would also work, but gives no say over the socket). */
function rawPost(url: string, body: Buffer, headers: Record<string, string>): Promise<{ status: number; text: string }> {
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', headers: { ...headers, 'content-length': String(body.length) } }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () => resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') }));
    });
    // The server may answer and close before it has read the whole body.
    request.on('error', reject);
    request.end(body);
  });
}

describe.each(testDialects)('the HTTP transport (%s)', (dialect) => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { BODY_LIMIT_BYTES: '2048' } });
  });

  afterAll(async () => {
    await t?.stop();
  });

  it('GET /healthz answers 200', async () => {
    const response = await fetch(`${origin(t)}/healthz`);
    expect(response.status).toBe(200);
    expect(await response.json()).toEqual({ status: 'ok' });
  });

  it('GET /readyz answers 200 while the database answers', async () => {
    const response = await fetch(`${origin(t)}/readyz`);
    expect(response.status).toBe(200);
  });

  it('an unknown path answers 404', async () => {
    const response = await fetch(`${origin(t)}/no/such/path`);
    expect(response.status).toBe(404);
    await response.text();
  });

  it('a body that is not JSON is refused with 400, and the server keeps serving', async () => {
    const response = await post(t, '{"query": "{ __typename }"');
    expect(response.status).toBe(400);
    const body = (await response.json()) as ErrorBody;
    expect(body.errors?.[0]?.message).toMatch(/JSON/);
    expect(API_CODES).toContain(body.errors?.[0]?.extensions?.code);

    expect(await t.ok('{ __typename }')).toEqual({ __typename: 'Query' });
  });

  it('a body over BODY_LIMIT_BYTES is refused with 413, and the server keeps serving', async () => {
    const query = `{ __typename } # ${'x'.repeat(4096)}`;
    const response = await post(t, JSON.stringify({ query }));
    expect(response.status).toBe(413);
    const body = (await response.json()) as ErrorBody;
    expect(body.errors?.[0]?.message).toMatch(/2048 bytes/);
    expect(API_CODES).toContain(body.errors?.[0]?.extensions?.code);

    expect(await t.ok('{ __typename }')).toEqual({ __typename: 'Query' });
  });

  it('a body over the limit without a content-length (chunked) is refused with 413 too', async () => {
    const chunks = [Buffer.from('{"query":"{ __typename }", "pad": "'), Buffer.alloc(4096, 'x'), Buffer.from('"}')];
    const response = await fetch(t.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
      body: new ReadableStream({
        start(controller) {
          for (const chunk of chunks) controller.enqueue(chunk);
          controller.close();
        },
      }),
      duplex: 'half',
    } as RequestInit & { duplex: 'half' });
    expect(response.status).toBe(413);
    await response.text();
    expect(await t.ok('{ __typename }')).toEqual({ __typename: 'Query' });
  });

  it('a body just under the limit is served', async () => {
    const query = `{ __typename } # ${'x'.repeat(1800)}`;
    const { status, text } = await rawPost(t.url, Buffer.from(JSON.stringify({ query })), { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` });
    expect(status).toBe(200);
    expect(JSON.parse(text)).toEqual({ data: { __typename: 'Query' } });
  });

  it('echoes the x-request-id it was sent, and makes one up otherwise', async () => {
    const sent = await post(t, JSON.stringify({ query: '{ __typename }' }), { 'x-request-id': 'trace-me-42' });
    expect(sent.headers.get('x-request-id')).toBe('trace-me-42');
    await sent.text();

    const made = await post(t, JSON.stringify({ query: '{ __typename }' }));
    expect(made.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    await made.text();

    const odd = await post(t, JSON.stringify({ query: '{ __typename }' }), { 'x-request-id': 'not a plain token; <script>' });
    expect(odd.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    await odd.text();
  });

  describe('CSRF prevention', () => {
    it('refuses a GET query without apollo-require-preflight', async () => {
      const response = await fetch(`${t.url}?query=${encodeURIComponent('{ __typename }')}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(response.status).toBe(400);
      const body = (await response.json()) as ErrorBody;
      expect(body.data).toBeUndefined();
      expect(body.errors?.[0]?.message).toMatch(/CSRF/);
      expect(API_CODES).toContain(body.errors?.[0]?.extensions?.code);
    });

    it('refuses a text/plain POST without apollo-require-preflight', async () => {
      const response = await post(t, JSON.stringify({ query: '{ __typename }' }), { 'content-type': 'text/plain' });
      expect(response.status).toBe(400);
      const body = (await response.json()) as ErrorBody;
      expect(body.data).toBeUndefined();
      expect(body.errors?.[0]?.message).toMatch(/CSRF/);
      expect(API_CODES).toContain(body.errors?.[0]?.extensions?.code);
    });

    it('does not run a mutation sent as a simple (text/plain) request', async () => {
      const response = await post(t, JSON.stringify({ query: 'mutation { createSkill(input: { identifier: "csrf_skill", name: "x", body: "x" }) { uid } }' }), { 'content-type': 'text/plain' });
      expect(response.status).toBe(400);
      await response.text();
      const { skills } = await t.ok<{ skills: { identifier: string }[] }>('{ skills { identifier } }');
      expect(skills.map((skill) => skill.identifier)).not.toContain('csrf_skill');
    });

    it('serves a GET query that carries apollo-require-preflight', async () => {
      const response = await fetch(`${t.url}?query=${encodeURIComponent('{ __typename }')}`, {
        headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'apollo-require-preflight': 'true' },
      });
      expect(response.status).toBe(200);
      expect(await response.json()).toEqual({ data: { __typename: 'Query' } });
    });
  });
});
