/**
 * MCP servers hardened, through the running service: a registration may not
 * read an arbitrary variable of the service's environment as its credential;
 * a server that repeats its credential in an error does not get it into the
 * log (captured at trace level) nor into any GraphQL answer; a catalogue
 * with tools this service cannot take is imported without them, and the
 * answer says which were skipped and why.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { captureLog, type CapturedLog } from '../http/support/log-capture';
import { RunKit, uniqueIdentifier } from '../runs/run-kit';
import { McpTestServer, standardTools } from './mcp-test-server';

const ALLOWED_BY_PREFIX = 'prefixed-mcp-token-Rk27';
const ALLOWED_BY_LIST = 'listed-mcp-token-Wd55';

interface ServerView {
  uid: number;
  identifier: string;
  credentialSource: string;
  importStatus: string;
  importError: string | null;
}

const SERVER_FIELDS = 'uid identifier credentialSource importStatus importError';

/** Not shaped like any well-known key: only the exact credential can be redacted. */
const SECRET = 'mcp-credential-Vx83ad';

/** What the server received as credential, wherever it was placed. */
const credentialOf = (headers: IncomingHttpHeaders) => String(headers['x-api-key'] ?? headers.authorization ?? '');

describe.each(testDialects)('MCP server hardening on %s', (dialect) => {
  let t: TestServer;
  let mcp: McpTestServer;
  let log: CapturedLog;
  const kit = new RunKit(() => t);
  /** Every GraphQL answer, searched for the credential. */
  const answers: string[] = [];

  beforeAll(async () => {
    mcp = await McpTestServer.start();
    log = captureLog('trace');
    t = await startTestServer(dialect, {
      server: { logger: log.logger },
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
    await kit.closeProviders();
    await t?.stop();
    await mcp?.stop();
  });

  const create = (input: Record<string, unknown>) =>
    t.gql<{ createMcpServer: ServerView }>(`mutation($input: CreateMcpServerInput!) { createMcpServer(input: $input) { ${SERVER_FIELDS} } }`, {
      input: { identifier: uniqueIdentifier('h').slice(0, 20), name: 'Hardening', url: mcp.url, ...input },
    });
  const update = (uid: number, input: Record<string, unknown>) =>
    t.gql<{ updateMcpServer: ServerView }>(`mutation($uid: Int!, $input: UpdateMcpServerInput!) { updateMcpServer(uid: $uid, input: $input) { ${SERVER_FIELDS} } }`, { uid, input });
  const importTools = async (uid: number) => {
    const result = await t.gql<{ importMcpTools: ServerView }>(`mutation($uid: Int!) { importMcpTools(uid: $uid) { ${SERVER_FIELDS} } }`, { uid });
    answers.push(JSON.stringify(result));
    if (result.errors) throw new Error(`GraphQL errors: ${JSON.stringify(result.errors)}`);
    return result.data!.importMcpTools;
  };
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

  describe('a server that repeats the credential in its errors', () => {
    const placements = [{}, { authPlacement: 'header', authHeaderName: 'X-Api-Key' }];

    it('an import refused with HTTP 401 repeating it: the log and the answer have it redacted', async () => {
      const own = await McpTestServer.start();
      own.refuseWith = (headers) => ({ status: 401, body: `invalid credential "${credentialOf(headers)}" (${encodeURIComponent(SECRET)})` });
      try {
        for (const placement of placements) {
          const server = (await create({ url: own.url, credential: SECRET, ...placement })).data!.createMcpServer;
          const linesBefore = log.entries().length;
          expect(await importTools(server.uid)).toMatchObject({ importStatus: 'error', importError: 'The server answered HTTP 401.' });
          const logged = JSON.stringify(log.entries().slice(linesBefore));
          expect(logged).toContain('An MCP catalogue import failed');
          expect(logged).toContain('"code":401');
          expect(logged).toContain('[redacted]');
          expect(logged).not.toContain(SECRET);
          expect(logged).not.toContain(encodeURIComponent(SECRET));
        }
        expect(own.requests.map(credentialOf)).toEqual(expect.arrayContaining([`Bearer ${SECRET}`, SECRET]));
      } finally {
        await own.stop();
      }
    });

    it('an import answered with a JSON-RPC error repeating it: the log and the answer have it redacted', async () => {
      const own = await McpTestServer.start();
      own.listError = (headers) => `the credential ${credentialOf(headers)} may not list tools`;
      try {
        for (const placement of placements) {
          const server = (await create({ url: own.url, credential: SECRET, ...placement })).data!.createMcpServer;
          const linesBefore = log.entries().length;
          const imported = await importTools(server.uid);
          expect(imported.importStatus).toBe('error');
          expect(imported.importError).toMatch(/^The server answered with an MCP error/);
          const logged = JSON.stringify(log.entries().slice(linesBefore));
          expect(logged).toContain('may not list tools');
          expect(logged).not.toContain(SECRET);
        }
      } finally {
        await own.stop();
      }
    });

    it('a tool call that fails repeating it (thrown or reported): not in the log, the trace nor any answer', async () => {
      const own = await McpTestServer.start([
        ...standardTools(),
        {
          name: 'leak_thrown',
          inputSchema: { type: 'object', properties: {} },
          run: (_args, _signal, headers) => {
            throw new Error(`refused: ${credentialOf(headers)}`);
          },
        },
        { name: 'leak_reported', inputSchema: { type: 'object', properties: {} }, run: (_args, _signal, headers) => ({ error: `refused: ${credentialOf(headers)}` }) },
      ]);
      try {
        const server = (await create({ url: own.url, credential: SECRET, requiresApproval: false, enabled: true, authPlacement: 'header', authHeaderName: 'X-Api-Key' })).data!.createMcpServer;
        expect((await importTools(server.uid)).importStatus).toBe('partial');
        const names = ['leak_thrown', 'leak_reported'].map((name) => `mcp_${server.identifier}_${name}`);
        const setup = await kit.setup({ contextLength: 200_000 });
        setup.provider.script({ toolCalls: names.map((name) => ({ name, arguments: {} })), usage: { prompt: 1, completion: 1 } }, { text: 'done', usage: { prompt: 1, completion: 1 } });
        const linesBefore = log.entries().length;
        const started = await kit.startRun({ configuration: setup.configuration, prompt: 'go', tools: names, maxRounds: 2 });
        const run = await kit.waitForRun(started.id, 20_000);
        answers.push(JSON.stringify(run));
        expect(run.steps.filter((step) => step.kind === 'TOOL').map((step) => step.toolResult)).toEqual(names.map((name) => `Error: tool "${name}" failed.`));
        expect(own.calls.map((call) => call.name)).toEqual(['leak_thrown', 'leak_reported']);
        const logged = JSON.stringify(log.entries().slice(linesBefore));
        expect(logged).toContain('refused: [redacted]');
        expect(logged).not.toContain(SECRET);
      } finally {
        await own.stop();
      }
    });

    it('no answer and no log line of this suite holds the credential', () => {
      expect(answers.length).toBeGreaterThan(4);
      for (const answer of answers) expect(answer).not.toContain(SECRET);
      expect(log.text()).not.toContain(SECRET);
    });
  });

  describe('a catalogue with tools this service cannot take', () => {
    const IMPORT = 'mutation($uid: Int!) { importMcpTools(uid: $uid) { importStatus importError toolCount tools { name } skippedTools { name reason } } }';
    const unusable = () => [
      ...standardTools(),
      { name: 'list_only', description: 'Its arguments are an array.', inputSchema: { type: 'array', items: { type: 'string' } }, run: () => 'never' },
      { name: 42 as unknown as string, description: 'Its name is a number.', inputSchema: { type: 'object', properties: {} }, run: () => 'never' },
    ];

    it('skips each such tool, imports the rest, and says which were skipped and why, in the answer and the log', async () => {
      const own = await McpTestServer.start(unusable());
      own.rawListing = (tools) => ({ tools: [...tools, 'not a tool', { description: 'no name' }] });
      try {
        const server = (await create({ url: own.url })).data!.createMcpServer;
        const linesBefore = log.entries().length;
        const { importMcpTools: imported } = await t.ok<{
          importMcpTools: { importStatus: string; importError: string; toolCount: number; tools: { name: string }[]; skippedTools: { name: string; reason: string }[] };
        }>(IMPORT, { uid: server.uid });
        expect(imported.importStatus).toBe('partial');
        expect(imported.toolCount).toBe(5);
        expect(imported.tools.map((tool) => tool.name)).toEqual(['add', 'big', 'echo', 'fail', 'slow'].map((name) => `mcp_${server.identifier}_${name}`));
        expect(imported.skippedTools).toEqual([
          { name: 'refd', reason: expect.stringContaining('it uses "$ref"') },
          { name: 'list_only', reason: 'its top-level type is not "object"' },
          { name: '42', reason: 'its name is not a string' },
          { name: '', reason: 'the entry is not a tool (an object)' },
          { name: '', reason: 'it has no name' },
        ]);
        for (const line of ['"list_only" was skipped: its top-level type is not "object".', '"42" was skipped: its name is not a string.']) expect(imported.importError).toContain(line);

        const logged = log.entries().slice(linesBefore).find((entry) => entry.msg === 'An MCP catalogue import skipped tools');
        expect(logged).toMatchObject({ server: server.identifier, skipped: expect.arrayContaining([{ name: 'list_only', reason: 'its top-level type is not "object"' }]) });

        // Only the import's own answer knows what it skipped; the stored text says it for later readers.
        const listed = await t.ok<{ mcpServers: { uid: number; importError: string; skippedTools: unknown }[] }>('{ mcpServers { uid importError skippedTools { name } } }');
        expect(listed.mcpServers.find((entry) => entry.uid === server.uid)).toMatchObject({ importError: imported.importError, skippedTools: null });
      } finally {
        await own.stop();
      }
    });

    it('a listing that is no tool list at all fails the import saying so, not as an unreachable server', async () => {
      const own = await McpTestServer.start();
      own.rawListing = () => ({ tools: 'none' });
      try {
        const server = (await create({ url: own.url })).data!.createMcpServer;
        const { importMcpTools: imported } = await t.ok<{ importMcpTools: { importStatus: string; importError: string; skippedTools: unknown[] } }>(IMPORT, { uid: server.uid });
        expect(imported).toMatchObject({ importStatus: 'error', skippedTools: [] });
        expect(imported.importError).toMatch(/^The server's answer to tools\/list is not a tool list/);
      } finally {
        await own.stop();
      }
    });
  });
});
