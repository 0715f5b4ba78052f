/**
 * Human approval of tool calls, and run budgets: a run whose model asks for a
 * tool that needs approval stores an APPROVAL step and waits in
 * WAITING_FOR_APPROVAL (holding nothing: it survives a restart);
 * resolveToolApproval decides every pending call at once and the run goes on.
 */
import { createTestDatabase, testDialects } from '../support/databases';
import { collect, startTestServer, type TestServer } from '../support/server';
import { RunKit, expectWellFormedTrace, sleep } from './run-kit';
import { withTimeout } from './scripted-provider';

const APPROVAL_FIELDS = `id status terminationReason finalContent pendingToolCalls { id name arguments }
  steps { sequence kind round toolCallId toolName toolResult toolIsError status terminationReason
          pendingToolCalls { id name arguments } decisions { toolCallId approved reason decidedBy } }`;

interface ApprovalRun {
  id: string;
  status: string;
  terminationReason: string | null;
  finalContent: string | null;
  pendingToolCalls: { id: string; name: string; arguments: unknown }[];
  steps: {
    sequence: number;
    kind: string;
    round: number;
    toolCallId: string | null;
    toolName: string | null;
    toolResult: string | null;
    toolIsError: boolean | null;
    status: string | null;
    terminationReason: string | null;
    pendingToolCalls: { id: string; name: string; arguments: unknown }[] | null;
    decisions: { toolCallId: string; approved: boolean; reason: string | null; decidedBy: string | null }[] | null;
  }[];
}

const RESOLVE = `mutation($runId: ID!, $decisions: [ToolDecisionInput!]!) { resolveToolApproval(runId: $runId, decisions: $decisions) { id status pendingToolCalls { id } } }`;

describe.each(testDialects)('tool approval (%s)', (dialect) => {
  let ts: TestServer | null = null;
  const kit = new RunKit(() => ts!);

  afterEach(async () => {
    await ts?.stop();
    ts = null;
    await kit.closeProviders();
  });

  async function approvalRun(id: string): Promise<ApprovalRun> {
    const data = await ts!.ok<{ run: ApprovalRun }>(`query($id: ID!) { run(id: $id) { ${APPROVAL_FIELDS} } }`, { id });
    return data.run;
  }

  async function waitForStatus(id: string, wanted: (status: string) => boolean, timeoutMs = 15_000): Promise<ApprovalRun> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const run = await approvalRun(id);
      if (wanted(run.status)) return run;
      if (Date.now() > deadline) throw new Error(`run ${id} still ${run.status}`);
      await sleep(20);
    }
  }

  const waiting = (status: string) => status === 'WAITING_FOR_APPROVAL';
  const finished = (status: string) => ['COMPLETED', 'FAILED', 'CANCELLED'].includes(status);

  /** A run whose model asks for two calculator calls in one turn; the calculator needs approval in this run. */
  async function startTwoCallRun(): Promise<{ id: string; calls: string[] }> {
    const setup = await kit.setup();
    setup.provider.script(
      {
        toolCalls: [
          { id: 'call_a', name: 'calculator', arguments: { expression: '2 + 2' } },
          { id: 'call_b', name: 'calculator', arguments: { expression: '3 * 3' } },
        ],
        usage: { prompt: 5, completion: 5 },
      },
      { text: 'Done.', usage: { prompt: 5, completion: 5 } },
    );
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'compute', tools: ['calculator'], approvalRequired: ['calculator'] });
    return { id: started.id, calls: ['call_a', 'call_b'] };
  }

  test('a run waits with both calls of the turn pending; partial decisions are refused; approve one, deny one; deciding again is CONFLICT', async () => {
    ts = await startTestServer(dialect);
    const { id } = await startTwoCallRun();
    const paused = await waitForStatus(id, waiting);
    expect(paused.pendingToolCalls).toEqual([
      { id: 'call_a', name: 'calculator', arguments: { expression: '2 + 2' } },
      { id: 'call_b', name: 'calculator', arguments: { expression: '3 * 3' } },
    ]);
    expect(paused.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'APPROVAL']);
    expect(paused.steps[3]!.pendingToolCalls?.map((c) => c.id)).toEqual(['call_a', 'call_b']);
    // No call of the turn ran before the decision.
    expect(paused.steps.some((s) => s.kind === 'TOOL')).toBe(false);

    const partial = await ts.gql(RESOLVE, { runId: id, decisions: [{ toolCallId: 'call_a', approve: true }] });
    expect(partial.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'decisions' });
    const unknown = await ts.gql(RESOLVE, { runId: id, decisions: [{ toolCallId: 'call_a', approve: true }, { toolCallId: 'call_x', approve: true }] });
    expect(unknown.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const byViewer = await ts.gql(RESOLVE, { runId: id, decisions: [{ toolCallId: 'call_a', approve: true }, { toolCallId: 'call_b', approve: true }] }, await ts.tokenFor('VIEWER'));
    expect(byViewer.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect((await approvalRun(id)).status).toBe('WAITING_FOR_APPROVAL');

    const editor = await ts.tokenFor('EDITOR');
    const decided = await ts.gql<{ resolveToolApproval: { status: string } }>(
      RESOLVE,
      { runId: id, decisions: [{ toolCallId: 'call_a', approve: true }, { toolCallId: 'call_b', approve: false, reason: 'not this one' }] },
      editor,
    );
    expect(decided.errors).toBeUndefined();

    const again = await ts.gql(RESOLVE, { runId: id, decisions: [{ toolCallId: 'call_a', approve: true }, { toolCallId: 'call_b', approve: true }] });
    expect(again.errors?.[0]?.extensions?.code).toBe('CONFLICT');

    const done = await waitForStatus(id, finished);
    expect(done).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed', finalContent: 'Done.', pendingToolCalls: [] });
    expectWellFormedTrace(done.steps);
    expect(done.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'APPROVAL', 'APPROVAL', 'TOOL', 'TOOL', 'CONTEXT', 'REQUEST', 'LLM', 'END']);
    expect(done.steps[4]!.decisions).toEqual([
      { toolCallId: 'call_a', approved: true, reason: null, decidedBy: expect.any(String) },
      { toolCallId: 'call_b', approved: false, reason: 'not this one', decidedBy: expect.any(String) },
    ]);
    const tools = done.steps.filter((s) => s.kind === 'TOOL');
    expect(tools.map((s) => [s.toolCallId, s.toolResult, s.toolIsError])).toEqual([
      ['call_a', '4', false],
      ['call_b', 'Error: tool "calculator" was denied by the operator.', true],
    ]);
  });

  test('a waiting run survives a restart and finishes once approved on the new process; a run not waiting is CONFLICT', async () => {
    const database = await createTestDatabase(dialect);
    ts = await startTestServer(dialect, { database, keepDatabase: true });
    const { id } = await startTwoCallRun();
    await waitForStatus(id, waiting);
    const notWaiting = await kit.startRun({ configuration: (await kit.setup()).configuration, prompt: 'x', dryRun: true });

    await ts.stop();
    ts = await startTestServer(dialect, { database });
    const afterRestart = await approvalRun(id);
    expect(afterRestart.status).toBe('WAITING_FOR_APPROVAL');
    expect(afterRestart.pendingToolCalls.map((c) => c.id)).toEqual(['call_a', 'call_b']);

    const watcher = collect<{ runTrace: { sequence: number; kind: string } }>(ts.wsClient(), 'subscription($id: ID!) { runTrace(runId: $id) { sequence kind } }', { id });
    await ts.ok(RESOLVE, { runId: id, decisions: [{ toolCallId: 'call_a', approve: true }, { toolCallId: 'call_b', approve: true }] });
    const done = await waitForStatus(id, finished);
    expect(done.status).toBe('COMPLETED');
    expect(done.steps.filter((s) => s.kind === 'TOOL').map((s) => s.toolResult)).toEqual(['4', '9']);
    await withTimeout(watcher.done, 10_000, 'the trace of the resumed run did not complete');
    expect(watcher.events.map((e) => e.runTrace.sequence)).toEqual(done.steps.map((s) => s.sequence));

    const conflict = await ts.gql(RESOLVE, { runId: notWaiting.id, decisions: [] });
    expect(conflict.errors?.[0]?.extensions?.code).toBe('CONFLICT');
  });

  test('while it waits, the run row holds the state nr_llm keeps in suspended_state (TYPO3\'s approvals inbox reads it); emptied once decided', async () => {
    ts = await startTestServer(dialect);
    const { id } = await startTwoCallRun();
    await waitForStatus(id, waiting);
    const column = async (): Promise<string | null> => {
      const rows = (await ts!.database.query('SELECT suspended_state AS state FROM tx_nrllm_agentrun WHERE uuid = ?', [id])) as { state: string | null }[];
      return rows[0]!.state;
    };
    const state = JSON.parse((await column())!) as Record<string, unknown>;
    expect(state).toMatchObject({
      iterations: 1,
      promptTokens: 5,
      completionTokens: 5,
      allowedToolNames: ['calculator'],
      inputToolName: null,
      inputSchema: [],
      callPreviews: [],
      pendingCalls: [
        { id: 'call_a', type: 'function', function: { name: 'calculator', arguments: { expression: '2 + 2' } } },
        { id: 'call_b', type: 'function', function: { name: 'calculator', arguments: { expression: '3 * 3' } } },
      ],
    });
    const messages = state.messages as { role: string; content: string; tool_calls?: unknown[] }[];
    expect(messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    // ChatMessage::toArray(): content a string, tool-call arguments as JSON text.
    expect(messages[1]).toEqual({
      role: 'assistant',
      content: '',
      tool_calls: [
        { id: 'call_a', type: 'function', function: { name: 'calculator', arguments: '{"expression":"2 + 2"}' } },
        { id: 'call_b', type: 'function', function: { name: 'calculator', arguments: '{"expression":"3 * 3"}' } },
      ],
    });
    await ts.ok(RESOLVE, { runId: id, decisions: [{ toolCallId: 'call_a', approve: true }, { toolCallId: 'call_b', approve: true }] });
    expect((await waitForStatus(id, finished)).status).toBe('COMPLETED');
    expect(await column()).toBe('');
  });

  test('cancelling a waiting run ends it CANCELLED with an END step', async () => {
    ts = await startTestServer(dialect);
    const { id } = await startTwoCallRun();
    await waitForStatus(id, waiting);
    const cancelled = await ts.ok<{ cancelRun: { status: string; terminationReason: string } }>('mutation($id: ID!) { cancelRun(id: $id) { status terminationReason } }', { id });
    expect(cancelled.cancelRun).toEqual({ status: 'CANCELLED', terminationReason: 'cancelled' });
    const run = await approvalRun(id);
    expectWellFormedTrace(run.steps);
    expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'APPROVAL', 'END']);
    const late = await ts.gql(RESOLVE, { runId: id, decisions: [{ toolCallId: 'call_a', approve: true }, { toolCallId: 'call_b', approve: true }] });
    expect(late.errors?.[0]?.extensions?.code).toBe('CONFLICT');
  });

  test('the tools query says which tools need approval; an unknown approvalRequired name is refused', async () => {
    ts = await startTestServer(dialect);
    const tools = await ts.ok<{ tools: { name: string; requiresApproval: boolean }[] }>('{ tools { name requiresApproval } }');
    expect(tools.tools.find((t) => t.name === 'calculator')).toEqual({ name: 'calculator', requiresApproval: false });
    const setup = await kit.setup();
    const refused = await ts.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: setup.configuration, prompt: 'x', approvalRequired: ['no_such_tool'] } });
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'approvalRequired' });
  });
});

describe.each(testDialects)('run budgets (%s)', (dialect) => {
  let ts: TestServer | null = null;
  const kit = new RunKit(() => ts!);

  afterEach(async () => {
    await ts?.stop();
    ts = null;
    await kit.closeProviders();
  });

  test('maxTotalTokens: the round that would go beyond it is not made; the run ends budget_exhausted with an END step', async () => {
    ts = await startTestServer(dialect);
    const setup = await kit.setup();
    setup.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression: '1 + 1' } }], usage: { prompt: 400, completion: 100 } },
      { text: 'never', usage: { prompt: 1, completion: 1 } },
    );
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: ['calculator'], maxTotalTokens: 510 });
    const run = await kit.waitForRun(started.id);
    expect(run).toMatchObject({ status: 'COMPLETED', terminationReason: 'budget_exhausted', totalTokens: 500 });
    expectWellFormedTrace(run.steps);
    expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'TOOL', 'CONTEXT', 'END']);
    expect(setup.provider.requests).toHaveLength(1);
  });

  test('maxCost: a priced model stops before a call whose prompt would cost beyond it; bad budgets are refused', async () => {
    ts = await startTestServer(dialect);
    // 1,000,000 cents per million tokens: one cent ($0.01) per token.
    const setup = await kit.setup({ costInput: 1_000_000, costOutput: 1_000_000 });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [], maxCost: 0.05 });
    const run = await kit.waitForRun(started.id);
    expect(run).toMatchObject({ status: 'COMPLETED', terminationReason: 'budget_exhausted', totalTokens: 0 });
    expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'END']);
    expect(setup.provider.requests).toHaveLength(0);

    for (const [field, value] of [['maxTotalTokens', 0], ['maxCost', -1]] as const) {
      const refused = await ts.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: setup.configuration, prompt: 'x', [field]: value } });
      expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field });
    }
  });

  test('maxCost on a model without prices is refused, naming the model, and nothing is stored; a model with only an extra price is priced', async () => {
    ts = await startTestServer(dialect);
    const setup = await kit.setup();
    const countRuns = async () => Number(((await ts!.database.query('SELECT COUNT(*) AS n FROM tx_nrllm_agentrun')) as { n: unknown }[])[0]!.n);
    const before = await countRuns();
    const refused = await ts.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: setup.configuration, prompt: 'x', tools: [], maxCost: 1 } });
    expect(refused.data).toBeNull();
    expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'maxCost' });
    expect(refused.errors?.[0]?.message).toBe(
      `maxCost needs a priced model: model "${setup.modelIdentifier}" has no prices; set its costInput/costOutput (updateModel) or leave maxCost out`,
    );
    expect(await countRuns()).toBe(before);
    expect(setup.provider.requests).toHaveLength(0);

    // Without maxCost the same model runs (its cost is unknown: null).
    setup.provider.script({ text: 'unpriced', usage: { prompt: 1, completion: 1 } });
    const unbudgeted = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
    expect(unbudgeted).toMatchObject({ status: 'COMPLETED', estimatedCost: null });

    // A cache-read price alone makes the model priced: the budget is accepted.
    await ts.ok('mutation($uid: Int!, $input: UpdateModelInput!) { updateModel(uid: $uid, input: $input) { uid } }', {
      uid: Number(((await ts.database.query('SELECT uid FROM tx_nrllm_model WHERE identifier = ?', [setup.modelIdentifier])) as { uid: unknown }[])[0]!.uid),
      input: { costCacheRead: 0 },
    });
    setup.provider.script({ text: 'priced', usage: { prompt: 1, completion: 1 } });
    const budgeted = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [], maxCost: 1 })).id);
    expect(budgeted).toMatchObject({ status: 'COMPLETED', finalContent: 'priced', estimatedCost: 0 });
  });
});
