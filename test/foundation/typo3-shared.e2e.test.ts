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
    await createTypo3Tables(database);
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
    const rows = (await database.query('SELECT sys_language_uid, tags, deleted FROM tx_nrllm_promptsnippet WHERE uid = ?', [created.createSnippet.uid])) as Record<string, unknown>[];
    expect(rows[0]).toEqual({ sys_language_uid: 0, tags: 'style', deleted: 0 });
  });

  it('created only its own tables', async () => {
    const tables = (
      (await database.query(
        dialect === 'mysql' ? 'SELECT table_name AS name FROM information_schema.tables WHERE table_schema = DATABASE()' : "SELECT name FROM sqlite_master WHERE type = 'table'",
      )) as { name: string }[]
    ).map((row) => row.name);
    expect(tables.filter((name) => !name.startsWith('tx_nrllm_') && name !== 'sqlite_sequence').sort()).toEqual(['promptwire_api_token', 'promptwire_mcp_credential', 'promptwire_migrations', 'promptwire_model_price', 'promptwire_prompt_version', 'promptwire_run_lease', 'promptwire_run_request', 'promptwire_webhook', 'promptwire_webhook_delivery']);
  });
});

describe.each(testDialects)('SCHEMA_MODE=shared on %s with TYPO3 tables missing columns', (dialect) => {
  it('refuses to start and lists every missing column', async () => {
    const database = await createTestDatabase(dialect);
    try {
      await createTypo3Tables(database, ['tx_nrllm_promptsnippet.metadata', 'tx_nrllm_configuration.snippet_tags']);
      const config = loadConfig({ DATABASE_URL: database.config.kind === 'sqlite' ? `sqlite:${database.config.file}` : database.config.url, SCHEMA_MODE: 'shared', SECRET_KEY: 'a-test-secret-key-123', PORT: '0', LOG_LEVEL: 'silent' });
      await expect(createServer(config)).rejects.toThrow(/tx_nrllm_promptsnippet\.metadata[\s\S]*tx_nrllm_configuration\.snippet_tags|tx_nrllm_configuration\.snippet_tags[\s\S]*tx_nrllm_promptsnippet\.metadata/);
    } finally {
      await database.drop();
    }
  });
});
