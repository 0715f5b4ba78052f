import { createHash } from 'node:crypto';
import { createLogger } from '../../logger';
import { ProviderConnectionError } from '../../providers/adapters/errors';
import type { ChatMessage } from '../../providers/adapters/types';
import { estimateCost, type ModelPrices } from '../../providers/cost';
import { composeSnippets } from '../../prompt/snippet-text';
import { createCalculatorTool } from '../tools/calculator';
import { ToolInputError, createToolRegistry, type ToolRegistration, type ToolRegistry } from '../tools/tool-registry';
import { driveRun, runAgentLoop } from './agent-loop';
import { INTERNAL_ERROR_MESSAGE, clampMaxRounds, RunTakenOver, type AgentLoopHooks, type AgentLoopInput, type AgentLoopLogger } from './loop-contract';
import { assembleRunMessages } from '../../prompt/run-messages';
import type { ContextStep, EndStep, LlmStep, LoopOutcome, RequestStep, LoopDelta, LoopStep, ToolStep } from './loop-step';
import { SKILL_BLOCK_BEGIN, SKILL_BLOCK_END, type SkillInput } from '../../prompt/skill-block';
import { createScriptedAdapter, type ScriptedAdapter, type ScriptedReply } from '../../../test/support/scripted-adapter';
import { TOOL_RESULT_TRUNCATION_MARKER } from './tool-result';

// ---------------------------------------------------------------------------
// Fixtures

function fixedTool(name: string, answer: string, enabledByDefault = true): ToolRegistration {
  return {
    name,
    description: `The ${name} tool.`,
    parameters: { type: 'object', properties: { text: { type: 'string' } }, additionalProperties: false },
    enabledByDefault,
    execute: () => Promise.resolve(answer),
  };
}

const echoTool: ToolRegistration = {
  name: 'echo',
  description: 'Echoes its text.',
  parameters: { type: 'object', properties: { text: { type: 'string' } }, additionalProperties: false },
  enabledByDefault: true,
  execute: (args) => Promise.resolve(`echo: ${String(args.text ?? '')}`),
};

const boomTool: ToolRegistration = {
  name: 'boom',
  description: 'Always fails.',
  parameters: { type: 'object' },
  enabledByDefault: true,
  execute: () => Promise.reject(new Error('connect https://db.internal?password=hunter2 failed')),
};

const refusingTool: ToolRegistration = {
  name: 'refuse',
  description: 'Reports an input error.',
  parameters: { type: 'object' },
  enabledByDefault: true,
  execute: () => Promise.reject(new ToolInputError('no such record "7"')),
};

function defaultRegistry(...extra: ToolRegistration[]): ToolRegistry {
  return createToolRegistry([
    echoTool,
    boomTool,
    refusingTool,
    createCalculatorTool(),
    fixedTool('off', 'OFF', false),
    ...extra,
  ]);
}

function skill(identifier: string, body: string, overrides: Partial<SkillInput> = {}): SkillInput {
  return {
    identifier,
    name: `Skill ${identifier}`,
    body,
    bodyChecksum: createHash('sha256').update(body).digest('hex'),
    source: 0,
    supportStatus: 'full',
    enabled: true,
    orphaned: false,
    ...overrides,
  };
}

interface Harness {
  outcome: LoopOutcome;
  steps: LoopStep[];
  adapter: ScriptedAdapter;
  logger: { warn: jest.Mock; error: jest.Mock };
  deltas: LoopDelta[];
}

type HarnessOptions = Partial<AgentLoopInput> & {
  script?: ScriptedReply[];
  adapter?: ScriptedAdapter;
  recordStep?: (step: LoopStep) => Promise<void>;
};

async function run(options: HarnessOptions = {}): Promise<Harness> {
  const { script = [], recordStep, adapter: givenAdapter, ...overrides } = options;
  const adapter = givenAdapter ?? createScriptedAdapter(script);
  const steps: LoopStep[] = [];
  const deltas: LoopDelta[] = [];
  const logger = { warn: jest.fn(), error: jest.fn() };
  const hooks: AgentLoopHooks = {
    recordStep: async (step) => {
      // Steps are handed over as values: later changes to the loop's state must not show here.
      steps.push(structuredClone(step));
      if (recordStep !== undefined) await recordStep(step);
    },
    onDelta: (delta) => deltas.push(delta),
    logger,
  };
  const input: AgentLoopInput = {
    adapter,
    model: { contextLength: 0, maxOutputTokens: 0, prices: null },
    callOptions: { model: 'test-model', temperature: 0.7, top_p: 1, max_tokens: 500 },
    systemPrompt: 'You are a helpful assistant.',
    prompt: 'What is 2 + 3?',
    tools: { registry: defaultRegistry() },
    ...overrides,
  };
  const outcome = await runAgentLoop(input, hooks);
  return { outcome, steps, adapter, logger, deltas };
}

const kinds = (steps: LoopStep[]): string[] => steps.map((step) => `${step.kind}@${step.round}`);
const ofKind = <K extends LoopStep['kind']>(steps: LoopStep[], kind: K): Extract<LoopStep, { kind: K }>[] =>
  steps.filter((step): step is Extract<LoopStep, { kind: K }> => step.kind === kind);
const endOf = (steps: LoopStep[]): EndStep => {
  const ends = ofKind(steps, 'end');
  expect(ends).toHaveLength(1);
  expect(steps[steps.length - 1]).toBe(ends[0]);
  return ends[0] as EndStep;
};

function expectNoOrphanedToolMessage(messages: readonly ChatMessage[]): void {
  const declared = new Set<string>();
  for (const message of messages) {
    if (message.role === 'assistant') for (const call of message.tool_calls ?? []) declared.add(call.id);
    if (message.role === 'tool') expect(declared.has(message.tool_call_id)).toBe(true);
  }
}

const toolCall = (name: string, args?: Record<string, unknown> | string, id?: string) => ({
  name,
  ...(args !== undefined ? { arguments: args } : {}),
  ...(id !== undefined ? { id } : {}),
});

// ---------------------------------------------------------------------------

describe('a run without tool calls', () => {
  it('records context, request, llm, end in round 1 and completes', async () => {
    const { outcome, steps, adapter } = await run({ script: [{ content: 'It is 5.', usage: [10, 5] }] });
    expect(kinds(steps)).toEqual(['context@1', 'request@1', 'llm@1', 'end@1']);
    expect(outcome).toEqual({
      status: 'COMPLETED',
      terminationReason: 'completed',
      iterations: 1,
      truncated: false,
      finalContent: 'It is 5.',
      promptTokens: 10,
      completionTokens: 5,
      totalTokens: 15,
      estimatedCost: null,
      error: null,
      errorClass: null,
      dryRun: false,
    });
    expect(endOf(steps)).toEqual({ kind: 'end', round: 1, durationMs: 0, ...outcome });
    expect(adapter.requests).toHaveLength(1);
  });

  it('records only the fields that apply to each step', async () => {
    const { steps } = await run({ script: [{ content: 'Hi', thinking: 'hmm', usage: [3, 1], rawFinishReason: 'stop' }] });
    const [context, request, llm] = steps as [ContextStep, RequestStep, LlmStep];
    expect(Object.keys(context).sort()).toEqual(['contextBudget', 'durationMs', 'kind', 'round']);
    // The configuration's max_tokens (500 here) is no reserve: the unknown model's 1000 is.
    expect(context.contextBudget).toEqual({
      window: 8192,
      reserve: 1000,
      safety: 246,
      budget: 8192 - 1000 - 246,
      estimate: expect.any(Number) as number,
      droppedTurns: 0,
      calibration: 1.15,
      fits: true,
    });
    expect(Object.keys(request).sort()).toEqual(['durationMs', 'kind', 'messagesSent', 'round', 'toolsOffered']);
    expect(request.toolsOffered).toEqual(['echo', 'boom', 'refuse', 'calculator']);
    expect(Object.keys(llm).sort()).toEqual(
      [
        'completionTokens',
        'content',
        'durationMs',
        'estimatedCost',
        'finishReason',
        'kind',
        'promptTokens',
        'rawFinishReason',
        'requestedToolCalls',
        'round',
        'thinking',
        'totalTokens',
      ].sort(),
    );
    expect(llm).toMatchObject({
      content: 'Hi',
      thinking: 'hmm',
      finishReason: 'stop',
      rawFinishReason: 'stop',
      promptTokens: 3,
      completionTokens: 1,
      totalTokens: 4,
      estimatedCost: null,
      requestedToolCalls: [],
    });
  });

  it('measures the provider call on a monotonic clock, in milliseconds with two decimals', async () => {
    const { steps } = await run({ script: [{ content: 'slow', delayMs: 40 }] });
    const llm = ofKind(steps, 'llm')[0] as LlmStep;
    expect(llm.durationMs).toBeGreaterThanOrEqual(30);
    expect(Math.round(llm.durationMs * 100) / 100).toBe(llm.durationMs);
    expect(ofKind(steps, 'context')[0]?.durationMs).toBe(0);
  });

  it('sends the call options, without a system_prompt key, and the offered tools', async () => {
    const { adapter } = await run({
      callOptions: { model: 'm', temperature: 0.2, max_tokens: 100, system_prompt: 'ignored', frequency_penalty: 0 },
      script: [{ content: 'ok' }],
    });
    expect(adapter.requests[0]?.options).toEqual({ model: 'm', temperature: 0.2, max_tokens: 100, frequency_penalty: 0 });
    expect(adapter.requests[0]?.tools?.map((definition) => definition.name)).toEqual(['echo', 'boom', 'refuse', 'calculator']);
    expect(adapter.requests[0]?.tools?.[0]).toEqual({
      name: 'echo',
      description: 'Echoes its text.',
      parameters: echoTool.parameters,
    });
  });
});

describe('tool rounds', () => {
  it('appends the assistant turn and one tool message per call, recording a tool step for each, in the model order', async () => {
    const { outcome, steps, adapter } = await run({
      script: [
        {
          content: 'Let me check.',
          toolCalls: [toolCall('echo', { text: 'one' }, 'c1'), toolCall('calculator', '{"expression":"2+3"}', 'c2')],
          usage: [10, 5],
        },
        { content: 'It is 5.', usage: [20, 3] },
      ],
    });
    expect(kinds(steps)).toEqual([
      'context@1',
      'request@1',
      'llm@1',
      'tool@1',
      'tool@1',
      'context@2',
      'request@2',
      'llm@2',
      'end@2',
    ]);
    const [first, second] = ofKind(steps, 'tool') as [ToolStep, ToolStep];
    expect(first).toEqual({
      kind: 'tool',
      round: 1,
      durationMs: expect.any(Number) as number,
      toolCallId: 'c1',
      toolName: 'echo',
      toolArguments: { text: 'one' },
      toolResult: 'echo: one',
      toolIsError: false,
    });
    expect(second).toMatchObject({ toolName: 'calculator', toolArguments: { expression: '2+3' }, toolResult: '5' });

    const llm = ofKind(steps, 'llm')[0] as LlmStep;
    expect(llm.requestedToolCalls).toEqual([
      { id: 'c1', name: 'echo', arguments: { text: 'one' } },
      { id: 'c2', name: 'calculator', arguments: { expression: '2+3' } },
    ]);

    expect(adapter.requests[1]?.messages.slice(-3)).toEqual([
      {
        role: 'assistant',
        content: 'Let me check.',
        tool_calls: [
          { id: 'c1', type: 'function', function: { name: 'echo', arguments: '{"text":"one"}' } },
          { id: 'c2', type: 'function', function: { name: 'calculator', arguments: '{"expression":"2+3"}' } },
        ],
      },
      { role: 'tool', tool_call_id: 'c1', content: 'echo: one' },
      { role: 'tool', tool_call_id: 'c2', content: '5' },
    ]);
    expect((ofKind(steps, 'request')[1] as RequestStep).messagesSent).toEqual(adapter.requests[1]?.messages);
    // Each step keeps the list as it was sent, though the transcript grew after it (the messages are shared values).
    const [firstSent, secondSent] = ofKind(steps, 'request').map((step) => (step as RequestStep).messagesSent);
    expect(firstSent).toHaveLength(secondSent!.length - 3);
    expect(secondSent!.slice(0, firstSent!.length)).toEqual(firstSent);
    expect(outcome).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed', iterations: 2, finalContent: 'It is 5.' });
    expect(outcome).toMatchObject({ promptTokens: 30, completionTokens: 8, totalTokens: 38 });
  });

  it('sends empty arguments as "{}" and an empty assistant text as null', async () => {
    const { adapter, steps } = await run({
      script: [{ toolCalls: [toolCall('echo', '', 'c1')] }, { content: 'done' }],
    });
    expect(adapter.requests[1]?.messages[2]).toEqual({
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'echo', arguments: '{}' } }],
    });
    expect((ofKind(steps, 'tool')[0] as ToolStep).toolArguments).toEqual({});
  });

  it('answers an unknown tool with Error: unknown tool "NAME" and goes on', async () => {
    const { steps, outcome } = await run({ script: [{ toolCalls: [toolCall('teleport')] }, { content: 'recovered' }] });
    expect(ofKind(steps, 'tool')[0]).toMatchObject({
      toolName: 'teleport',
      toolResult: 'Error: unknown tool "teleport"',
      toolIsError: true,
      durationMs: 0,
    });
    expect(outcome.finalContent).toBe('recovered');
  });

  it('answers a registered tool that is not offered with Error: tool "NAME" not permitted and never runs it', async () => {
    const execute = jest.fn(() => Promise.resolve('ran'));
    const guarded: ToolRegistration = { ...fixedTool('guarded', 'x'), execute };
    const { steps } = await run({
      tools: { registry: defaultRegistry(guarded), allowList: ['echo'] },
      script: [{ toolCalls: [toolCall('guarded'), toolCall('off')] }, { content: 'done' }],
    });
    expect(ofKind(steps, 'tool').map((step) => [step.toolResult, step.toolIsError])).toEqual([
      ['Error: tool "guarded" not permitted', true],
      ['Error: tool "off" not permitted', true],
    ]);
    expect(execute).not.toHaveBeenCalled();
  });

  it('answers a tool that throws with exactly Error: tool "NAME" failed. and logs the exception, never sends it', async () => {
    const { steps, logger, adapter } = await run({ script: [{ toolCalls: [toolCall('boom', {}, 'b1')] }, { content: 'ok' }] });
    expect(ofKind(steps, 'tool')[0]).toMatchObject({ toolResult: 'Error: tool "boom" failed.', toolIsError: true });
    expect(JSON.stringify(adapter.requests[1]?.messages)).not.toContain('hunter2');
    expect(JSON.stringify(steps)).not.toContain('hunter2');
    expect(logger.error).toHaveBeenCalledTimes(1);
    const [details, message] = logger.error.mock.calls[0] as [{ tool: string; err: Error }, string];
    expect(details.tool).toBe('boom');
    expect(details.err.message).toContain('hunter2');
    expect(message).toBe('A tool failed');
  });

  it('turns a calculator error into Error: tool "calculator" failed.', async () => {
    const { steps } = await run({
      script: [{ toolCalls: [toolCall('calculator', { expression: '1/0' })] }, { content: 'cannot' }],
    });
    expect((ofKind(steps, 'tool')[0] as ToolStep).toolResult).toBe('Error: tool "calculator" failed.');
  });

  it("sends a ToolInputError's own message", async () => {
    const { steps } = await run({ script: [{ toolCalls: [toolCall('refuse')] }, { content: 'ok' }] });
    expect(ofKind(steps, 'tool')[0]).toMatchObject({ toolResult: 'Error: no such record "7"', toolIsError: true });
  });

  it('answers arguments the schema refuses with an error result saying what is wrong, without running the tool', async () => {
    const { steps, outcome } = await run({
      script: [
        {
          toolCalls: [
            toolCall('calculator', {}),
            toolCall('calculator', { expression: 5 }),
            toolCall('calculator', '{"expression":'),
            toolCall('calculator', '[1]'),
          ],
        },
        { content: 'sorry' },
      ],
    });
    expect(ofKind(steps, 'tool').map((step) => [step.toolResult, step.toolIsError, step.toolArguments])).toEqual([
      ['Error: invalid arguments for tool "calculator": arguments must have required property \'expression\'', true, {}],
      ['Error: invalid arguments for tool "calculator": arguments/expression must be string', true, { expression: 5 }],
      ['Error: invalid arguments for tool "calculator": arguments are not valid JSON', true, '{"expression":'],
      ['Error: invalid arguments for tool "calculator": arguments must be a JSON object', true, [1]],
    ]);
    expect(outcome.terminationReason).toBe('completed');
  });

  it('caps a tool result at 50000 bytes before the model sees it', async () => {
    const big = fixedTool('big', 'START' + 'x'.repeat(60000));
    const { steps, adapter } = await run({
      tools: { registry: defaultRegistry(big) },
      model: { contextLength: 1000000, maxOutputTokens: 0, prices: null },
      script: [{ toolCalls: [toolCall('big', {}, 'g1')] }, { content: 'done' }],
    });
    const result = (ofKind(steps, 'tool')[0] as ToolStep).toolResult;
    expect(Buffer.byteLength(result)).toBe(50000);
    expect(result.startsWith('START')).toBe(true);
    expect(result.endsWith(TOOL_RESULT_TRUNCATION_MARKER)).toBe(true);
    const sent = adapter.requests[1]?.messages.find((message) => message.role === 'tool');
    expect(sent?.content === result).toBe(true);
  });

  it('leaves a tool result of exactly 50000 bytes untouched', async () => {
    const exact = '€'.repeat(16666) + 'ab';
    const { steps } = await run({
      tools: { registry: defaultRegistry(fixedTool('exact', exact)) },
      model: { contextLength: 1000000, maxOutputTokens: 0, prices: null },
      script: [{ toolCalls: [toolCall('exact')] }, { content: 'done' }],
    });
    expect((ofKind(steps, 'tool')[0] as ToolStep).toolResult === exact).toBe(true);
  });
});

describe('the round cap', () => {
  const loopForever: ScriptedReply = () => ({ toolCalls: [toolCall('echo', { text: 'again' })], usage: [10, 5] });

  it('makes one last call without tools at round max + 1 and sums every call: 10/5 + 10/5 + 3/2 = 23/12/35', async () => {
    const { outcome, steps, adapter } = await run({
      maxRounds: 2,
      script: [loopForever, loopForever, { content: 'SYNTHESISED', usage: [3, 2] }],
    });
    expect(kinds(steps)).toEqual([
      'context@1',
      'request@1',
      'llm@1',
      'tool@1',
      'context@2',
      'request@2',
      'llm@2',
      'tool@2',
      'context@3',
      'request@3',
      'llm@3',
      'end@3',
    ]);
    expect(outcome).toMatchObject({
      status: 'COMPLETED',
      terminationReason: 'max_iterations',
      truncated: true,
      iterations: 2,
      finalContent: 'SYNTHESISED',
      promptTokens: 23,
      completionTokens: 12,
      totalTokens: 35,
    });
    const requests = ofKind(steps, 'request');
    expect(requests.map((step) => step.toolsOffered.length > 0)).toEqual([true, true, false]);
    expect(requests[2]?.toolsOffered).toEqual([]);
    expect(adapter.requests[2]?.tools).toBeUndefined();
    expect(ofKind(steps, 'llm')[2]).toMatchObject({ round: 3, content: 'SYNTHESISED' });
    expect(endOf(steps)).toMatchObject({ round: 3, terminationReason: 'max_iterations', totalTokens: 35 });
  });

  it('does not run tools the last call asks for', async () => {
    const { outcome, steps } = await run({
      maxRounds: 1,
      script: [loopForever, { content: 'final', toolCalls: [toolCall('echo')] }],
    });
    expect(ofKind(steps, 'tool')).toHaveLength(1);
    expect(outcome).toMatchObject({ terminationReason: 'max_iterations', finalContent: 'final' });
  });

  it('defaults to 5 rounds', async () => {
    const { outcome, adapter } = await run({
      script: [loopForever, loopForever, loopForever, loopForever, loopForever, { content: 'end' }],
    });
    expect(outcome.iterations).toBe(5);
    expect(adapter.requests).toHaveLength(6);
  });

  it('clamps max rounds: 0 → 1', async () => {
    const { outcome, steps } = await run({ maxRounds: 0, script: [loopForever, { content: 'end' }] });
    expect(outcome).toMatchObject({ iterations: 1, terminationReason: 'max_iterations' });
    expect(ofKind(steps, 'llm').map((step) => step.round)).toEqual([1, 2]);
  });

  it('clamps max rounds: 99 → 20', async () => {
    const script: ScriptedReply[] = [...Array.from({ length: 20 }, () => loopForever), { content: 'end', usage: [1, 1] }];
    const { outcome, steps, adapter } = await run({
      maxRounds: 99,
      model: { contextLength: 1000000, maxOutputTokens: 0, prices: null },
      script,
    });
    expect(outcome).toMatchObject({ iterations: 20, terminationReason: 'max_iterations', promptTokens: 201 });
    expect(adapter.requests).toHaveLength(21);
    expect(ofKind(steps, 'llm').at(-1)?.round).toBe(21);
  });

  it.each([
    [undefined, 5],
    [null, 5],
    [Number.NaN, 5],
    [0, 1],
    [-3, 1],
    [1, 1],
    [2.9, 2],
    [20, 20],
    [21, 20],
    [99, 20],
    [Number.POSITIVE_INFINITY, 5],
  ])('clampMaxRounds(%p) = %p', (value, expected) => {
    expect(clampMaxRounds(value)).toBe(expected);
  });
});

describe('no tools offered', () => {
  it('makes one plain call in round 1 for an empty allow-list', async () => {
    const { outcome, steps, adapter } = await run({
      tools: { registry: defaultRegistry(), allowList: [] },
      script: [{ content: 'plain', toolCalls: [toolCall('echo')] }],
    });
    expect(kinds(steps)).toEqual(['context@1', 'request@1', 'llm@1', 'end@1']);
    expect((ofKind(steps, 'request')[0] as RequestStep).toolsOffered).toEqual([]);
    expect(adapter.requests[0]?.tools).toBeUndefined();
    expect(outcome).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed', iterations: 1, finalContent: 'plain' });
  });

  it('makes one plain call when no registered tool is enabled by default', async () => {
    const { adapter, outcome } = await run({
      tools: { registry: createToolRegistry([fixedTool('off', 'x', false)]) },
      script: [{ content: 'plain' }],
    });
    expect(adapter.requests[0]?.tools).toBeUndefined();
    expect(outcome.iterations).toBe(1);
  });

  it('offers a tool that is not enabled by default when the allow-list names it', async () => {
    const { adapter, steps } = await run({
      tools: { registry: defaultRegistry(), allowList: ['off'] },
      script: [{ toolCalls: [toolCall('off')] }, { content: 'done' }],
    });
    expect(adapter.requests[0]?.tools?.map((definition) => definition.name)).toEqual(['off']);
    expect((ofKind(steps, 'tool')[0] as ToolStep).toolResult).toBe('OFF');
  });

  it('ignores unknown allow-list names, with a warning', async () => {
    const { adapter, logger } = await run({
      tools: { registry: defaultRegistry(), allowList: ['echo', 'ghost'] },
      script: [{ content: 'ok' }],
    });
    expect(adapter.requests[0]?.tools?.map((definition) => definition.name)).toEqual(['echo']);
    expect(logger.warn).toHaveBeenCalledWith({ tools: ['ghost'] }, expect.any(String));
  });
});

describe('assembly', () => {
  const nova = { identifier: 'nova', name: 'Nova persona', snippet: 'You are Nova, a friendly expert.' };
  const formal = { identifier: 'formal', name: 'Formal tone', snippet: ' Use a formal, professional tone of voice. \n' };

  it('puts the system prompt first, forced snippets next, the user prompt last', async () => {
    const { adapter } = await run({ forcedSnippets: [formal], script: [{ content: 'ok' }] });
    expect(adapter.requests[0]?.messages).toEqual([
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'system', content: 'Formal tone:\nUse a formal, professional tone of voice.' },
      { role: 'user', content: 'What is 2 + 3?' },
    ]);
  });

  it('sends no system message for an empty system prompt', async () => {
    const { adapter } = await run({ systemPrompt: '', script: [{ content: 'ok' }] });
    expect(adapter.requests[0]?.messages).toEqual([{ role: 'user', content: 'What is 2 + 3?' }]);
  });

  it('sends a forced snippet that the tags already selected once, and one forced twice twice, as nr_llm does', async () => {
    const systemPrompt =
      'You are a helpful assistant.\n\n' + composeSnippets([{ label: nova.name, snippet: nova.snippet }]);
    const { adapter } = await run({ systemPrompt, forcedSnippets: [nova, formal, formal, nova], script: [{ content: 'ok' }] });
    const messages = adapter.requests[0]?.messages ?? [];
    expect(messages).toEqual([
      { role: 'system', content: systemPrompt },
      { role: 'system', content: 'Formal tone:\nUse a formal, professional tone of voice.' },
      { role: 'system', content: 'Formal tone:\nUse a formal, professional tone of voice.' },
      { role: 'user', content: 'What is 2 + 3?' },
    ]);
    expect(JSON.stringify(messages).split('You are Nova').length - 1).toBe(1);
  });

  it('forces two snippets whose identifiers differ only in case as two snippets', () => {
    const { messages } = assembleRunMessages({
      systemPrompt: '',
      prompt: 'q',
      forcedSnippets: [
        { identifier: 'nova', name: 'Nova', snippet: 'lower' },
        { identifier: 'NOVA', name: 'NOVA', snippet: 'upper' },
      ],
    });
    expect(messages.map((message) => message.content)).toEqual(['Nova:\nlower', 'NOVA:\nupper', 'q']);
  });

  it('skips a forced snippet whose text is empty', () => {
    const { messages } = assembleRunMessages({
      systemPrompt: '',
      prompt: 'q',
      forcedSnippets: [{ identifier: 'blank', name: 'Blank', snippet: '  \n ' }],
    });
    expect(messages).toEqual([{ role: 'user', content: 'q' }]);
  });

  it('injects skills into the first user message, configuration skills first, and never as a system message', async () => {
    const { adapter } = await run({
      configurationSkills: [skill('a', 'Alpha body.'), skill('b', 'Beta body.')],
      forcedSkills: [skill('c', 'Gamma body.'), skill('a', 'Alpha body.')],
      script: [{ content: 'ok' }],
    });
    const messages = adapter.requests[0]?.messages ?? [];
    const user = messages.find((message) => message.role === 'user');
    expect(user?.content.endsWith('\n\nWhat is 2 + 3?')).toBe(true);
    expect(user?.content).toContain(SKILL_BLOCK_BEGIN);
    const content = user?.content ?? '';
    expect(content.indexOf('### Skill: Skill a\nAlpha body.\n')).toBeLessThan(content.indexOf('### Skill: Skill b'));
    expect(content.indexOf('### Skill: Skill b')).toBeLessThan(content.indexOf('### Skill: Skill c'));
    expect(content.split('Alpha body.').length - 1).toBe(1);
    expect(content.indexOf(SKILL_BLOCK_END)).toBeLessThan(content.indexOf('What is 2 + 3?'));
    for (const message of messages.filter((candidate) => candidate.role === 'system')) {
      expect(message.content).not.toContain('Skill');
    }
  });

  it('skips a skill whose body no longer matches its checksum, and logs it', async () => {
    const tampered = skill('t', 'Edited after review.', {
      bodyChecksum: createHash('sha256').update('Reviewed text.').digest('hex'),
    });
    const { adapter, logger } = await run({
      configurationSkills: [tampered, skill('ok', 'Fine body.')],
      script: [{ content: 'ok' }],
    });
    const user = adapter.requests[0]?.messages.find((message) => message.role === 'user');
    expect(user?.content).not.toContain('Edited after review.');
    expect(user?.content).toContain('Fine body.');
    expect(logger.warn).toHaveBeenCalledWith({ skill: 't' }, expect.stringContaining('checksum'));
  });

  it('caps the skill block at 24000 bytes, dropping the last skills, and logs the drop', async () => {
    const big = 'k'.repeat(10000);
    const { adapter, logger } = await run({
      model: { contextLength: 200000, maxOutputTokens: 0, prices: null },
      configurationSkills: [skill('one', big), skill('two', big)],
      forcedSkills: [skill('three', big)],
      script: [{ content: 'ok' }],
    });
    const user = adapter.requests[0]?.messages.find((message) => message.role === 'user');
    const block = user?.content.slice(0, user.content.indexOf('\n\nWhat is 2 + 3?')) ?? '';
    expect(Buffer.byteLength(block)).toBeLessThanOrEqual(24000);
    expect(block).toContain('### Skill: Skill two');
    expect(block).not.toContain('### Skill: Skill three');
    expect(logger.warn).toHaveBeenCalledWith(expect.objectContaining({ skill: 'three' }), expect.any(String));
  });

  it('leaves the user prompt as it is without skills', () => {
    expect(assembleRunMessages({ systemPrompt: '', prompt: 'plain' }).messages).toEqual([{ role: 'user', content: 'plain' }]);
  });
});

describe('dry run', () => {
  const input: HarnessOptions = {
    systemPrompt: 'System.\n\nNova persona:\nYou are Nova.',
    forcedSnippets: [
      { identifier: 'nova', name: 'Nova persona', snippet: 'You are Nova.' },
      { identifier: 'formal', name: 'Formal tone', snippet: 'Be formal.' },
    ],
    configurationSkills: [skill('a', 'Alpha.')],
    forcedSkills: [skill('b', 'Beta.')],
    prompt: 'Tell me about ünïcödé — and "quotes".',
  };

  it('records one assembled step with the messages, calls nothing, and ends with zero rounds', async () => {
    const { outcome, steps, adapter } = await run({ ...input, dryRun: true });
    expect(kinds(steps)).toEqual(['assembled@0', 'end@0']);
    expect(adapter.requests).toHaveLength(0);
    expect(outcome).toMatchObject({
      status: 'COMPLETED',
      terminationReason: 'dry_run',
      iterations: 0,
      truncated: false,
      finalContent: null,
      promptTokens: 0,
      completionTokens: 0,
      totalTokens: 0,
      dryRun: true,
    });
    expect(endOf(steps).dryRun).toBe(true);
  });

  it('records messages byte-identical to the first request of a live run with the same input', async () => {
    const dry = await run({ ...input, dryRun: true });
    const live = await run({ ...input, script: [{ content: 'ok' }] });
    const assembled = dry.steps[0];
    expect(assembled?.kind).toBe('assembled');
    const dryMessages = assembled?.kind === 'assembled' ? assembled.messagesSent : [];
    expect(JSON.stringify(dryMessages)).toBe(JSON.stringify(live.adapter.requests[0]?.messages));
    expect(JSON.stringify(dryMessages)).toBe(JSON.stringify((ofKind(live.steps, 'request')[0] as RequestStep).messagesSent));
  });
});

describe('raw capture', () => {
  it('keeps no raw body and asks for none unless captureRaw is set', async () => {
    const { steps, adapter } = await run({
      callOptions: { model: 'm', captureRaw: true },
      script: [{ content: 'ok', raw: { id: 'resp_1' } }],
    });
    expect('raw' in (ofKind(steps, 'llm')[0] as LlmStep)).toBe(false);
    expect('captureRaw' in (adapter.requests[0]?.options ?? {})).toBe(false);
  });

  it('keeps the raw body on the llm step with captureRaw', async () => {
    const { steps, adapter } = await run({ captureRaw: true, script: [{ content: 'ok', raw: { id: 'resp_1' } }] });
    expect((ofKind(steps, 'llm')[0] as LlmStep).raw).toEqual({ id: 'resp_1' });
    expect(adapter.requests[0]?.options.captureRaw).toBe(true);
  });
});

describe('context window', () => {
  it('stops with context_truncated without calling the model when the prompt cannot fit', async () => {
    const { outcome, steps, adapter, logger } = await run({
      model: { contextLength: 1000, maxOutputTokens: 0, prices: null },
      callOptions: { model: 'm', max_tokens: 100 },
      runMaxTokens: 100,
      prompt: 'x'.repeat(10000),
      script: [{ content: 'never' }],
    });
    expect(adapter.requests).toHaveLength(0);
    expect(kinds(steps)).toEqual(['context@1', 'end@1']);
    expect((steps[0] as ContextStep).contextBudget).toMatchObject({
      window: 1000,
      reserve: 100,
      safety: 30,
      budget: 870,
      fits: false,
      droppedTurns: 0,
    });
    expect(outcome).toMatchObject({
      status: 'COMPLETED',
      terminationReason: 'context_truncated',
      truncated: true,
      iterations: 0,
      finalContent: null,
    });
    expect(logger.warn).toHaveBeenCalled();
  });

  it('drops the oldest whole turns as the transcript grows, never orphaning a tool message', async () => {
    const bulky = fixedTool('bulky', 'z'.repeat(1500));
    const call = (id: string): ScriptedReply => ({ toolCalls: [toolCall('bulky', {}, id)], usage: [1, 1] });
    const { outcome, steps, adapter } = await run({
      model: { contextLength: 2200, maxOutputTokens: 0, prices: null },
      callOptions: { model: 'm', max_tokens: 100 },
      runMaxTokens: 100,
      tools: { registry: createToolRegistry([bulky]) },
      script: [call('t1'), call('t2'), call('t3'), call('t4'), { content: 'done' }],
    });
    expect(outcome.terminationReason).toBe('completed');
    const contexts = ofKind(steps, 'context').map((step) => step.contextBudget);
    expect(contexts.every((budget) => budget.fits)).toBe(true);
    expect(contexts.some((budget) => budget.droppedTurns > 0)).toBe(true);
    for (const request of adapter.requests) {
      expect(request.messages.slice(0, 2)).toEqual([
        { role: 'system', content: 'You are a helpful assistant.' },
        { role: 'user', content: 'What is 2 + 3?' },
      ]);
      expectNoOrphanedToolMessage(request.messages);
    }
    // The newest turn is always sent.
    const last = adapter.requests.at(-1)?.messages ?? [];
    expect(last.at(-1)).toMatchObject({ role: 'tool', tool_call_id: 't4' });
  });

  it('grows the calibration from the reported prompt tokens, never shrinking it', async () => {
    const { steps } = await run({
      script: [
        { toolCalls: [toolCall('echo')], usage: [100000, 1] },
        { toolCalls: [toolCall('echo')], usage: [1, 1] },
        { content: 'done', usage: [1, 1] },
      ],
      model: { contextLength: 100000000, maxOutputTokens: 0, prices: null },
    });
    const calibrations = ofKind(steps, 'context').map((step) => step.contextBudget.calibration);
    expect(calibrations[0]).toBe(1.15);
    expect(calibrations[1]).toBeGreaterThan(1.15);
    expect(calibrations[2]).toBe(calibrations[1]);
  });
});

describe('context window, with nr_llm numbers', () => {
  const echoes: ToolRegistration = {
    name: 'echo',
    description: 'Echoes.',
    parameters: { type: 'object', properties: { text: { type: 'string' } }, additionalProperties: false },
    enabledByDefault: true,
    execute: () => Promise.resolve('echo'),
  };
  const contexts = (steps: LoopStep[]) => ofKind(steps, 'context').map((step) => step.contextBudget);

  it('estimates a first send 15 % high and counts no tools as `[]`: "Go" alone is 12', async () => {
    const { steps } = await run({ systemPrompt: '', prompt: 'Go', tools: { registry: createToolRegistry([echoes]), allowList: [] }, script: [{ content: 'ok' }] });
    expect(contexts(steps)).toEqual([{ window: 8192, reserve: 1000, safety: 246, budget: 6946, estimate: 12, droppedTurns: 0, calibration: 1.15, fits: true }]);
  });

  it('counts an offered tool in its wire shape: "Go" with one tool is 90', async () => {
    const { steps } = await run({ systemPrompt: '', prompt: 'Go', tools: { registry: createToolRegistry([echoes]) }, script: [{ content: 'ok' }] });
    expect(contexts(steps)[0]?.estimate).toBe(90);
  });

  it("reserves the model's maximum output, not the configuration's max_tokens; the run's own maxTokens comes first", async () => {
    const model = { contextLength: 128000, maxOutputTokens: 16384, prices: null };
    const configured = await run({ model, callOptions: { model: 'm', max_tokens: 1000 }, script: [{ content: 'ok' }] });
    expect(contexts(configured.steps)[0]).toMatchObject({ window: 128000, reserve: 16384, safety: 3840, budget: 107776 });
    expect(configured.adapter.requests[0]?.options.max_tokens).toBe(1000);
    const own = await run({ model, callOptions: { model: 'm', max_tokens: 77 }, runMaxTokens: 77, script: [{ content: 'ok' }] });
    expect(contexts(own.steps)[0]).toMatchObject({ reserve: 77, budget: 128000 - 77 - 3840 });
  });

  it('sends as is when the budget is not positive, reported as 0 / 0', async () => {
    const { steps, adapter, logger, outcome } = await run({
      model: { contextLength: 1000, maxOutputTokens: 0, prices: null },
      prompt: 'x'.repeat(10000),
      script: [{ content: 'sent anyway' }],
    });
    expect(contexts(steps)).toEqual([{ window: 0, reserve: 0, safety: 0, budget: 0, estimate: 0, droppedTurns: 0, calibration: 1.15, fits: true }]);
    expect(adapter.requests).toHaveLength(1);
    expect(outcome.terminationReason).toBe('completed');
    expect(logger.warn).toHaveBeenCalledWith(expect.objectContaining({ window: 1000, reserve: 1000, safety: 30, budget: -30 }), expect.any(String));
  });

  it('passes a tool message answering no declared call id through unchanged, reported as 0 / 0', async () => {
    // An empty call id is declared by no call: its result is unpaired.
    const { steps, adapter } = await run({
      tools: { registry: createToolRegistry([echoes]) },
      script: [{ toolCalls: [toolCall('echo', {}, '')], usage: [50, 1] }, { content: 'done' }],
    });
    expect(contexts(steps)[1]).toEqual({ window: 0, reserve: 0, safety: 0, budget: 0, estimate: 0, droppedTurns: 0, calibration: 1.15, fits: true });
    expect(adapter.requests[1]?.messages.at(-1)).toEqual({ role: 'tool', tool_call_id: '', content: 'echo' });
  });

  describe('over several rounds', () => {
    const bulky = fixedTool('bulky', 'z'.repeat(1500));
    const input: HarnessOptions = {
      // 2578 − 1000 − 78 = 1500.
      model: { contextLength: 2578, maxOutputTokens: 0, prices: null },
      tools: { registry: createToolRegistry([bulky]) },
    };
    const call = (id: string, prompt: number): ScriptedReply => ({ toolCalls: [toolCall('bulky', {}, id)], usage: [prompt, 1] });
    const head = [
      { role: 'system', content: 'You are a helpful assistant.' },
      { role: 'user', content: 'What is 2 + 3?' },
    ];

    it('drops the oldest turn in round 3: each report is divided by the calibrated estimate sent, so 1.15 stays', async () => {
      const { steps, adapter } = await run({ ...input, script: [call('t1', 90), call('t2', 760), { content: 'done', usage: [850, 1] }] });
      expect(contexts(steps).map((budget) => [budget.estimate, budget.droppedTurns, budget.calibration, budget.fits])).toEqual([
        [117, 0, 1.15, true],
        [843, 0, 1.15, true],
        [843, 1, 1.15, true],
      ]);
      const third = adapter.requests[2]?.messages ?? [];
      expect(third.slice(0, 2)).toEqual(head);
      expect(third.slice(2).map((message) => message.role === 'tool' ? message.tool_call_id : message.role)).toEqual(['assistant', 't2']);
    });

    it('grows the factor from a report above the calibrated estimate and fits later rounds with it', async () => {
      const { steps } = await run({ ...input, script: [call('t1', 150), call('t2', 900), { content: 'done' }] });
      expect(contexts(steps).map((budget) => [budget.estimate, budget.droppedTurns, budget.calibration])).toEqual([
        [117, 0, 1.15],
        [940, 0, 150 / 117],
        [940, 1, 150 / 117],
      ]);
    });

    it('fits a run taken over from its stored steps exactly as the uninterrupted run', async () => {
      const whole = await run({ ...input, script: [call('t1', 150), call('t2', 900), { content: 'done' }] });
      const cut = whole.steps.findIndex((step) => step.kind === 'context' && step.round === 3);
      const resumed = await run({ ...input, script: [{ content: 'done' }], resume: { steps: whole.steps.slice(0, cut), afterCrash: true } });
      expect(contexts(resumed.steps)).toEqual([contexts(whole.steps)[2]]);
    });

    it('makes a call in flight at the crash again without storing its CONTEXT and REQUEST twice, and marks the answer', async () => {
      const whole = await run({ ...input, script: [call('t1', 150), call('t2', 900), { content: 'done' }] });
      const cut = whole.steps.findIndex((step) => step.kind === 'llm' && step.round === 3);
      // The dead instance stored CONTEXT and REQUEST of round 3; its call never answered.
      const resumed = await run({ ...input, script: [{ content: 'done' }], resume: { steps: whole.steps.slice(0, cut), afterCrash: true } });
      expect(resumed.steps.map((step) => step.kind)).toEqual(['llm', 'end']);
      expect(resumed.steps[0]).toMatchObject({ round: 3, content: 'done', resentAfterTakeover: true });
      const sent = whole.steps[cut - 1] as RequestStep;
      expect(resumed.adapter.requests[0]?.messages).toEqual(sent.messagesSent);
      expect(resumed.outcome).toMatchObject({ terminationReason: 'completed', iterations: 3 });
      expect(whole.steps.find((step) => step.kind === 'llm' && step.round === 3)).not.toHaveProperty('resentAfterTakeover');
    });

    it('stores only the REQUEST of a call whose CONTEXT alone was stored before the crash (nothing was sent)', async () => {
      const whole = await run({ ...input, script: [call('t1', 150), call('t2', 900), { content: 'done' }] });
      const cut = whole.steps.findIndex((step) => step.kind === 'request' && step.round === 3);
      const resumed = await run({ ...input, script: [{ content: 'done' }], resume: { steps: whole.steps.slice(0, cut), afterCrash: true } });
      expect(resumed.steps.map((step) => step.kind)).toEqual(['request', 'llm', 'end']);
      expect(resumed.steps[0]).toEqual(whole.steps[cut]);
      expect(resumed.steps[1]).not.toHaveProperty('resentAfterTakeover');
    });

    it('stores a new CONTEXT when the fit no longer gives the stored one (the first round, re-assembled)', async () => {
      const whole = await run({ ...input, script: [{ content: 'done' }] });
      const stored = whole.steps.slice(0, 1) as ContextStep[];
      const changed: LoopStep = { ...stored[0]!, contextBudget: { ...stored[0]!.contextBudget, estimate: stored[0]!.contextBudget.estimate + 1 } };
      const resumed = await run({ ...input, script: [{ content: 'done' }], resume: { steps: [changed], afterCrash: true } });
      expect(resumed.steps.map((step) => step.kind)).toEqual(['context', 'request', 'llm', 'end']);
      expect(resumed.steps[0]).toEqual(whole.steps[0]);
    });

    it("starts afresh at 1.15 after a person's decision, as nr_llm's resumed loop does", async () => {
      const steps: LoopStep[] = [];
      const hooks: AgentLoopHooks = {
        recordStep: (step) => {
          steps.push(structuredClone(step));
          return Promise.resolve();
        },
        logger: { warn: jest.fn(), error: jest.fn() },
      };
      const base: AgentLoopInput = {
        adapter: createScriptedAdapter([call('t1', 150)]),
        model: { contextLength: 2578, maxOutputTokens: 0, prices: null },
        callOptions: { model: 'm' },
        systemPrompt: 'You are a helpful assistant.',
        prompt: 'What is 2 + 3?',
        tools: { registry: createToolRegistry([bulky]) },
        approvalRequired: ['bulky'],
      };
      expect((await driveRun(base, hooks)).status).toBe('WAITING_FOR_APPROVAL');
      steps.push({ kind: 'approval', round: 1, durationMs: 0, decisions: [{ toolCallId: 't1', approved: true, reason: null, decidedBy: 'editor' }] });
      const after = await driveRun({ ...base, adapter: createScriptedAdapter([{ content: 'done' }]), resume: { steps: [...steps], afterCrash: false } }, hooks);
      expect(after).toMatchObject({ terminationReason: 'completed' });
      // Without the fresh start round 2 would be ceil(733 × 150 / 117) = 940.
      expect(contexts(steps).map((budget) => [budget.estimate, budget.calibration])).toEqual([
        [117, 1.15],
        [843, 1.15],
      ]);
    });
  });
});

describe('cancellation', () => {
  it('stops at once mid-call', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    const { outcome, steps } = await run({ signal: controller.signal, script: [{ hang: true }] });
    expect(kinds(steps)).toEqual(['context@1', 'request@1', 'end@1']);
    expect(outcome).toMatchObject({ status: 'CANCELLED', terminationReason: 'cancelled', error: null, iterations: 0 });
    expect(endOf(steps).status).toBe('CANCELLED');
  });

  it('stops at once mid-call even if the adapter ignores the signal', async () => {
    const controller = new AbortController();
    setTimeout(() => controller.abort(), 20);
    const never: ScriptedReply = () => new Promise(() => undefined);
    const { outcome } = await run({ signal: controller.signal, script: [never] });
    expect(outcome.terminationReason).toBe('cancelled');
  });

  it('stops at once mid-tool, passing the signal to the tool', async () => {
    const controller = new AbortController();
    const seen: AbortSignal[] = [];
    const stuck: ToolRegistration = {
      ...fixedTool('stuck', ''),
      execute: (_args, context) => {
        seen.push(context.signal);
        setTimeout(() => controller.abort(), 10);
        return new Promise(() => undefined);
      },
    };
    const { outcome, steps, adapter } = await run({
      signal: controller.signal,
      tools: { registry: defaultRegistry(stuck) },
      script: [{ toolCalls: [toolCall('stuck'), toolCall('echo')], usage: [4, 2] }, { content: 'never' }],
    });
    expect(kinds(steps)).toEqual(['context@1', 'request@1', 'llm@1', 'end@1']);
    expect(seen[0]).toBe(controller.signal);
    expect(adapter.requests).toHaveLength(1);
    expect(outcome).toMatchObject({
      status: 'CANCELLED',
      terminationReason: 'cancelled',
      iterations: 1,
      promptTokens: 4,
      completionTokens: 2,
    });
  });

  it('records only the end step when cancelled before it starts', async () => {
    const controller = new AbortController();
    controller.abort();
    const { outcome, steps, adapter } = await run({ signal: controller.signal, script: [{ content: 'never' }] });
    expect(kinds(steps)).toEqual(['end@0']);
    expect(adapter.requests).toHaveLength(0);
    expect(outcome.status).toBe('CANCELLED');
  });

  it('stops at once while streaming', async () => {
    const controller = new AbortController();
    const { outcome } = await run({
      stream: true,
      signal: controller.signal,
      script: [
        () => {
          setTimeout(() => controller.abort(), 5);
          return { content: 'late', delayMs: 1000 };
        },
      ],
    });
    expect(outcome.terminationReason).toBe('cancelled');
  });
});

describe('failures', () => {
  it('ends a run whose provider fails as FAILED / provider_failed with the error message and class', async () => {
    const error = new ProviderConnectionError({ provider: 'openai-main', status: 503, bodyExcerpt: 'overloaded' }, 'server error');
    const { outcome, steps } = await run({ script: [{ toolCalls: [toolCall('echo')], usage: [5, 1] }, { error }] });
    expect(kinds(steps)).toEqual(['context@1', 'request@1', 'llm@1', 'tool@1', 'context@2', 'request@2', 'end@2']);
    expect(outcome).toMatchObject({
      status: 'FAILED',
      terminationReason: 'provider_failed',
      error: 'openai-main: HTTP 503 server error: overloaded',
      errorClass: 'ProviderConnectionError',
      iterations: 1,
      promptTokens: 5,
      finalContent: null,
    });
    expect(endOf(steps)).toMatchObject({ status: 'FAILED', error: 'openai-main: HTTP 503 server error: overloaded' });
  });

  it('ends as FAILED / error when a step cannot be recorded, and still records the end step', async () => {
    let calls = 0;
    const { outcome, steps, logger } = await run({
      script: [{ content: 'ok' }],
      recordStep: (step) => {
        calls += 1;
        if (step.kind === 'request') return Promise.reject(new Error('database is locked'));
        return Promise.resolve();
      },
    });
    expect(outcome).toMatchObject({ status: 'FAILED', terminationReason: 'error', error: INTERNAL_ERROR_MESSAGE, errorClass: 'Error' });
    expect(steps.at(-1)?.kind).toBe('end');
    expect(calls).toBe(3);
    expect(logger.error).toHaveBeenCalled();
  });

  it('resolves even when the end step cannot be recorded', async () => {
    const { outcome, logger } = await run({
      script: [{ content: 'ok' }],
      recordStep: (step) => (step.kind === 'end' ? Promise.reject(new Error('gone')) : Promise.resolve()),
    });
    expect(outcome.status).toBe('COMPLETED');
    expect(logger.error).toHaveBeenCalledWith(expect.anything(), 'Recording the end step of a run failed');
  });
});

describe('streaming', () => {
  it('forwards content and thinking deltas with their round and records the same llm step', async () => {
    const { deltas, steps, outcome } = await run({
      stream: true,
      script: [
        { toolCalls: [toolCall('echo', { text: 'x' })], thinking: 'plan', usage: [2, 1] },
        { content: 'Hello world', contentChunks: ['Hello', ' world'], usage: [3, 2] },
      ],
    });
    expect(deltas).toEqual([
      { kind: 'thinking', text: 'plan', round: 1, offset: 0 },
      { kind: 'content', text: 'Hello', round: 2, offset: 0 },
      { kind: 'content', text: ' world', round: 2, offset: 5 },
    ]);
    expect(ofKind(steps, 'llm')[1]).toMatchObject({ content: 'Hello world', promptTokens: 3 });
    expect(outcome).toMatchObject({ finalContent: 'Hello world', totalTokens: 8 });
  });

  it('fails the run when a stream ends without its result', async () => {
    const adapter = createScriptedAdapter([]);
    adapter.stream = async function* () {
      yield { type: 'content' as const, text: 'partial' };
    };
    const { outcome } = await run({ stream: true, adapter });
    expect(outcome).toMatchObject({ status: 'FAILED', terminationReason: 'provider_failed', errorClass: 'ProviderStreamError' });
  });
});

describe('cost', () => {
  const prices: ModelPrices = { costInput: 250, costOutput: 1000 };

  it('prices each call and the whole run', async () => {
    const { outcome, steps } = await run({
      model: { contextLength: 0, maxOutputTokens: 0, prices },
      maxRounds: 2,
      script: [
        { toolCalls: [toolCall('echo')], usage: [10, 5] },
        { toolCalls: [toolCall('echo')], usage: [10, 5] },
        { content: 'end', usage: [3, 2] },
      ],
    });
    const usage = (prompt: number, completion: number) => ({
      promptTokens: prompt,
      completionTokens: completion,
      totalTokens: prompt + completion,
    });
    expect(ofKind(steps, 'llm').map((step) => step.estimatedCost)).toEqual([
      estimateCost(usage(10, 5), prices),
      estimateCost(usage(10, 5), prices),
      estimateCost(usage(3, 2), prices),
    ]);
    expect(outcome.estimatedCost).toBe(estimateCost(usage(23, 12), prices));
    expect(outcome.estimatedCost).toBeCloseTo((23 * 250) / 1e8 + (12 * 1000) / 1e8, 12);
  });

  it('is null for an unpriced model', async () => {
    const { outcome, steps } = await run({ script: [{ content: 'ok', usage: [10, 5] }] });
    expect(outcome.estimatedCost).toBeNull();
    expect((ofKind(steps, 'llm')[0] as LlmStep).estimatedCost).toBeNull();
  });
});

describe('hooks', () => {
  it('awaits each recordStep before going on', async () => {
    const order: string[] = [];
    await run({
      script: [{ content: 'ok' }],
      recordStep: async (step) => {
        order.push(`start ${step.kind}`);
        await new Promise((resolve) => setTimeout(resolve, 5));
        order.push(`done ${step.kind}`);
      },
    });
    expect(order).toEqual([
      'start context',
      'done context',
      'start request',
      'done request',
      'start llm',
      'done llm',
      'start end',
      'done end',
    ]);
  });

  it('accepts a pino logger', async () => {
    const logger: AgentLoopLogger = createLogger('silent');
    const outcome = await runAgentLoop(
      {
        adapter: createScriptedAdapter([{ content: 'ok' }]),
        model: { contextLength: 0, maxOutputTokens: 0, prices: null },
        callOptions: { model: 'm' },
        systemPrompt: '',
        prompt: 'hi',
        tools: { registry: createToolRegistry() },
      },
      { recordStep: () => Promise.resolve(), logger },
    );
    expect(outcome.status).toBe('COMPLETED');
  });
});

describe("a turn's next call overlapping the previous TOOL step's write", () => {
  interface Deferred {
    promise: Promise<void>;
    resolve(): void;
    reject(error: unknown): void;
  }
  const deferred = (): Deferred => {
    let resolve!: () => void;
    let reject!: (error: unknown) => void;
    const promise = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
    return { promise, resolve, reject };
  };

  /** A run whose model asks for `calls` `probe` calls in one turn, then answers; TOOL step writes wait on `writes`. */
  function overlapRun(options: { calls: number; mayOverlap: boolean; probe: ToolRegistration['execute']; writeOf?: (index: number) => Promise<void>; signal?: AbortSignal }) {
    const events: string[] = [];
    const steps: LoopStep[] = [];
    let inFlight = 0;
    let maxInFlight = 0;
    let toolWrites = 0;
    const probe: ToolRegistration = { name: 'probe', description: 'Probes.', parameters: { type: 'object', properties: { n: { type: 'integer' } } }, enabledByDefault: true, execute: options.probe };
    const hooks: AgentLoopHooks = {
      recordStep: async (step) => {
        inFlight += 1;
        maxInFlight = Math.max(maxInFlight, inFlight);
        try {
          if (step.kind === 'tool') {
            const index = toolWrites++;
            events.push(`write ${index} begins`);
            await (options.writeOf?.(index) ?? Promise.resolve());
            events.push(`write ${index} ends`);
          }
          steps.push(structuredClone(step));
        } finally {
          inFlight -= 1;
        }
      },
      mayOverlapToolCall: () => options.mayOverlap,
      logger: { warn: jest.fn(), error: jest.fn() },
    };
    const input: AgentLoopInput = {
      adapter: createScriptedAdapter([{ toolCalls: Array.from({ length: options.calls }, (_, n) => toolCall('probe', { n }, `c${n}`)) }, { content: 'done' }]),
      model: { contextLength: 0, maxOutputTokens: 0, prices: null },
      callOptions: { model: 'm' },
      systemPrompt: '',
      prompt: 'Probe.',
      tools: { registry: createToolRegistry([probe]) },
      ...(options.signal ? { signal: options.signal } : {}),
    };
    return { result: driveRun(input, hooks), events, steps, maxInFlight: () => maxInFlight };
  }

  it('starts the next call while the previous step is written, and still stores the steps one at a time, in order', async () => {
    const writes = [deferred(), deferred(), deferred()];
    const run = overlapRun({
      calls: 3,
      mayOverlap: true,
      probe: (args) => {
        run.events.push(`call ${String(args.n)}`);
        // The write of the previous call's step is released only once this call is under way.
        const n = Number(args.n);
        if (n > 0) setTimeout(() => writes[n - 1]!.resolve(), 5);
        return Promise.resolve(`probed ${String(args.n)}`);
      },
      writeOf: (index) => (index === 2 ? Promise.resolve() : writes[index]!.promise),
    });
    const outcome = await run.result;
    expect(outcome).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed' });
    expect(run.events).toEqual(['call 0', 'write 0 begins', 'call 1', 'write 0 ends', 'write 1 begins', 'call 2', 'write 1 ends', 'write 2 begins', 'write 2 ends']);
    expect(run.maxInFlight()).toBe(1);
    expect(ofKind(run.steps, 'tool').map((step) => [step.toolCallId, step.toolResult])).toEqual([
      ['c0', 'probed 0'],
      ['c1', 'probed 1'],
      ['c2', 'probed 2'],
    ]);
    expect(kinds(run.steps)).toEqual(['context@1', 'request@1', 'llm@1', 'tool@1', 'tool@1', 'tool@1', 'context@2', 'request@2', 'llm@2', 'end@2']);
  });

  it('waits for each step to be stored before the next call when the lease is not known to be safe', async () => {
    const run = overlapRun({
      calls: 3,
      mayOverlap: false,
      probe: (args) => {
        run.events.push(`call ${String(args.n)}`);
        return Promise.resolve('ok');
      },
      writeOf: () => new Promise((resolve) => setTimeout(resolve, 2)),
    });
    await run.result;
    expect(run.events).toEqual(['call 0', 'write 0 begins', 'write 0 ends', 'call 1', 'write 1 begins', 'write 1 ends', 'call 2', 'write 2 begins', 'write 2 ends']);
  });

  it('aborts the overlapping call when the previous write finds the run taken over, and stops without an END', async () => {
    const write = deferred();
    let aborted = false;
    const run = overlapRun({
      calls: 2,
      mayOverlap: true,
      probe: (args, context) => {
        if (args.n === 0) return Promise.resolve('first');
        setTimeout(() => write.reject(new RunTakenOver()), 5);
        // A remote call that only ends when it is aborted.
        return new Promise((_, reject) => context.signal.addEventListener('abort', () => ((aborted = true), reject(new Error('aborted')))));
      },
      writeOf: (index) => (index === 0 ? write.promise : Promise.resolve()),
    });
    expect(await run.result).toEqual({ status: 'TAKEN_OVER' });
    expect(aborted).toBe(true);
    expect(run.steps.map((step) => step.kind)).toEqual(['context', 'request', 'llm']);
  });

  it('ends the run as failed when the previous write fails for good, without storing the overlapping call', async () => {
    const write = deferred();
    const run = overlapRun({
      calls: 2,
      mayOverlap: true,
      probe: (args, context) => {
        if (args.n === 0) return Promise.resolve('first');
        setTimeout(() => write.reject(new Error('database gone')), 5);
        return new Promise((_, reject) => context.signal.addEventListener('abort', () => reject(new Error('aborted'))));
      },
      writeOf: (index) => (index === 0 ? write.promise : Promise.resolve()),
    });
    expect(await run.result).toMatchObject({ status: 'FAILED', terminationReason: 'error' });
    expect(run.steps.map((step) => step.kind)).toEqual(['context', 'request', 'llm', 'end']);
  });

  it('stores the pending step before the END when the run is cancelled during the overlapping call', async () => {
    const controller = new AbortController();
    const run = overlapRun({
      calls: 2,
      mayOverlap: true,
      signal: controller.signal,
      probe: (args) => {
        if (args.n === 0) return Promise.resolve('first');
        setTimeout(() => controller.abort(), 5);
        return new Promise(() => undefined);
      },
      writeOf: () => new Promise((resolve) => setTimeout(resolve, 20)),
    });
    expect(await run.result).toMatchObject({ status: 'CANCELLED', terminationReason: 'cancelled' });
    expect(run.steps.map((step) => step.kind)).toEqual(['context', 'request', 'llm', 'tool', 'end']);
    expect(run.maxInFlight()).toBe(1);
  });
});
