/**
 * TYPO3's tool switches (`tx_nrllm_tool_state`, `tx_nrllm_tool_group_state`)
 * and a configuration's `allowed_tool_groups` are honoured: a tool switched
 * off is missing from `tools`, a new run naming it is refused, and no run
 * offers it to the model.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';

const offeredTo = (body: Record<string, unknown>) => ((body.tools as { function: { name: string } }[] | undefined) ?? []).map((tool) => tool.function.name);

describe.each(testDialects)('tool switches (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });

  afterEach(async () => {
    await t.database.query('DELETE FROM tx_nrllm_tool_state');
    await t.database.query('DELETE FROM tx_nrllm_tool_group_state');
  });

  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
  });

  const toolNames = async () => (await t.ok<{ tools: { name: string; group: string }[] }>('{ tools { name group } }')).tools;

  test('a tool switched off in tx_nrllm_tool_state is missing from tools, refused at start and never offered', async () => {
    expect(await toolNames()).toEqual([
      { name: 'calculator', group: 'promptwire' },
      { name: 'search_snippets', group: 'promptwire' },
      { name: 'get_snippet', group: 'promptwire' },
    ]);
    await t.database.query("INSERT INTO tx_nrllm_tool_state (tool_name, enabled) VALUES ('calculator', 0), ('get_snippet', 1)");
    expect((await toolNames()).map((tool) => tool.name)).toEqual(['search_snippets', 'get_snippet']);

    const setup = await kit.setup();
    const refused = await t.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: setup.configuration, prompt: 'Go.', tools: ['calculator'] } });
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'tools' });
    expect(refused.errors?.[0]?.message).toContain('Tool(s) switched off: calculator');

    setup.provider.script({ text: 'ok', usage: { prompt: 1, completion: 1 } });
    const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Go.' })).id);
    expect(run.status).toBe('COMPLETED');
    expect(offeredTo(setup.provider.requests[0]!.body)).toEqual(['search_snippets', 'get_snippet']);
  });

  test('a group switched off covers its tools, even one switched on by itself', async () => {
    await t.database.query("INSERT INTO tx_nrllm_tool_group_state (group_name, enabled) VALUES ('promptwire', 0)");
    await t.database.query("INSERT INTO tx_nrllm_tool_state (tool_name, enabled) VALUES ('calculator', 1)");
    expect(await toolNames()).toEqual([]);
    const setup = await kit.setup();
    setup.provider.script({ text: 'ok', usage: { prompt: 1, completion: 1 } });
    await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Go.' })).id);
    expect(setup.provider.requests[0]!.body.tools).toBeUndefined();
  });

  test('a configuration\'s allowed_tool_groups keeps only tools of those groups', async () => {
    const setup = await kit.setup();
    await t.database.query("UPDATE tx_nrllm_configuration SET allowed_tool_groups = 'mcp_shop' WHERE uid = ?", [setup.configurationUid]);
    const refused = await t.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: setup.configuration, prompt: 'Go.', tools: ['search_snippets'] } });
    expect(refused.errors?.[0]?.message).toBe("Tool(s) switched off: search_snippets (TYPO3's tool switches, or not in the configuration's allowed tool groups mcp_shop)");
    setup.provider.script({ text: 'ok', usage: { prompt: 1, completion: 1 } });
    await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Go.' })).id);
    expect(setup.provider.requests[0]!.body.tools).toBeUndefined();

    await t.database.query("UPDATE tx_nrllm_configuration SET allowed_tool_groups = ' promptwire , mcp_shop' WHERE uid = ?", [setup.configurationUid]);
    setup.provider.script({ text: 'ok', usage: { prompt: 1, completion: 1 } });
    await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Go.', tools: ['calculator'] })).id);
    expect(offeredTo(setup.provider.requests[1]!.body)).toEqual(['calculator']);
  });
});
