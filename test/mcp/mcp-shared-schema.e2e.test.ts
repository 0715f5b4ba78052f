/**
 * MCP servers on a database whose nr_llm tables TYPO3 created (its DDL for
 * tx_nrllm_mcp_server and tx_nrllm_mcp_tool): a server TYPO3 configured is
 * read as it is, its vault credential reported as unusable; a server
 * registered here is stored in TYPO3's columns and works.
 */
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { createTypo3Tables } from '../support/typo3-schema';
import { RunKit } from '../runs/run-kit';
import { McpTestServer } from './mcp-test-server';

const now = 1_700_000_000;

describe.each(testDialects)('MCP servers on a TYPO3-owned database on %s (SCHEMA_MODE=shared)', (dialect) => {
  let database: TestDatabase;
  let t: TestServer;
  let mcp: McpTestServer;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    mcp = await McpTestServer.start();
    database = await createTestDatabase(dialect);
    await createTypo3Tables(database);
    // As TYPO3's backend module writes it: a vault UUID as credential, approval left at its default.
    await database.query(
      'INSERT INTO tx_nrllm_mcp_server (pid, identifier, name, url, auth_credential, data_class, enabled, tstamp, crdate) VALUES (?,?,?,?,?,?,?,?,?)',
      [4, 'cms', 'Headless CMS', mcp.url, '01890f3c-7a1e-7cc3-9d6e-6f1f3e2b7a10', 'internal', 1, now, now],
    );
    t = await startTestServer(dialect, { database, env: { SCHEMA_MODE: 'shared', WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' } });
  });
  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
    await mcp?.stop();
  });

  it('reads a server TYPO3 configured; its vault credential is external and the import says why it cannot connect', async () => {
    const data = await t.ok<{ mcpServers: { uid: number; identifier: string; enabled: boolean; requiresApproval: boolean; hasCredential: boolean; credentialSource: string; dataClass: string }[] }>(
      '{ mcpServers { uid identifier enabled requiresApproval hasCredential credentialSource dataClass } }',
    );
    expect(data.mcpServers).toEqual([{ uid: 1, identifier: 'cms', enabled: true, requiresApproval: true, hasCredential: true, credentialSource: 'external', dataClass: 'internal' }]);
    const imported = await t.ok<{ importMcpTools: { importStatus: string; importError: string } }>('mutation { importMcpTools(uid: 1) { importStatus importError } }');
    expect(imported.importMcpTools).toEqual({ importStatus: 'error', importError: expect.stringContaining('TYPO3 vault identifier') });
    expect(mcp.requests).toHaveLength(0);
  });

  it('registers and imports a server into TYPO3\'s tables, and a run calls its tool', async () => {
    const created = await t.ok<{ createMcpServer: { uid: number } }>(`mutation { createMcpServer(input: { identifier: "shop", name: "Shop", url: "${mcp.url}", enabled: true, requiresApproval: false }) { uid } }`);
    const uid = created.createMcpServer.uid;
    const imported = await t.ok<{ importMcpTools: { importStatus: string; toolCount: number } }>('mutation($uid: Int!) { importMcpTools(uid: $uid) { importStatus toolCount } }', { uid });
    expect(imported.importMcpTools).toEqual({ importStatus: 'partial', toolCount: 5 });

    const rows = (await database.query('SELECT tool_name, remote_name, orphaned, server FROM tx_nrllm_mcp_tool WHERE server = ? ORDER BY tool_name', [uid])) as { tool_name: string; remote_name: string; orphaned: number; server: number }[];
    expect(rows.map((row) => [row.tool_name, row.remote_name, Number(row.orphaned)])).toEqual([
      ['mcp_shop_add', 'add', 0],
      ['mcp_shop_big', 'big', 0],
      ['mcp_shop_echo', 'echo', 0],
      ['mcp_shop_fail', 'fail', 0],
      ['mcp_shop_slow', 'slow', 0],
    ]);
    const server = (await database.query('SELECT requires_approval, enabled, import_status, tool_count, last_imported, last_contact FROM tx_nrllm_mcp_server WHERE uid = ?', [uid])) as Record<string, unknown>[];
    expect(server[0]).toMatchObject({ import_status: 'partial' });
    expect(Number(server[0]!.requires_approval)).toBe(0);
    expect(Number(server[0]!.enabled)).toBe(1);
    expect(Number(server[0]!.tool_count)).toBe(5);
    expect(Number(server[0]!.last_imported)).toBeGreaterThan(now);
    expect(Number(server[0]!.last_contact)).toBeGreaterThan(now);

    const setup = await kit.setup({ contextLength: 100_000 });
    setup.provider.script({ toolCalls: [{ name: 'mcp_shop_add', arguments: { a: 2, b: 40 } }] }, { text: 'done' });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'add', tools: ['mcp_shop_add'] });
    const run = await kit.waitForRun(started.id);
    expect(run.steps.find((step) => step.kind === 'TOOL')).toMatchObject({ toolName: 'mcp_shop_add', toolResult: '42', toolIsError: false });
  });
});
