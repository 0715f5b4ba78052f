/**
 * A provider that sends two tool calls of one answer under the same id: both
 * calls are kept, the second as `<id>#2`, each with its own TOOL step and,
 * for a tool that needs approval, its own decision. The provider gets its
 * own id back with each call and each result (OpenAI and Anthropic pair them
 * by id). A real server, real provider sockets, the request bodies as received.
 */
import { anthropicKit } from '../adapters/fixtures/anthropic';
import { FakeProvider } from '../adapters/support/fake-provider';
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { API_KEY, RunKit, expectWellFormedTrace, sleep, uniqueIdentifier } from './run-kit';
import type { ScriptedReply } from './scripted-provider';

const RUN = `id status terminationReason finalContent pendingToolCalls { id name arguments }
  steps { sequence kind round requestedToolCalls { id name arguments } toolCallId toolName toolArguments toolResult toolIsError
          pendingToolCalls { id name arguments } decisions { toolCallId approved reason decidedBy } }`;

interface DupRun {
  id: string;
  status: string;
  terminationReason: string | null;
  finalContent: string | null;
  pendingToolCalls: { id: string; name: string; arguments: unknown }[];
  steps: {
    sequence: number;
    kind: string;
    round: number;
    requestedToolCalls: { id: string; name: string; arguments: unknown }[] | null;
    toolCallId: string | null;
    toolName: string | null;
    toolArguments: unknown;
    toolResult: string | null;
    toolIsError: boolean | null;
    pendingToolCalls: { id: string; name: string; arguments: unknown }[] | null;
    decisions: { toolCallId: string; approved: boolean; reason: string | null; decidedBy: string | null }[] | null;
  }[];
}

const RESOLVE = 'mutation($runId: ID!, $decisions: [ToolDecisionInput!]!) { resolveToolApproval(runId: $runId, decisions: $decisions) { id status } }';

/** Two calculator calls under one id, then the answer. */
const TWO_CALLS_ONE_ID: ScriptedReply[] = [
  {
    toolCalls: [
      { id: 'call_dup', name: 'calculator', arguments: { expression: '2 + 2' } },
      { id: 'call_dup', name: 'calculator', arguments: { expression: '3 * 3' } },
    ],
    usage: { prompt: 5, completion: 5 },
  },
  { text: 'Four and nine.', usage: { prompt: 5, completion: 5 } },
];

describe.each(testDialects)('tool calls sharing an id in one answer (%s)', (dialect) => {
  let ts: TestServer;
  const kit = new RunKit(() => ts);
  const fakes: FakeProvider[] = [];

  beforeAll(async () => {
    ts = await startTestServer(dialect);
  });
  afterAll(async () => {
    await ts?.stop();
    await kit.closeProviders();
    await Promise.all(fakes.map((fake) => fake.close()));
  });

  async function runOf(id: string): Promise<DupRun> {
    return (await ts.ok<{ run: DupRun }>(`query($id: ID!) { run(id: $id) { ${RUN} } }`, { id })).run;
  }

  async function waitFor(id: string, wanted: (status: string) => boolean): Promise<DupRun> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const run = await runOf(id);
      if (wanted(run.status)) return run;
      if (Date.now() > deadline) throw new Error(`run ${id} still ${run.status}`);
      await sleep(20);
    }
  }
  const finished = (status: string) => ['COMPLETED', 'FAILED', 'CANCELLED'].includes(status);

  test.each([
    ['streamed', true],
    ['whole', false],
  ])('OpenAI wire, %s: both calls run, each with its own TOOL step; the provider gets its id back with each call and result', async (_, stream) => {
    const setup = await kit.setup();
    setup.provider.script(...TWO_CALLS_ONE_ID);
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'compute', tools: ['calculator'], stream });
    const run = await waitFor(started.id, finished);

    expect(run).toMatchObject({ status: 'COMPLETED', finalContent: 'Four and nine.' });
    expectWellFormedTrace(run.steps);
    expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'TOOL', 'TOOL', 'CONTEXT', 'REQUEST', 'LLM', 'END']);
    expect(run.steps[2]!.requestedToolCalls).toEqual([
      { id: 'call_dup', name: 'calculator', arguments: { expression: '2 + 2' } },
      { id: 'call_dup#2', name: 'calculator', arguments: { expression: '3 * 3' } },
    ]);
    expect(run.steps.filter((s) => s.kind === 'TOOL').map((s) => [s.toolCallId, s.toolResult, s.toolIsError])).toEqual([
      ['call_dup', '4', false],
      ['call_dup#2', '9', false],
    ]);

    // The next request carries both calls and both results, under the id the provider gave them.
    const messages = setup.provider.requests[1]!.body.messages as { role: string; content: string | null; tool_calls?: { id: string; function: { arguments: string } }[]; tool_call_id?: string }[];
    const assistant = messages.find((m) => m.role === 'assistant')!;
    expect(assistant.tool_calls!.map((c) => [c.id, c.function.arguments])).toEqual([
      ['call_dup', '{"expression":"2 + 2"}'],
      ['call_dup', '{"expression":"3 * 3"}'],
    ]);
    expect(messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, m.content])).toEqual([
      ['call_dup', '4'],
      ['call_dup', '9'],
    ]);
  });

  test('approval: each call needs its own decision; one approved, one denied, each TOOL step follows its own decision', async () => {
    const setup = await kit.setup();
    setup.provider.script(...TWO_CALLS_ONE_ID);
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'compute', tools: ['calculator'], approvalRequired: ['calculator'] });
    const waiting = await waitFor(started.id, (status) => status === 'WAITING_FOR_APPROVAL');
    expect(waiting.pendingToolCalls.map((c) => [c.id, c.arguments])).toEqual([
      ['call_dup', { expression: '2 + 2' }],
      ['call_dup#2', { expression: '3 * 3' }],
    ]);

    // One decision no longer covers both calls.
    const partial = await ts.gql(RESOLVE, { runId: started.id, decisions: [{ toolCallId: 'call_dup', approve: true }] });
    expect(partial.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'decisions' });
    expect(partial.errors?.[0]?.message).toContain('call_dup#2');
    expect((await runOf(started.id)).status).toBe('WAITING_FOR_APPROVAL');

    const decided = await ts.gql(RESOLVE, {
      runId: started.id,
      decisions: [
        { toolCallId: 'call_dup', approve: true },
        { toolCallId: 'call_dup#2', approve: false, reason: 'not the second' },
      ],
    });
    expect(decided.errors).toBeUndefined();
    const run = await waitFor(started.id, finished);
    expect(run).toMatchObject({ status: 'COMPLETED', finalContent: 'Four and nine.' });
    expectWellFormedTrace(run.steps);
    expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'APPROVAL', 'APPROVAL', 'TOOL', 'TOOL', 'CONTEXT', 'REQUEST', 'LLM', 'END']);
    expect(run.steps[3]!.pendingToolCalls!.map((c) => c.id)).toEqual(['call_dup', 'call_dup#2']);
    expect(run.steps[4]!.decisions!.map((d) => [d.toolCallId, d.approved, d.reason])).toEqual([
      ['call_dup', true, null],
      ['call_dup#2', false, 'not the second'],
    ]);
    expect(run.steps.filter((s) => s.kind === 'TOOL').map((s) => [s.toolCallId, s.toolResult, s.toolIsError])).toEqual([
      ['call_dup', '4', false],
      ['call_dup#2', 'Error: tool "calculator" was denied by the operator.', true],
    ]);
    const messages = setup.provider.requests[1]!.body.messages as { role: string; content: string | null; tool_call_id?: string }[];
    expect(messages.filter((m) => m.role === 'tool').map((m) => [m.tool_call_id, m.content])).toEqual([
      ['call_dup', '4'],
      ['call_dup', 'Error: tool "calculator" was denied by the operator.'],
    ]);
  });

  test('Anthropic wire: two tool_use blocks with one id run as two calls; tool_use and tool_result go back under the provider\'s id', async () => {
    const fake = await FakeProvider.start();
    fakes.push(fake);
    const provider = uniqueIdentifier('prov');
    const model = uniqueIdentifier('model');
    const configuration = uniqueIdentifier('conf');
    await ts.ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: provider, name: provider, adapterType: 'anthropic', endpointUrl: fake.url, apiKey: API_KEY, maxRetries: 0, apiTimeout: 30 },
    });
    await ts.ok('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', { input: { identifier: model, name: model, provider, modelId: 'test-model-1' } });
    await ts.ok('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: configuration, name: configuration, model } });
    const toolUse = (expression: string) => ({ type: 'tool_use', id: 'toolu_dup', name: 'calculator', input: { expression } });
    fake.enqueue({
      body: JSON.stringify({
        id: 'msg_dup',
        type: 'message',
        role: 'assistant',
        model: 'test-model-1',
        content: [toolUse('2 + 2'), toolUse('3 * 3')],
        stop_reason: 'tool_use',
        stop_sequence: null,
        usage: { input_tokens: 5, output_tokens: 5 },
      }),
    });
    fake.enqueue({ body: JSON.stringify(anthropicKit.scenarios.text.body) });

    const started = await kit.startRun({ configuration, prompt: 'compute', tools: ['calculator'], stream: false });
    const run = await waitFor(started.id, finished);
    expect(run.status).toBe('COMPLETED');
    expectWellFormedTrace(run.steps);
    expect(run.steps.filter((s) => s.kind === 'TOOL').map((s) => [s.toolCallId, s.toolResult])).toEqual([
      ['toolu_dup', '4'],
      ['toolu_dup#2', '9'],
    ]);
    expect(fake.requests).toHaveLength(2);
    const messages = fake.requests[1]!.json.messages as { role: string; content: string | { type: string; id?: string; tool_use_id?: string; content?: string }[] }[];
    const blocks = messages.flatMap((m) => (typeof m.content === 'string' ? [] : m.content));
    expect(blocks.filter((b) => b.type === 'tool_use').map((b) => b.id)).toEqual(['toolu_dup', 'toolu_dup']);
    expect(blocks.filter((b) => b.type === 'tool_result').map((b) => [b.tool_use_id, b.content])).toEqual([
      ['toolu_dup', '4'],
      ['toolu_dup', '9'],
    ]);
  });
});
