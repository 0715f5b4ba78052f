/**
 * MCP servers through the running service: administrators register a real
 * MCP server (the SDK's, on loopback), import its catalogue, and runs call
 * its tools under nr_llm's rules.
 */
import { createTestDatabase, testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { expectWellFormedTrace, RunKit, uniqueIdentifier } from '../runs/run-kit';
import { McpTestServer } from './mcp-test-server';

const SERVER_FIELDS = `uid identifier name url enabled requiresApproval hasCredential credentialSource authPlacement authHeaderName
  importStatus importError lastImported toolCount lastContact lastLatencyMs
  tools { name description parameters enabledByDefault }
  catalogue { name remoteName description parameters annotations orphaned }`;

interface ServerView {
  uid: number;
  identifier: string;
  enabled: boolean;
  requiresApproval: boolean;
  hasCredential: boolean;
  credentialSource: string;
  importStatus: string;
  importError: string | null;
  lastImported: string | null;
  toolCount: number;
  lastContact: string | null;
  tools: { name: string; description: string; parameters: Record<string, unknown>; enabledByDefault: boolean }[];
  catalogue: { name: string; remoteName: string; annotations: Record<string, unknown>; orphaned: boolean }[];
}

const SECRET = 'mcp-secret-token-Zq81';

describe.each(testDialects)('MCP servers on %s', (dialect) => {
  let t: TestServer;
  let mcp: McpTestServer;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    mcp = await McpTestServer.start();
    t = await startTestServer(dialect, { env: { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', MCP_TIMEOUT_MS: '1500' } });
  });
  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
    await mcp?.stop();
  });

  async function createServer(input: Record<string, unknown> = {}): Promise<ServerView> {
    const data = await t.ok<{ createMcpServer: ServerView }>(`mutation($input: CreateMcpServerInput!) { createMcpServer(input: $input) { ${SERVER_FIELDS} } }`, {
      input: { identifier: uniqueIdentifier('s').slice(0, 20), name: 'Test shop', url: mcp.url, credential: SECRET, enabled: true, ...input },
    });
    return data.createMcpServer;
  }

  async function importTools(uid: number): Promise<ServerView> {
    return (await t.ok<{ importMcpTools: ServerView }>(`mutation($uid: Int!) { importMcpTools(uid: $uid) { ${SERVER_FIELDS} } }`, { uid })).importMcpTools;
  }

  /** An enabled, imported server; its tools run without approval unless the test asks for it. */
  async function importedServer(input: Record<string, unknown> = {}): Promise<ServerView> {
    const server = await createServer({ requiresApproval: false, ...input });
    return importTools(server.uid);
  }

  /** A run whose model asks for the given calls in one turn, then answers "done". */
  async function runCalling(calls: { name: string; arguments: Record<string, unknown> | string }[], tools: string[]) {
    const setup = await kit.setup({ contextLength: 200_000 });
    setup.provider.script({ toolCalls: calls, usage: { prompt: 1, completion: 1 } }, { text: 'done', usage: { prompt: 1, completion: 1 } });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'go', tools, maxRounds: 2 });
    const run = await kit.waitForRun(started.id, 20_000);
    expectWellFormedTrace(run.steps);
    return { run, toolSteps: run.steps.filter((step) => step.kind === 'TOOL'), provider: setup.provider };
  }

  it('registers a server with nr_llm\'s defaults and never shows its credential', async () => {
    const created = await t.ok<{ createMcpServer: ServerView }>(`mutation($input: CreateMcpServerInput!) { createMcpServer(input: $input) { ${SERVER_FIELDS} } }`, {
      input: { identifier: uniqueIdentifier('d').slice(0, 20), name: 'Defaults', url: mcp.url, credential: SECRET },
    });
    expect(created.createMcpServer).toMatchObject({ enabled: false, requiresApproval: true, hasCredential: true, credentialSource: 'stored', importStatus: 'never_imported', toolCount: 0, tools: [] });
    const listed = await t.gql(`{ mcpServers { ${SERVER_FIELDS} } }`);
    expect(JSON.stringify(listed)).not.toContain(SECRET);
    const row = (await t.database.query('SELECT auth_credential FROM tx_nrllm_mcp_server WHERE uid = ?', [created.createMcpServer.uid])) as { auth_credential: string }[];
    expect(row[0]!.auth_credential).toBe('promptwire:stored');
    const stored = (await t.database.query('SELECT credential FROM promptwire_mcp_credential WHERE server_uid = ?', [created.createMcpServer.uid])) as { credential: string }[];
    expect(stored[0]!.credential).toMatch(/^pwenc:v1:/);
    expect(stored[0]!.credential).not.toContain(SECRET);
  });

  it('refuses bad input with a field and stores nothing', async () => {
    const before = await t.ok<{ mcpServers: unknown[] }>('{ mcpServers { uid } }');
    const attempts: [Record<string, unknown>, string][] = [
      [{ identifier: 'Has-Caps' }, 'identifier'],
      [{ identifier: 'x'.repeat(33) }, 'identifier'],
      [{ url: 'ftp://127.0.0.1/mcp' }, 'url'],
      [{ url: 'http://10.1.2.3/mcp' }, 'url'],
      [{ url: 'http://169.254.169.254/latest' }, 'url'],
      [{ authPlacement: 'cookie' }, 'authPlacement'],
      [{ authPlacement: 'header' }, 'authHeaderName'],
      [{ authPlacement: 'header', authHeaderName: 'Host' }, 'authHeaderName'],
      [{ credential: 'line\nbreak' }, 'credential'],
      [{ name: '  ' }, 'name'],
    ];
    for (const [input, field] of attempts) {
      const result = await t.gql(`mutation($input: CreateMcpServerInput!) { createMcpServer(input: $input) { uid } }`, {
        input: { identifier: uniqueIdentifier('b').slice(0, 20), name: 'Bad', url: mcp.url, ...input },
      });
      expect(result.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field });
    }
    const twin = await createServer();
    const duplicate = await t.gql(`mutation($input: CreateMcpServerInput!) { createMcpServer(input: $input) { uid } }`, { input: { identifier: twin.identifier, name: 'Twin', url: mcp.url } });
    expect(duplicate.errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const after = await t.ok<{ mcpServers: unknown[] }>('{ mcpServers { uid } }');
    expect(after.mcpServers).toHaveLength(before.mcpServers.length + 1);
  });

  it('is for administrators only', async () => {
    const editor = await t.tokenFor('EDITOR');
    expect((await t.gql('{ mcpServers { uid } }', {}, editor)).errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const created = await t.gql(`mutation { createMcpServer(input: { identifier: "nope", name: "n", url: "${mcp.url}" }) { uid } }`, {}, editor);
    expect(created.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });

  it('imports the catalogue with normalised schemas, display annotations and status fields; the bearer credential reaches the server', async () => {
    const requestsBefore = mcp.requests.length;
    const server = await importedServer();
    const prefix = `mcp_${server.identifier}_`;
    expect(server.importStatus).toBe('partial');
    expect(server.importError).toContain('"refd" was skipped: it uses "$ref"');
    expect(server.toolCount).toBe(5);
    expect(server.lastImported).not.toBeNull();
    expect(server.lastContact).not.toBeNull();
    expect(server.tools.map((tool) => tool.name)).toEqual(['add', 'big', 'echo', 'fail', 'slow'].map((name) => prefix + name));
    const echo = server.catalogue.find((tool) => tool.remoteName === 'echo')!;
    expect(echo).toMatchObject({ name: `${prefix}echo`, annotations: { readOnlyHint: true }, orphaned: false });
    expect(server.tools.find((tool) => tool.name === `${prefix}echo`)).toMatchObject({
      enabledByDefault: false,
      parameters: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
    });
    const seen = mcp.requests.slice(requestsBefore);
    expect(seen.length).toBeGreaterThan(0);
    for (const headers of seen) expect(headers.authorization).toBe(`Bearer ${SECRET}`);

    const tools = await t.ok<{ tools: { name: string; description: string }[] }>('{ tools { name description } }');
    expect(tools.tools.find((tool) => tool.name === `${prefix}echo`)?.description).toBe('[via the external MCP server "Test shop"] Answers the text it is given.');
  });

  it('sends the credential in the named header when the placement is header', async () => {
    const requestsBefore = mcp.requests.length;
    await importedServer({ authPlacement: 'header', authHeaderName: 'X-Api-Key' });
    const seen = mcp.requests.slice(requestsBefore);
    expect(seen.length).toBeGreaterThan(0);
    for (const headers of seen) {
      expect(headers['x-api-key']).toBe(SECRET);
      expect(headers.authorization).toBeUndefined();
    }
  });

  it('keeps a tool that disappeared as orphaned and no longer offers it', async () => {
    const own = await McpTestServer.start();
    try {
      const server = await importedServer({ url: own.url });
      const gone = `mcp_${server.identifier}_add`;
      own.removeTool('add');
      const again = await importTools(server.uid);
      expect(again.toolCount).toBe(4);
      expect(again.tools.map((tool) => tool.name)).not.toContain(gone);
      expect(again.catalogue.find((tool) => tool.name === gone)).toMatchObject({ orphaned: true });
      expect(again.catalogue[again.catalogue.length - 1]!.name).toBe(gone);
      const setup = await kit.setup();
      const refused = await t.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: setup.configuration, prompt: 'x', tools: [gone] } });
      expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'tools' });
    } finally {
      await own.stop();
    }
  });

  it('a run calls a remote tool and the call and its result are in the trace', async () => {
    const server = await importedServer({ requiresApproval: false });
    const name = `mcp_${server.identifier}_echo`;
    const { run, toolSteps, provider } = await runCalling([{ name, arguments: { text: 'hello from the model' } }], [name]);
    expect(run.status).toBe('COMPLETED');
    expect(toolSteps).toHaveLength(1);
    expect(toolSteps[0]).toMatchObject({ toolName: name, toolArguments: { text: 'hello from the model' }, toolResult: 'hello from the model', toolIsError: false });
    const offered = provider.requests[0]!.body.tools as { function: { name: string } }[];
    expect(offered.map((tool) => tool.function.name)).toEqual([name]);
    const after = await t.ok<{ mcpServers: ServerView[] }>(`{ mcpServers { ${SERVER_FIELDS} } }`);
    expect(after.mcpServers.find((entry) => entry.uid === server.uid)?.lastContact).not.toBeNull();
  });

  it('a tool of a server that requires approval (nr_llm\'s default) waits for a person; approved, it is called', async () => {
    const server = await importedServer({ requiresApproval: true });
    const name = `mcp_${server.identifier}_echo`;
    const tools = await t.ok<{ tools: { name: string; requiresApproval: boolean }[] }>('{ tools { name requiresApproval } }');
    expect(tools.tools.find((tool) => tool.name === name)?.requiresApproval).toBe(true);
    const setup = await kit.setup({ contextLength: 200_000 });
    setup.provider.script({ toolCalls: [{ id: 'call_echo', name, arguments: { text: 'approved text' } }], usage: { prompt: 1, completion: 1 } }, { text: 'done', usage: { prompt: 1, completion: 1 } });
    const callsBefore = mcp.calls.length;
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'go', tools: [name] });
    const waiting = await kit.waitForRun(started.id, 20_000);
    expect(waiting.status).toBe('WAITING_FOR_APPROVAL');
    expect(mcp.calls.length).toBe(callsBefore);
    await t.ok('mutation($id: ID!) { resolveToolApproval(runId: $id, decisions: [{ toolCallId: "call_echo", approve: true }]) { id } }', { id: started.id });
    let run = await kit.run(started.id);
    for (const deadline = Date.now() + 20_000; run.status !== 'COMPLETED' && Date.now() < deadline; run = await kit.run(started.id)) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(run.status).toBe('COMPLETED');
    expect(run.steps.filter((step) => step.kind === 'TOOL').map((step) => step.toolResult)).toEqual(['approved text']);
  });

  it('checks the arguments against the schema before calling, and never calls a disabled server\'s tool', async () => {
    const server = await importedServer();
    const name = `mcp_${server.identifier}_add`;
    const callsBefore = mcp.calls.length;
    const { toolSteps } = await runCalling([{ name, arguments: { a: 'one' } }], [name]);
    expect(toolSteps[0]!.toolResult).toMatch(/^Error: invalid arguments for tool ".*": arguments must have required property 'b'/);
    expect(mcp.calls.length).toBe(callsBefore);

    await t.ok('mutation($uid: Int!) { updateMcpServer(uid: $uid, input: { enabled: false }) { uid } }', { uid: server.uid });
    const setup = await kit.setup();
    const refused = await t.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: setup.configuration, prompt: 'x', tools: [name] } });
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'tools' });
    expect(mcp.calls.length).toBe(callsBefore);
  });

  it('a remote error is the exact failure string; its details stay out of the trace', async () => {
    const server = await importedServer();
    const name = `mcp_${server.identifier}_fail`;
    const { run, toolSteps } = await runCalling([{ name, arguments: {} }], [name]);
    expect(toolSteps[0]).toMatchObject({ toolResult: `Error: tool "${name}" failed.`, toolIsError: true });
    expect(run.status).toBe('COMPLETED');
    expect(JSON.stringify(run)).not.toContain('hunter2');
  });

  it('a call that outlives the time limit fails with the same string and is cancelled at the server', async () => {
    const server = await importedServer();
    const name = `mcp_${server.identifier}_slow`;
    const callsBefore = mcp.calls.length;
    const { toolSteps } = await runCalling([{ name, arguments: { ms: 5000 } }], [name]);
    expect(toolSteps[0]).toMatchObject({ toolResult: `Error: tool "${name}" failed.`, toolIsError: true });
    expect(toolSteps[0]!.durationMs).toBeLessThan(4000);
    expect(mcp.cancelled).toContain(mcp.calls[callsBefore]!.requestId);
  });

  it('caps a large result at 50000 bytes like every tool result', async () => {
    const server = await importedServer();
    const name = `mcp_${server.identifier}_big`;
    const { toolSteps } = await runCalling([{ name, arguments: { bytes: 60_000 } }], [name]);
    expect(Buffer.byteLength(toolSteps[0]!.toolResult!, 'utf8')).toBeLessThanOrEqual(50_000);
    expect(toolSteps[0]!.toolResult!.endsWith('\n…[tool result truncated at 50000 bytes]')).toBe(true);
  });

  it('a run makes at most 20 remote calls; the next is answered with the budget string and not made', async () => {
    const server = await importedServer();
    const name = `mcp_${server.identifier}_echo`;
    const callsBefore = mcp.calls.length;
    const calls = Array.from({ length: 21 }, (_, index) => ({ name, arguments: { text: `call ${index + 1}` } }));
    const { toolSteps } = await runCalling([...calls, { name: 'calculator', arguments: { expression: '1+1' } }], [name, 'calculator']);
    expect(toolSteps).toHaveLength(22);
    expect(toolSteps.slice(0, 20).map((step) => step.toolResult)).toEqual(calls.slice(0, 20).map((call) => call.arguments.text));
    expect(toolSteps[20]).toMatchObject({ toolResult: `Error: this run has used its budget of 20 calls to external tools; "${name}" was not called.`, toolIsError: true });
    expect(toolSteps[21]).toMatchObject({ toolName: 'calculator', toolResult: '2', toolIsError: false });
    expect(mcp.calls.length - callsBefore).toBe(20);
  });

  it('the budget of 20 remote calls holds across an approval pause: a resumed run goes on with its count', async () => {
    const server = await importedServer({ requiresApproval: true });
    const name = `mcp_${server.identifier}_echo`;
    const setup = await kit.setup({ contextLength: 200_000 });
    const first = Array.from({ length: 20 }, (_, index) => ({ id: `call_${index + 1}`, name, arguments: { text: `call ${index + 1}` } }));
    setup.provider.script(
      { toolCalls: first, usage: { prompt: 1, completion: 1 } },
      { toolCalls: [{ id: 'call_21', name, arguments: { text: 'call 21' } }], usage: { prompt: 1, completion: 1 } },
      { text: 'done', usage: { prompt: 1, completion: 1 } },
    );
    const callsBefore = mcp.calls.length;
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'go', tools: [name], maxRounds: 3 });
    const decideAll = async (ids: string[]) => {
      const waiting = await kit.waitForRun(started.id, 20_000);
      expect(waiting.status).toBe('WAITING_FOR_APPROVAL');
      await t.ok('mutation($id: ID!, $d: [ToolDecisionInput!]!) { resolveToolApproval(runId: $id, decisions: $d) { id } }', { id: started.id, d: ids.map((toolCallId) => ({ toolCallId, approve: true })) });
    };
    // Each turn waits for a person; the run is prepared again (new registrations) after each decision.
    await decideAll(first.map((call) => call.id));
    await decideAll(['call_21']);
    let run = await kit.run(started.id);
    for (const deadline = Date.now() + 20_000; run.status !== 'COMPLETED' && Date.now() < deadline; run = await kit.run(started.id)) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(run.status).toBe('COMPLETED');
    const toolSteps = run.steps.filter((step) => step.kind === 'TOOL');
    expect(toolSteps).toHaveLength(21);
    expect(toolSteps[20]).toMatchObject({ toolResult: `Error: this run has used its budget of 20 calls to external tools; "${name}" was not called.`, toolIsError: true });
    expect(mcp.calls.length - callsBefore).toBe(20);
  });

  it('cancelling a run cancels its remote call', async () => {
    const server = await importedServer();
    const name = `mcp_${server.identifier}_slow`;
    const setup = await kit.setup();
    setup.provider.script({ toolCalls: [{ name, arguments: { ms: 10_000 } }] }, { text: 'never' });
    const callsBefore = mcp.calls.length;
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'go', tools: [name] });
    for (let waited = 0; mcp.calls.length === callsBefore; waited += 10) {
      if (waited > 10_000) throw new Error('the remote call never arrived');
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
    await t.ok('mutation($id: ID!) { cancelRun(id: $id) { id } }', { id: started.id });
    const run = await kit.waitForRun(started.id);
    expect(run.status).toBe('CANCELLED');
    const call = mcp.calls[callsBefore]!;
    for (let waited = 0; !mcp.cancelled.includes(call.requestId) && waited < 3000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
    expect(mcp.cancelled).toContain(call.requestId);
    expect(run.steps.filter((step) => step.kind === 'TOOL')).toHaveLength(0);
  });

  it('a server that is down fails only the runs that use it; the connection is re-established when it is back', async () => {
    const own = await McpTestServer.start();
    try {
      const server = await importedServer({ url: own.url });
      const name = `mcp_${server.identifier}_echo`;
      expect((await runCalling([{ name, arguments: { text: 'before' } }], [name])).toolSteps[0]!.toolResult).toBe('before');
      await own.stop();

      const down = await runCalling([{ name, arguments: { text: 'while down' } }], [name]);
      expect(down.toolSteps[0]).toMatchObject({ toolResult: `Error: tool "${name}" failed.`, toolIsError: true });
      expect(down.run.status).toBe('COMPLETED');
      const other = await runCalling([{ name: 'calculator', arguments: { expression: '2*3' } }], ['calculator']);
      expect(other.toolSteps[0]!.toolResult).toBe('6');
      const failedImport = await importTools(server.uid);
      expect(failedImport).toMatchObject({ importStatus: 'error', importError: 'The server could not be reached.', toolCount: 5 });
      expect(failedImport.tools).toHaveLength(5);

      await own.restart();
      expect((await runCalling([{ name, arguments: { text: 'after' } }], [name])).toolSteps[0]!.toolResult).toBe('after');
    } finally {
      await own.stop();
    }
  });

  it('deleting a server removes its tools from runs and from the tools query', async () => {
    const server = await importedServer();
    const name = `mcp_${server.identifier}_echo`;
    expect((await t.ok<{ tools: { name: string }[] }>('{ tools { name } }')).tools.map((tool) => tool.name)).toContain(name);
    expect((await t.ok<{ deleteMcpServer: boolean }>('mutation($uid: Int!) { deleteMcpServer(uid: $uid) }', { uid: server.uid })).deleteMcpServer).toBe(true);
    expect((await t.ok<{ tools: { name: string }[] }>('{ tools { name } }')).tools.map((tool) => tool.name)).not.toContain(name);
    expect((await t.gql('mutation($uid: Int!) { importMcpTools(uid: $uid) { uid } }', { uid: server.uid })).errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });
});

describe('MCP server addresses', () => {
  let t: TestServer;
  let mcp: McpTestServer;
  beforeAll(async () => {
    mcp = await McpTestServer.start();
    t = await startTestServer('sqlite', { database: await createTestDatabase('sqlite') });
  });
  afterAll(async () => {
    await t?.stop();
    await mcp?.stop();
  });

  it('refuses a loopback address at registration unless its host is allowed', async () => {
    const result = await t.gql(`mutation { createMcpServer(input: { identifier: "loop", name: "Loop", url: "${mcp.url}" }) { uid } }`);
    expect(result.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'url' });
    expect(result.errors?.[0]?.message).toContain('WEBHOOK_ALLOWED_HOSTS');
  });

  it('refuses a host name that resolves to loopback when it connects, and sends nothing there', async () => {
    const url = mcp.url.replace('127.0.0.1', 'localhost');
    const created = await t.ok<{ createMcpServer: { uid: number } }>(`mutation { createMcpServer(input: { identifier: "named", name: "Named", url: "${url}" }) { uid } }`);
    const imported = await t.ok<{ importMcpTools: { importStatus: string; importError: string; toolCount: number } }>(
      'mutation($uid: Int!) { importMcpTools(uid: $uid) { importStatus importError toolCount } }',
      { uid: created.createMcpServer.uid },
    );
    expect(imported.importMcpTools.importStatus).toBe('error');
    expect(imported.importMcpTools.importError).toMatch(/^The server address was refused: localhost resolves to the non-public address/);
    expect(mcp.requests).toHaveLength(0);
  });
});
