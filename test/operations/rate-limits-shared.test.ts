/**
 * Two server processes on one database sharing Redis draw from one budget
 * per token: what a client spends at one instance is spent at the other.
 * Needs a Redis server: set TEST_REDIS_URL (skipped otherwise).
 */
import { createTestDatabase, type TestDatabase } from '../support/databases';
import { ADMIN_TOKEN } from '../support/server';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { uniqueIdentifier } from '../runs/run-kit';

jest.setTimeout(120_000);

const redisUrl = process.env.TEST_REDIS_URL?.trim() || null;
const describeWithRedis = redisUrl ? describe : describe.skip;

describeWithRedis('rate limits shared through Redis by two instances', () => {
  let database: TestDatabase;
  let first: ServerProcess;
  let second: ServerProcess;
  let configuration: string;
  const env = { REDIS_URL: redisUrl!, RATE_LIMIT_EDITOR_START_RUN: '4', RATE_LIMIT_WINDOW_SECONDS: '3600' };

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    first = await startServerProcess(database, env);
    // The second instance starts after the first has applied the migrations.
    second = await startServerProcess(database, { ...env, RUN_MIGRATIONS: 'false' });
    configuration = uniqueIdentifier('shared');
    const created = await first.gql('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: configuration, name: 'Shared' } });
    expect(created.errors).toBeUndefined();
  });
  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()]);
    await database?.drop();
  });

  async function editorToken(): Promise<string> {
    const created = await first.gql<{ createApiToken: { token: string } }>('mutation($name: String!) { createApiToken(name: $name, role: EDITOR) { token } }', { name: uniqueIdentifier('editor') }, ADMIN_TOKEN);
    return created.data!.createApiToken.token;
  }

  async function startRun(instance: ServerProcess, token: string): Promise<{ status: number; retryAfter: string | null; code: unknown }> {
    const response = await fetch(instance.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${token}` },
      body: JSON.stringify({ query: 'mutation($input: StartRunInput!) { startRun(input: $input) { id } }', variables: { input: { configuration, prompt: 'hello', dryRun: true } } }),
    });
    const body = (await response.json()) as { errors?: { extensions?: { code?: unknown } }[] };
    return { status: response.status, retryAfter: response.headers.get('retry-after'), code: body.errors?.[0]?.extensions?.code ?? null };
  }

  test('what one instance granted counts at the other', async () => {
    const token = await editorToken();
    // Four grants in all, alternating between the instances.
    for (const instance of [first, second, first, second]) expect(await startRun(instance, token)).toMatchObject({ status: 200, code: null });
    for (const instance of [first, second]) {
      const refused = await startRun(instance, token);
      expect(refused).toMatchObject({ status: 429, code: 'TOO_MANY_REQUESTS' });
      expect(Number(refused.retryAfter)).toBeGreaterThanOrEqual(1);
    }
    // Another token has its own budget at both instances.
    const other = await editorToken();
    expect((await startRun(second, other)).status).toBe(200);
    expect((await startRun(first, other)).status).toBe(200);
  });
});
