/**
 * What an MCP server registration may not do, through the running service:
 * read an arbitrary variable of the service's environment as its credential.
 */
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { uniqueIdentifier } from '../runs/run-kit';
import { McpTestServer } from './mcp-test-server';

const ALLOWED_BY_PREFIX = 'prefixed-mcp-token-Rk27';
const ALLOWED_BY_LIST = 'listed-mcp-token-Wd55';

interface ServerView {
  uid: number;
  credentialSource: string;
  importStatus: string;
  importError: string | null;
}

const SERVER_FIELDS = 'uid credentialSource importStatus importError';

describe.each(testDialects)('MCP server hardening on %s', (dialect) => {
  let t: TestServer;
  let mcp: McpTestServer;

  beforeAll(async () => {
    mcp = await McpTestServer.start();
    t = await startTestServer(dialect, {
      env: {
        WEBHOOK_ALLOWED_HOSTS: '127.0.0.1',
        MCP_TIMEOUT_MS: '5000',
        PROVIDER_KEY_ENV_ALLOW: 'LISTED_MCP_TOKEN',
        LISTED_MCP_TOKEN: ALLOWED_BY_LIST,
        PROMPTWIRE_PROVIDER_KEY_MCP: ALLOWED_BY_PREFIX,
      },
    });
  });
  afterAll(async () => {
    await t?.stop();
    await mcp?.stop();
  });

  const create = (input: Record<string, unknown>) =>
    t.gql<{ createMcpServer: ServerView }>(`mutation($input: CreateMcpServerInput!) { createMcpServer(input: $input) { ${SERVER_FIELDS} } }`, {
      input: { identifier: uniqueIdentifier('h').slice(0, 20), name: 'Hardening', url: mcp.url, ...input },
    });
  const update = (uid: number, input: Record<string, unknown>) =>
    t.gql<{ updateMcpServer: ServerView }>(`mutation($uid: Int!, $input: UpdateMcpServerInput!) { updateMcpServer(uid: $uid, input: $input) { ${SERVER_FIELDS} } }`, { uid, input });
  const importTools = async (uid: number) =>
    (await t.ok<{ importMcpTools: ServerView }>(`mutation($uid: Int!) { importMcpTools(uid: $uid) { ${SERVER_FIELDS} } }`, { uid })).importMcpTools;
  const storedCredential = async (uid: number) =>
    ((await t.database.query('SELECT auth_credential FROM tx_nrllm_mcp_server WHERE uid = ?', [uid])) as { auth_credential: string }[])[0]?.auth_credential;

  /** The service's own secrets, as the variables of its environment hold them. */
  const serviceSecrets = () => {
    const database = t.database.config;
    return ['test-secret-key-for-provider-keys', ADMIN_TOKEN, database.kind === 'sqlite' ? database.file : database.url];
  };

  describe('a credential "env:NAME"', () => {
    it('may only name variables of the provider-key allow-list: any other is BAD_USER_INPUT at create and update, and nothing is stored', async () => {
      const before = (await t.ok<{ mcpServers: unknown[] }>('{ mcpServers { uid } }')).mcpServers.length;
      for (const name of ['SECRET_KEY', 'DATABASE_URL', 'ADMIN_TOKEN', 'PATH']) {
        const refused = await create({ credential: `env:${name}` });
        expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'credential' });
        expect(refused.errors?.[0]?.message).toContain('PROVIDER_KEY_ENV_ALLOW');
      }
      expect((await t.ok<{ mcpServers: unknown[] }>('{ mcpServers { uid } }')).mcpServers).toHaveLength(before);

      const server = (await create({ credential: 'a-stored-token' })).data!.createMcpServer;
      const renamed = await update(server.uid, { credential: 'env:SECRET_KEY' });
      expect(renamed.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'credential' });
      expect(await storedCredential(server.uid)).toBe('promptwire:stored');
    });

    it('naming an allowed variable sends its value', async () => {
      for (const [name, value] of [['PROMPTWIRE_PROVIDER_KEY_MCP', ALLOWED_BY_PREFIX], ['LISTED_MCP_TOKEN', ALLOWED_BY_LIST]] as const) {
        const created = await create({ credential: `env:${name}` });
        expect(created.errors).toBeUndefined();
        expect(created.data!.createMcpServer.credentialSource).toBe('environment');
        const requestsBefore = mcp.requests.length;
        expect((await importTools(created.data!.createMcpServer.uid)).importStatus).toBe('partial');
        const seen = mcp.requests.slice(requestsBefore);
        expect(seen.length).toBeGreaterThan(0);
        for (const headers of seen) expect(headers.authorization).toBe(`Bearer ${value}`);
      }
    });

    it('naming another variable in a row written elsewhere (TYPO3, or before this rule) is never sent: the import says why', async () => {
      const server = (await create({})).data!.createMcpServer;
      for (const name of ['SECRET_KEY', 'DATABASE_URL', 'ADMIN_TOKEN']) {
        await t.database.query('UPDATE tx_nrllm_mcp_server SET auth_credential = ? WHERE uid = ?', [`env:${name}`, server.uid]);
        const requestsBefore = mcp.requests.length;
        const imported = await importTools(server.uid);
        expect(imported.importStatus).toBe('error');
        expect(imported.importError).toContain(`env:${name}`);
        expect(imported.importError).toContain('PROVIDER_KEY_ENV_ALLOW');
        expect(mcp.requests.length).toBe(requestsBefore);
      }
      const everything = JSON.stringify(mcp.requests);
      for (const secret of serviceSecrets()) expect(everything).not.toContain(secret);
    });
  });
});
