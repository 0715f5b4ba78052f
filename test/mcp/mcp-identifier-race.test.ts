/**
 * Two server processes on one database (what two instances are): registering
 * MCP servers, or renaming them, to the same identifier at the same moment
 * leaves exactly one live server with it (its imported tools are named after
 * it); the other request is CONFLICT, as for snippets and configurations.
 */
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { startServerProcess, type ServerProcess } from '../support/server-process';

jest.setTimeout(120_000);

type Result = { data?: Record<string, { uid: number } | null> | null; errors?: { message?: string; extensions?: { code?: string; field?: string } }[] };

/** Identifiers raced per test: enough that an unlocked check-then-write doubles most of them. */
const ROUNDS = 20;

/**
 * One success and one refusal: CONFLICT on the identifier. On SQLite under
 * heavy machine load the loser may instead be told to retry (a retryable
 * SERVICE_UNAVAILABLE, nothing written); a second success never happens.
 */
function expectOneWinner(results: Result[], mutation: string, dialect: string): void {
  const won = results.filter((result) => !result.errors && result.data?.[mutation]);
  const lost = results.filter((result) => result.errors);
  expect(won).toHaveLength(1);
  expect(lost).toHaveLength(1);
  const refusal = lost[0]?.errors?.[0];
  if (dialect === 'sqlite' && refusal?.extensions?.code === 'SERVICE_UNAVAILABLE') {
    expect(refusal.extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryable: true });
  } else {
    expect(refusal?.extensions).toEqual({ code: 'CONFLICT', field: 'identifier' });
    expect(refusal?.message).toMatch(/MCP server with identifier ".+" already exists/);
  }
}

describe.each(testDialects)('MCP server identifiers stay unique across two instances (%s)', (dialect) => {
  let database: TestDatabase;
  let first: ServerProcess;
  let second: ServerProcess;

  beforeAll(async () => {
    database = await createTestDatabase(dialect);
    // About uniqueness, not waiting: a loaded machine may make a writer wait long for SQLite's write lock.
    const env = { SQLITE_LOCK_WAIT_MS: '60000', SQLITE_BUSY_TIMEOUT_MS: '5000', WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' };
    first = await startServerProcess(database, env);
    // The second instance starts after the first has applied the migrations.
    second = await startServerProcess(database, { ...env, RUN_MIGRATIONS: 'false' });
  });
  afterAll(async () => {
    await Promise.all([first?.stop(), second?.stop()]);
    await database?.drop();
  });

  async function liveCount(identifier: string): Promise<number> {
    const rows = (await database.query('SELECT COUNT(*) AS n FROM tx_nrllm_mcp_server WHERE identifier = ? AND deleted = 0', [identifier])) as { n: number | string }[];
    return Number(rows[0]?.n);
  }

  const create = 'mutation($input: CreateMcpServerInput!) { createMcpServer(input: $input) { uid } }';
  const input = (identifier: string, instance: number) => ({ identifier, name: `from ${instance}`, url: 'http://127.0.0.1:9/mcp' });

  test('servers registered at once with one identifier: one row, one CONFLICT', async () => {
    for (let i = 0; i < ROUNDS; i++) {
      const identifier = `race_mcp_${i}`;
      const results = (await Promise.all([first.gql(create, { input: input(identifier, 0) }), second.gql(create, { input: input(identifier, 1) })])) as Result[];
      expectOneWinner(results, 'createMcpServer', dialect);
      expect(await liveCount(identifier)).toBe(1);
    }
  });

  test('two servers renamed at once to the same identifier: one rename wins', async () => {
    const rename = 'mutation($uid: Int!, $identifier: String!) { updateMcpServer(uid: $uid, input: { identifier: $identifier }) { uid } }';
    for (let i = 0; i < ROUNDS / 2; i++) {
      const a = (await first.ok<{ createMcpServer: { uid: number } }>(create, { input: input(`rename_a_${i}`, 0) })).createMcpServer.uid;
      const b = (await second.ok<{ createMcpServer: { uid: number } }>(create, { input: input(`rename_b_${i}`, 1) })).createMcpServer.uid;
      const target = `renamed_${i}`;
      const results = (await Promise.all([first.gql(rename, { uid: a, identifier: target }), second.gql(rename, { uid: b, identifier: target })])) as Result[];
      expectOneWinner(results, 'updateMcpServer', dialect);
      expect(await liveCount(target)).toBe(1);
    }
  });
});
