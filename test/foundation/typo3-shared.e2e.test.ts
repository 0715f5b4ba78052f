/**
 * The service on a database whose nr_llm tables TYPO3 created and filled:
 * odd values must read correctly, writes must work, and nothing of TYPO3's
 * schema may change.
 */
import { loadConfig } from '../../src/config';
import { createServer } from '../../src/server';
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { createTypo3Tables } from '../support/typo3-schema';

const now = 1_700_000_000;

async function fillLikeTypo3(database: TestDatabase): Promise<void> {
  const snippet = (values: unknown[]) =>
    database.query('INSERT INTO tx_nrllm_promptsnippet (pid, tstamp, crdate, deleted, hidden, sorting, identifier, name, description, tags, snippet, metadata, is_active) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)', values);
  await snippet([3, now, now, 0, 0, 10, 'nova', 'Nova persona', null, ' Persona , image', 'You are Nova.', '{"voice": "nova"}', 1]);
  await snippet([3, now, now, 0, 0, 20, 'watercolour', 'Watercolour', 'Image style', ' Style , image', '  Soft watercolour look.  ', '{not json', 1]);
  await snippet([3, now, now, 1, 0, 5, 'gone', 'Deleted one', null, 'style', 'never shown', null, 1]);
  await snippet([3, now, now, 0, 1, 30, 'draft', 'Hidden draft', null, 'STYLE', 'not composed', '', 1]);
  await snippet([3, now, now, 0, 0, 40, 'off', 'Inactive', null, 'style', 'not selected', '[]', 0]);
  await snippet([3, now, now, 0, 0, 50, 'lifestyle', 'Lifestyle', null, 'lifestyle', 'not a style', 'null', 1]);
  await database.query('INSERT INTO tx_nrllm_provider (tstamp, crdate, identifier, name, adapter_type, api_key) VALUES (?,?,?,?,?,?)', [now, now, 'openai', 'OpenAI', 'openai', 'vault:7f3a']);
  await database.query('INSERT INTO tx_nrllm_model (tstamp, crdate, identifier, name, provider_uid, model_id, cost_input, cost_output) VALUES (?,?,?,?,?,?,?,?)', [now, now, 'gpt', 'GPT', 1, 'gpt-4o', 250, 1000]);
  await database.query(
    'INSERT INTO tx_nrllm_configuration (tstamp, crdate, identifier, name, model_uid, system_prompt, snippet_tags, temperature, options) VALUES (?,?,?,?,?,?,?,?,?)',
    [now, now, 'images', 'Images', 1, 'Describe images.', ' style ,, persona ', '0.30', 'not json'],
  );
}

describe.each(testDialects)('a TYPO3-owned database on %s (SCHEMA_MODE=shared)', (dialect) => {
  let database: TestDatabase;
  let t: TestServer;
  beforeAll(async () => {
    database = await createTestDatabase(dialect);
    await createTypo3Tables(database, { newerColumns: true });
    await fillLikeTypo3(database);
    t = await startTestServer(dialect, { database, env: { SCHEMA_MODE: 'shared' } });
  });
  afterAll(async () => t?.stop());

  it('reads CSV tags with odd spacing, tinyint flags, unix timestamps and bad metadata', async () => {
    const data = await t.ok<{ snippets: { identifier: string; tags: string[]; metadata: unknown; createdAt: string }[] }>('{ snippets(tag: "style") { identifier tags metadata createdAt } }');
    expect(data.snippets).toEqual([
      { identifier: 'watercolour', tags: ['style', 'image'], metadata: {}, createdAt: new Date(now * 1000).toISOString() },
      { identifier: 'draft', tags: ['style'], metadata: {}, createdAt: new Date(now * 1000).toISOString() },
    ]);
  });

  it('never shows deleted rows', async () => {
    const all = await t.ok<{ snippets: { identifier: string }[] }>('{ snippets { identifier } }');
    expect(all.snippets.map((s) => s.identifier)).not.toContain('gone');
    expect(all.snippets).toHaveLength(5);
  });

  it('composes the configuration exactly as TYPO3 does', async () => {
    const data = await t.ok<{ configuration: { snippetTags: string[]; effectiveSystemPrompt: string; temperature: number; model: { costInput: number; provider: { hasApiKey: boolean; apiKeySource: string } } } }>(
      '{ configuration(identifier: "images") { snippetTags effectiveSystemPrompt temperature model { costInput provider { hasApiKey apiKeySource } } } }',
    );
    expect(data.configuration).toEqual({
      snippetTags: ['style', 'persona'],
      effectiveSystemPrompt: 'Describe images.\n\nWatercolour:\nSoft watercolour look.\n\nNova persona:\nYou are Nova.',
      temperature: 0.3,
      model: { costInput: 250, provider: { hasApiKey: true, apiKeySource: 'external' } },
    });
  });

  it('writes into TYPO3\'s tables without touching their extra columns', async () => {
    const created = await t.ok<{ createSnippet: { uid: number } }>('mutation { createSnippet(input: { identifier: "new_one", name: "New", snippet: "Text", tags: ["style"] }) { uid } }');
    const rows = (await database.query('SELECT future_flag, data_class, tags, deleted FROM tx_nrllm_promptsnippet WHERE uid = ?', [created.createSnippet.uid])) as Record<string, unknown>[];
    expect(rows[0]).toEqual({ future_flag: 1, data_class: '', tags: 'style', deleted: 0 });
  });

  it('stores runs as nr_llm does: lower-case status and kinds, a cost that is never NULL, unclaimed when finished', async () => {
    await t.ok('mutation { createProvider(input: { identifier: "local-demo", name: "Demo", adapterType: "demo" }) { uid } }');
    await t.ok('mutation { createModel(input: { identifier: "demo-model", name: "Demo", provider: "local-demo", modelId: "demo" }) { uid } }');
    await t.ok('mutation { createConfiguration(input: { identifier: "demo-conf", name: "Demo", model: "demo-model", snippetTags: ["persona"] }) { uid } }');
    const started = await t.ok<{ startRun: { id: string } }>('mutation { startRun(input: { configuration: "demo-conf", prompt: "What is 2 + 3?", tools: ["calculator"] }) { id } }');
    let run: { status: string; estimatedCost: number | null } | null = null;
    for (let polls = 0; polls < 1000; polls++) {
      run = (await t.ok<{ run: { status: string; estimatedCost: number | null } }>('query($id: ID!) { run(id: $id) { status estimatedCost } }', { id: started.startRun.id })).run;
      if (run.status !== 'QUEUED' && run.status !== 'RUNNING') break;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    expect(run).toEqual({ status: 'COMPLETED', estimatedCost: null });
    const [row] = (await database.query('SELECT uid, pid, status, be_user, estimated_cost, claimed_by, lease_expires, termination_reason, future_flag FROM tx_nrllm_agentrun WHERE uuid = ?', [started.startRun.id])) as Record<string, unknown>[];
    expect({ ...row, uid: undefined, estimated_cost: Number(row.estimated_cost) }).toEqual({
      uid: undefined,
      pid: 0,
      status: 'completed',
      be_user: 0,
      estimated_cost: 0,
      claimed_by: '',
      lease_expires: 0,
      termination_reason: 'completed',
      future_flag: 1,
    });
    const kinds = ((await database.query('SELECT kind FROM tx_nrllm_agentrun_event WHERE run = ? ORDER BY sequence', [row.uid])) as { kind: string }[]).map((event) => event.kind);
    expect(kinds).toEqual(['context', 'request', 'llm', 'tool', 'context', 'request', 'llm', 'end']);
  });

  it('reads runs nr_llm wrote, whatever their status', async () => {
    for (const [uuid, status] of [['typo3-waiting', 'waiting_for_approval'], ['typo3-old', 'COMPLETED'], ['typo3-odd', 'paused by hand']]) {
      await database.query('INSERT INTO tx_nrllm_agentrun (uuid, status, be_user, claimed_by, lease_expires, tstamp, crdate) VALUES (?,?,?,?,?,?,?)', [uuid, status, 3, 'worker-1', now + 60, now, now]);
    }
    const read = async (id: string) => (await t.ok<{ run: { status: string } }>('query($id: ID!) { run(id: $id) { status } }', { id })).run.status;
    expect([await read('typo3-waiting'), await read('typo3-old'), await read('typo3-odd')]).toEqual(['WAITING_FOR_APPROVAL', 'COMPLETED', 'FAILED']);
    const runs = await t.ok<{ runs: { id: string }[] }>('{ runs(limit: 50) { id } }');
    expect(runs.runs.map((r) => r.id)).toEqual(expect.arrayContaining(['typo3-waiting', 'typo3-old', 'typo3-odd']));
    // nr_llm's own open run is not this service's to close as an orphan.
    const [waiting] = (await database.query("SELECT status FROM tx_nrllm_agentrun WHERE uuid = 'typo3-waiting'")) as { status: string }[];
    expect(waiting.status).toBe('waiting_for_approval');
  });

  it('created only its own tables', async () => {
    const tables = (
      (await database.query(
        dialect === 'mysql' ? 'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = DATABASE()' : "SELECT name FROM sqlite_master WHERE type = 'table'",
      )) as { name: string }[]
    ).map((row) => row.name);
    expect(tables.filter((name) => !name.startsWith('tx_nrllm_') && name !== 'sqlite_sequence').sort()).toEqual(['promptwire_api_token', 'promptwire_configuration_release', 'promptwire_conversation', 'promptwire_mcp_credential', 'promptwire_migrations', 'promptwire_model_price', 'promptwire_prompt_version', 'promptwire_run_approval_deadline', 'promptwire_run_lease', 'promptwire_run_provenance', 'promptwire_run_request', 'promptwire_task_extension', 'promptwire_task_release', 'promptwire_usage_hold', 'promptwire_webhook', 'promptwire_webhook_delivery']);
  });
});

describe.each(testDialects)('SCHEMA_MODE=shared on %s with TYPO3 tables missing columns', (dialect) => {
  it('refuses to start and lists every missing column', async () => {
    const database = await createTestDatabase(dialect);
    try {
      await createTypo3Tables(database, { omit: ['tx_nrllm_promptsnippet.metadata', 'tx_nrllm_configuration.snippet_tags'] });
      const config = loadConfig({ DATABASE_URL: database.config.kind === 'sqlite' ? `sqlite:${database.config.file}` : database.config.url, SCHEMA_MODE: 'shared', SECRET_KEY: 'a-test-secret-key-123', PORT: '0', LOG_LEVEL: 'silent' });
      await expect(createServer(config)).rejects.toThrow(/tx_nrllm_promptsnippet\.metadata[\s\S]*tx_nrllm_configuration\.snippet_tags|tx_nrllm_configuration\.snippet_tags[\s\S]*tx_nrllm_promptsnippet\.metadata/);
    } finally {
      await database.drop();
    }
  });
});
