/**
 * Per-token rate limits through the running server: startRun and other
 * mutations draw from separate budgets per token; a spent budget is HTTP 429
 * with Retry-After and TOO_MANY_REQUESTS, and the same code over graphql-ws;
 * reads and other tokens are unaffected; a refused mutation changes nothing.
 */
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { uniqueIdentifier } from '../runs/run-kit';

const LIMITS = {
  RATE_LIMIT_START_RUN: '3',
  RATE_LIMIT_WRITES: '4',
  RATE_LIMIT_WINDOW_SECONDS: '3600',
  // The administrator builds the fixtures; its writes are not limited here.
  RATE_LIMIT_ADMIN_WRITES: '0',
  RATE_LIMIT_ADMIN_START_RUN: '0',
};

const START_RUN = 'mutation($input: StartRunInput!) { startRun(input: $input) { id } }';

describe.each(testDialects)('rate limits per token (%s)', (dialect) => {
  let ts: TestServer;
  let configuration: string;

  beforeAll(async () => {
    ts = await startTestServer(dialect, { env: LIMITS });
    configuration = uniqueIdentifier('limited');
    await ts.ok('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: configuration, name: 'Limited' } });
  });
  afterAll(async () => {
    await ts?.stop();
  });

  async function newToken(role: 'EDITOR' | 'VIEWER'): Promise<string> {
    const data = await ts.ok<{ createApiToken: { token: string } }>('mutation($name: String!, $role: Role!) { createApiToken(name: $name, role: $role) { token } }', { name: uniqueIdentifier('token'), role });
    return data.createApiToken.token;
  }

  async function post(query: string, variables: Record<string, unknown>, token: string) {
    const response = await fetch(ts.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query, variables }),
    });
    const body = (await response.json()) as { data?: Record<string, unknown> | null; errors?: { message: string; extensions?: Record<string, unknown> }[] };
    return { status: response.status, retryAfter: response.headers.get('retry-after'), body };
  }

  const dryRun = (token: string) => post(START_RUN, { input: { configuration, prompt: 'hello', dryRun: true } }, token);
  const runCount = async () => (await ts.ok<{ runs: unknown[] }>('{ runs(limit: 500) { id } }')).runs.length;

  test('a token that floods startRun gets 429 with Retry-After; another token and reads are unaffected', async () => {
    const flooding = await newToken('EDITOR');
    const other = await newToken('EDITOR');
    for (let i = 0; i < 3; i++) expect(await dryRun(flooding)).toMatchObject({ status: 200, body: { data: { startRun: { id: expect.any(String) } } } });

    const runsBefore = await runCount();
    const refused = await dryRun(flooding);
    expect(refused.status).toBe(429);
    expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    expect(Number(refused.retryAfter)).toBeLessThanOrEqual(3600);
    expect(refused.body.data ?? null).toBeNull();
    expect(refused.body.errors).toHaveLength(1);
    expect(refused.body.errors?.[0]?.extensions).toEqual({ code: 'TOO_MANY_REQUESTS', retryAfter: Number(refused.retryAfter) });
    expect(refused.body.errors?.[0]?.message).toMatch(/at most 3 per 3600 s/);
    expect(await runCount()).toBe(runsBefore);

    expect((await dryRun(other)).status).toBe(200);
    // Reads are never limited, and other mutations have their own budget.
    const read = await post('{ viewer { role } }', {}, flooding);
    expect(read).toMatchObject({ status: 200, body: { data: { viewer: { role: 'EDITOR' } } } });
    const write = await post('mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }', { input: { identifier: uniqueIdentifier('s'), name: 'S', snippet: 'x' } }, flooding);
    expect(write.status).toBe(200);
  });

  test('every startRun of a document counts, aliases included', async () => {
    const token = await newToken('EDITOR');
    const input = { configuration, prompt: 'hello', dryRun: true };
    const two = await post('mutation($input: StartRunInput!) { a: startRun(input: $input) { id } b: startRun(input: $input) { id } }', { input }, token);
    expect(two.status).toBe(200);
    const twoMore = await post('mutation($input: StartRunInput!) { a: startRun(input: $input) { id } b: startRun(input: $input) { id } }', { input }, token);
    expect(twoMore.status).toBe(429);
    // The refused document spent nothing: one more single startRun fits, then none.
    expect((await dryRun(token)).status).toBe(200);
    expect((await dryRun(token)).status).toBe(429);
  });

  test('runTask starts a run: it draws from the startRun budget, not from the writes', async () => {
    const token = await newToken('EDITOR');
    for (let i = 0; i < 3; i++) expect((await dryRun(token)).status).toBe(200);
    const refused = await post('mutation($input: RunTaskInput!) { runTask(input: $input) { attempts } }', { input: { task: 'any_task', input: 'x' } }, token);
    expect(refused.status).toBe(429);
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('TOO_MANY_REQUESTS');
    const write = await post('mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }', { input: { identifier: uniqueIdentifier('s'), name: 'S', snippet: 'x' } }, token);
    expect(write.status).toBe(200);
  });

  test('writes other than startRun have their own budget; a refused write changes nothing', async () => {
    const token = await newToken('EDITOR');
    const create = (identifier: string) => post('mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }', { input: { identifier, name: 'S', snippet: 'x' } }, token);
    for (let i = 0; i < 4; i++) expect((await create(uniqueIdentifier('w'))).status).toBe(200);
    const identifier = uniqueIdentifier('refused');
    const refused = await create(identifier);
    expect(refused.status).toBe(429);
    expect(refused.body.errors?.[0]?.extensions?.code).toBe('TOO_MANY_REQUESTS');
    expect(await ts.ok('query($identifier: String!) { snippet(identifier: $identifier) { uid } }', { identifier })).toEqual({ snippet: null });
    // startRun is still within its own budget.
    expect((await dryRun(token)).status).toBe(200);
  });

  test('over graphql-ws the refusal carries the same code', async () => {
    const token = await newToken('EDITOR');
    for (let i = 0; i < 3; i++) expect((await dryRun(token)).status).toBe(200);
    const client = ts.wsClient(token);
    const result = await new Promise<{ errors?: readonly { message: string; extensions?: Record<string, unknown> }[] }>((resolve) => {
      client.subscribe(
        { query: START_RUN, variables: { input: { configuration, prompt: 'hello', dryRun: true } } },
        { next: () => resolve({}), error: (errors) => resolve({ errors: errors as { message: string; extensions?: Record<string, unknown> }[] }), complete: () => undefined },
      );
    });
    expect(result.errors?.[0]?.extensions?.code).toBe('TOO_MANY_REQUESTS');
    expect(result.errors?.[0]?.message).toMatch(/Retry in \d+ s/);
  });

  test('refusals are counted in /metrics by limit', async () => {
    const response = await fetch(new URL('/metrics', ts.url), { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const text = await response.text();
    expect(text).toMatch(/^promptwire_rate_limited_total\{limit="start_run"\} [1-9]/m);
    expect(text).toMatch(/^promptwire_rate_limited_total\{limit="writes"\} [1-9]/m);
  });
});
