/**
 * Two server processes on one database (what two instances are): creating or
 * renaming to the same identifier at the same moment leaves exactly one
 * non-deleted row with it; the other request is CONFLICT.
 */
import { testDialects, type TestDatabase } from '../support/databases';
import { Instances } from '../support/instances';
import type { ServerProcess } from '../support/server-process';

jest.setTimeout(120_000);

type Result = { data?: Record<string, { uid: number } | null> | null; errors?: { extensions?: { code?: string; field?: string } }[] };

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
  const refusal = lost[0]?.errors?.[0]?.extensions;
  if (dialect === 'sqlite' && refusal?.code === 'SERVICE_UNAVAILABLE') expect(refusal).toEqual({ code: 'SERVICE_UNAVAILABLE', retryable: true });
  else expect(refusal).toEqual({ code: 'CONFLICT', field: 'identifier' });
}

describe.each(testDialects)('identifiers stay unique across two instances (%s)', (dialect) => {
  const instances = new Instances(dialect);
  let database: TestDatabase;
  let first: ServerProcess;
  let second: ServerProcess;

  beforeAll(async () => {
    database = await instances.database();
    // This suite is about uniqueness, not waiting: on a loaded machine a writer may wait long for SQLite's
    // write lock, and the retryable refusal after SQLITE_LOCK_WAIT_MS is tested elsewhere (sqlite-write-lock).
    const patient = { SQLITE_LOCK_WAIT_MS: '60000', SQLITE_BUSY_TIMEOUT_MS: '5000' };
    first = await instances.start(patient);
    // The second instance starts after the first has applied the migrations.
    second = await instances.start({ ...patient, RUN_MIGRATIONS: 'false' });
  });
  afterAll(() => instances.stop());

  async function liveCount(table: string, identifier: string): Promise<number> {
    const rows = (await database.query(`SELECT COUNT(*) AS n FROM ${table} WHERE identifier = ? AND deleted = 0`, [identifier])) as { n: number | string }[];
    return Number(rows[0]?.n);
  }

  async function race(mutation: string, inputType: string, input: (instance: number) => Record<string, unknown>): Promise<Result[]> {
    const query = `mutation($input: ${inputType}!) { ${mutation}(input: $input) { uid } }`;
    return Promise.all([first.gql(query, { input: input(0) }), second.gql(query, { input: input(1) })]) as Promise<Result[]>;
  }

  test('snippets created at once with one identifier: one row, one CONFLICT', async () => {
    for (let i = 0; i < 15; i++) {
      const identifier = `race_snippet_${i}`;
      expectOneWinner(await race('createSnippet', 'CreateSnippetInput', (n) => ({ identifier, name: `from ${n}`, snippet: 'text' })), 'createSnippet', dialect);
      expect(await liveCount('tx_nrllm_promptsnippet', identifier)).toBe(1);
    }
  });

  test('configurations, providers, models and skills created at once: one row each', async () => {
    for (let i = 0; i < 8; i++) {
      const identifier = `race_configuration_${i}`;
      expectOneWinner(await race('createConfiguration', 'CreateConfigurationInput', (n) => ({ identifier, name: `from ${n}` })), 'createConfiguration', dialect);
      expect(await liveCount('tx_nrllm_configuration', identifier)).toBe(1);
    }
    for (let i = 0; i < 4; i++) {
      const provider = `race_provider_${i}`;
      expectOneWinner(await race('createProvider', 'CreateProviderInput', (n) => ({ identifier: provider, name: `from ${n}`, adapterType: 'ollama' })), 'createProvider', dialect);
      expect(await liveCount('tx_nrllm_provider', provider)).toBe(1);
      const model = `race_model_${i}`;
      expectOneWinner(await race('createModel', 'CreateModelInput', (n) => ({ identifier: model, name: `from ${n}`, provider, modelId: 'm' })), 'createModel', dialect);
      expect(await liveCount('tx_nrllm_model', model)).toBe(1);
      const skill = `race_skill_${i}`;
      expectOneWinner(await race('createSkill', 'CreateSkillInput', (n) => ({ identifier: skill, name: `from ${n}`, body: 'Do it well.' })), 'createSkill', dialect);
      expect(await liveCount('tx_nrllm_skill', skill)).toBe(1);
    }
  });

  test('two rows renamed at once to the same identifier: one rename wins', async () => {
    const create = 'mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }';
    const rename = 'mutation($uid: Int!, $identifier: String!) { updateSnippet(uid: $uid, input: { identifier: $identifier }) { uid } }';
    for (let i = 0; i < 10; i++) {
      const a = (await first.gql<{ createSnippet: { uid: number } }>(create, { input: { identifier: `rename_a_${i}`, name: 'a', snippet: 'a' } })).data!.createSnippet.uid;
      const b = (await second.gql<{ createSnippet: { uid: number } }>(create, { input: { identifier: `rename_b_${i}`, name: 'b', snippet: 'b' } })).data!.createSnippet.uid;
      const target = `renamed_${i}`;
      const results = (await Promise.all([first.gql(rename, { uid: a, identifier: target }), second.gql(rename, { uid: b, identifier: target })])) as Result[];
      expectOneWinner(results, 'updateSnippet', dialect);
      expect(await liveCount('tx_nrllm_promptsnippet', target)).toBe(1);
    }
  });
});
