/**
 * Requests whose input is at fault get a client error with its code and the
 * right HTTP status, never INTERNAL_SERVER_ERROR: an overlong search, a
 * pathologically deep JSON value, an APQ hash that does not match its query,
 * a subscription sent over HTTP. Nothing is stored, and nothing is logged as
 * a server error.
 */
import crypto from 'node:crypto';
import WebSocket from 'ws';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { captureLog, type CapturedLog } from './support/log-capture';

interface Answer {
  status: number;
  body: { data?: unknown; errors?: { message: string; extensions?: { code?: string; field?: string } }[] };
}

describe.each(testDialects)('input at fault is a client error (%s)', (dialect) => {
  let t: TestServer;
  let log: CapturedLog;

  const post = async (payload: unknown, headers: Record<string, string> = {}): Promise<Answer> => {
    const response = await fetch(t.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}`, ...headers },
      body: typeof payload === 'string' ? payload : JSON.stringify(payload),
    });
    return { status: response.status, body: (await response.json()) as Answer['body'] };
  };
  const serverErrors = () => log.entries().filter((entry) => Number(entry.level) >= 50);

  beforeAll(async () => {
    log = captureLog('info');
    t = await startTestServer(dialect, { server: { logger: log.logger } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it.each([40_000, 60_000])('snippets(search:) of %i characters is BAD_USER_INPUT naming search', async (length) => {
    const answer = await post({ query: 'query($s: String) { snippets(search: $s) { uid } }', variables: { s: 'a%_'.repeat(length / 3) } });
    expect(answer.status).toBe(200);
    expect(answer.body.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'search' });
    expect(answer.body.errors?.[0]?.message).toMatch(/search/);
    expect(serverErrors()).toEqual([]);
  });

  it('a search of ordinary length still works', async () => {
    const answer = await post({ query: 'query($s: String) { snippets(search: $s) { uid } }', variables: { s: 'x'.repeat(200) } });
    expect(answer.body).toEqual({ data: { snippets: [] } });
  });

  it.each([
    ['an object', (depth: number) => '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)],
    ['an array', (depth: number) => '['.repeat(depth) + ']'.repeat(depth)],
  ])('metadata nested 100,000 deep as %s is BAD_USER_INPUT, and nothing is stored', async (_shape, nest) => {
    const identifier = `deep_${crypto.randomBytes(4).toString('hex')}`;
    const variables = `{"input":{"identifier":"${identifier}","name":"Deep","snippet":"s","metadata":{"deep":${nest(100_000)}}}}`;
    const answer = await post(`{"query":"mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }","variables":${variables}}`);
    expect(answer.status).toBe(200);
    expect(answer.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(answer.body.errors?.[0]?.message).toMatch(/deep|nest/i);
    expect(serverErrors()).toEqual([]);
    const stored = await t.ok<{ snippet: unknown }>('query($i: String) { snippet(identifier: $i) { uid } }', { i: identifier });
    expect(stored.snippet).toBeNull();
  });

  it('metadata sent as the JSON text of a 100,000-deep value is BAD_USER_INPUT naming metadata', async () => {
    const answer = await post({
      query: 'mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }',
      variables: { input: { identifier: 'deep_text', name: 'n', snippet: 's', metadata: `{"a":${'['.repeat(100_000)}${']'.repeat(100_000)}}` } },
    });
    expect(answer.body.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'metadata' });
    expect(answer.body.errors?.[0]?.message).toMatch(/nested/);
    expect(serverErrors()).toEqual([]);
  });

  it('over graphql-ws, deep variables are refused the same way', async () => {
    // The message is written by hand: a client library cannot serialise such a value either.
    const socket = new WebSocket(t.server.wsUrl, 'graphql-transport-ws');
    const messages: { type: string; id?: string; payload?: unknown }[] = [];
    const arrived = (type: string) =>
      new Promise<void>((resolve) => {
        const check = () => (messages.some((m) => m.type === type) ? resolve() : setTimeout(check, 10));
        check();
      });
    socket.on('message', (data: Buffer) => messages.push(JSON.parse(String(data)) as { type: string }));
    await new Promise((resolve) => socket.once('open', resolve));
    socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${ADMIN_TOKEN}` } }));
    await arrived('connection_ack');
    const variables = `{"input":{"identifier":"deep_ws","name":"n","snippet":"s","metadata":{"deep":${'['.repeat(100_000)}${']'.repeat(100_000)}}}}`;
    socket.send(`{"type":"subscribe","id":"1","payload":{"query":"mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }","variables":${variables}}}`);
    await arrived('error');
    socket.close();
    expect(messages.find((m) => m.type === 'error')?.payload).toEqual([expect.objectContaining({ extensions: { code: 'BAD_USER_INPUT', field: 'deep' } })]);
    expect(serverErrors()).toEqual([]);
  });

  it('the same deep value inline in the document is refused too', async () => {
    const answer = await post({ query: `mutation { createSnippet(input: { identifier: "deep_inline", name: "n", snippet: "s", metadata: { a: ${'['.repeat(2000)}${']'.repeat(2000)} } }) { uid } }` });
    expect(answer.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(serverErrors()).toEqual([]);
  });

  it('an APQ hash that does not match its query is BAD_USER_INPUT with 400', async () => {
    const answer = await post({ query: '{ viewer { name } }', extensions: { persistedQuery: { version: 1, sha256Hash: 'f'.repeat(64) } } });
    expect(answer.status).toBe(400);
    expect(answer.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(answer.body.errors?.[0]?.message).toMatch(/sha|hash/i);
    expect(serverErrors()).toEqual([]);
  });

  it('a matching APQ hash is served', async () => {
    const query = '{ viewer { role } }';
    const sha256Hash = crypto.createHash('sha256').update(query).digest('hex');
    const answer = await post({ query, extensions: { persistedQuery: { version: 1, sha256Hash } } });
    expect(answer.body).toEqual({ data: { viewer: { role: 'ADMIN' } } });
  });

  it.each([
    ['application/json', 200],
    ['application/graphql-response+json', 400],
  ])('a subscription sent over HTTP (accepting %s) is BAD_USER_INPUT with %i, pointing at graphql-ws', async (accept, status) => {
    const answer = await post({ query: 'subscription($id: ID!) { runTrace(runId: $id) { sequence } }', variables: { id: crypto.randomUUID() } }, { accept });
    expect(answer.status).toBe(status);
    expect(answer.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(answer.body.errors?.[0]?.message).toMatch(/graphql-ws|WebSocket/i);
    expect(serverErrors()).toEqual([]);
  });
});
