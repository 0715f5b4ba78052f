import { approvalDeadline, approvalTimedOut, approvalTimeoutStep } from './approval-decision';
import {
  TERMINATION_REASONS,
  budgetWouldBeExceeded,
  takeInFlightCall,
  endStatusOf,
  nextAction,
  rebuildProgress,
  refusal,
  transcriptToolCall,
  type RunRules,
} from './run-machine';
import type { LoopStep } from './loop-step';

const rules = (overrides: Partial<RunRules> = {}): RunRules => ({
  maxRounds: 2,
  offersTools: true,
  needsApproval: () => false,
  isIdempotent: () => true,
  budget: { maxTotalTokens: null, maxCost: null },
  ...overrides,
});

const context = (round: number): LoopStep => ({
  kind: 'context',
  round,
  durationMs: 0,
  contextBudget: { window: 8192, reserve: 1000, safety: 246, budget: 6946, estimate: 10, droppedTurns: 0, calibration: 1, fits: true },
});
const request = (round: number, toolsOffered = ['calculator']): LoopStep => ({ kind: 'request', round, durationMs: 0, messagesSent: [{ role: 'user', content: 'x' }], toolsOffered });
const llm = (round: number, calls: { id: string; name: string; arguments: unknown }[] = [], content = ''): LoopStep => ({
  kind: 'llm',
  round,
  durationMs: 1,
  content,
  thinking: null,
  finishReason: calls.length ? 'tool_calls' : 'stop',
  rawFinishReason: null,
  promptTokens: 10,
  completionTokens: 5,
  totalTokens: 15,
  estimatedCost: null,
  requestedToolCalls: calls,
});
const tool = (round: number, id: string, result = '4'): LoopStep => ({ kind: 'tool', round, durationMs: 1, toolCallId: id, toolName: 'calculator', toolArguments: {}, toolResult: result, toolIsError: false });
const twoCalls = [
  { id: 'a', name: 'calculator', arguments: { expression: '2+2' } },
  { id: 'b', name: 'calculator', arguments: { expression: '3*3' } },
];

describe('the run state machine', () => {
  test('every termination reason maps to one end status', () => {
    expect(TERMINATION_REASONS.map((reason) => [reason, endStatusOf(reason)])).toContainEqual(['budget_exhausted', 'COMPLETED']);
    expect(endStatusOf('interrupted')).toBe('FAILED');
    expect(endStatusOf('cancelled')).toBe('CANCELLED');
  });

  test('a fresh run calls the model for round 1 with tools; without tools, one plain call', () => {
    expect(nextAction(rebuildProgress([], rules()), rules())).toEqual({ kind: 'call_model', round: 1, withTools: true });
    expect(nextAction(rebuildProgress([], rules()), rules({ offersTools: false }))).toEqual({ kind: 'call_model', round: 1, withTools: false });
  });

  test('the calls of a turn run one after another in the model\'s order, then the next round', () => {
    const steps = [context(1), request(1), llm(1, twoCalls)];
    expect(nextAction(rebuildProgress(steps, rules()), rules())).toMatchObject({ kind: 'run_tool', call: { id: 'a' }, refusal: null });
    expect(nextAction(rebuildProgress([...steps, tool(1, 'a')], rules()), rules())).toMatchObject({ kind: 'run_tool', call: { id: 'b' } });
    expect(nextAction(rebuildProgress([...steps, tool(1, 'a'), tool(1, 'b')], rules()), rules())).toEqual({ kind: 'call_model', round: 2, withTools: true });
  });

  test('rounds used up: one call without tools, whose answer ends the run max_iterations', () => {
    const steps = [context(1), request(1), llm(1, [twoCalls[0]!]), tool(1, 'a'), context(2), request(2), llm(2, [twoCalls[1]!]), tool(2, 'b')];
    expect(nextAction(rebuildProgress(steps, rules()), rules())).toEqual({ kind: 'call_model', round: 3, withTools: false });
    const capped = [...steps, context(3), request(3, []), llm(3, [], 'final')];
    expect(nextAction(rebuildProgress(capped, rules()), rules())).toEqual({ kind: 'end', reason: 'max_iterations', truncated: true, finalContent: 'final' });
  });

  test('an answer without tool calls completes the run', () => {
    const steps = [context(1), request(1), llm(1, [], 'done')];
    expect(nextAction(rebuildProgress(steps, rules()), rules())).toEqual({ kind: 'end', reason: 'completed', truncated: false, finalContent: 'done' });
  });

  test('a turn with a call needing approval asks before any call runs, waits, then runs approved calls and refuses denied ones', () => {
    const approval = rules({ needsApproval: (name) => name === 'calculator' });
    const steps: LoopStep[] = [context(1), request(1), llm(1, twoCalls)];
    expect(nextAction(rebuildProgress(steps, approval), approval)).toEqual({ kind: 'ask_approval', calls: twoCalls });
    steps.push({ kind: 'approval', round: 1, durationMs: 0, pendingToolCalls: twoCalls });
    expect(nextAction(rebuildProgress(steps, approval), approval)).toEqual({ kind: 'wait_for_approval', calls: twoCalls });
    steps.push({
      kind: 'approval',
      round: 1,
      durationMs: 0,
      decisions: [
        { toolCallId: 'a', approved: true, reason: null, decidedBy: 'editor' },
        { toolCallId: 'b', approved: false, reason: null, decidedBy: 'editor' },
      ],
    });
    expect(nextAction(rebuildProgress(steps, approval), approval)).toMatchObject({ kind: 'run_tool', call: { id: 'a' }, refusal: null, afterApproval: true });
    steps.push(tool(1, 'a'));
    expect(nextAction(rebuildProgress(steps, approval), approval)).toMatchObject({ kind: 'run_tool', call: { id: 'b' }, refusal: refusal.denied('calculator') });
  });

  test('after a crash, a call that may have been running runs again only when its tool is idempotent', () => {
    const steps = [context(1), request(1), llm(1, twoCalls)];
    expect(nextAction(rebuildProgress(steps, rules()), rules({ isIdempotent: () => false }), true)).toMatchObject({ kind: 'end', reason: 'interrupted' });
    expect(nextAction(rebuildProgress(steps, rules()), rules(), true)).toMatchObject({ kind: 'run_tool', call: { id: 'a' } });
    // A provider call in flight is simply made again.
    expect(nextAction(rebuildProgress([context(1), request(1)], rules()), rules(), true)).toEqual({ kind: 'call_model', round: 1, withTools: true });
  });

  test('the transcript is rebuilt from the steps: the first request, the assistant turn with its calls, the tool results', () => {
    const progress = rebuildProgress([context(1), request(1), llm(1, twoCalls, 'thinking aloud'), tool(1, 'a', '4')], rules());
    expect(progress.transcript).toEqual([
      { role: 'user', content: 'x' },
      { role: 'assistant', content: 'thinking aloud', tool_calls: twoCalls.map(transcriptToolCall) },
      { role: 'tool', tool_call_id: 'a', content: '4' },
    ]);
    expect(progress.usage).toMatchObject({ promptTokens: 10, completionTokens: 5, totalTokens: 15 });
    expect(transcriptToolCall({ id: 'c', name: 'n', arguments: 'a b', rawArguments: 'a b' }).function.arguments).toBe('a b');
    expect(transcriptToolCall({ id: 'c', name: 'n', arguments: {} }).function.arguments).toBe('{}');
  });

  test('the context calibration is a fold over the steps: the stored estimate, then the reported prompt tokens; a decision starts afresh', () => {
    const measured = (round: number, estimate: number, budget = 6946): LoopStep => ({
      kind: 'context',
      round,
      durationMs: 0,
      // Rows written before nr_llm's rule hold calibration 1; the fold does not read it.
      contextBudget: { window: budget > 0 ? 8192 : 0, reserve: 0, safety: 0, budget, estimate, droppedTurns: 0, calibration: 1, fits: true },
    });
    const answered = (round: number, promptTokens: number, calls = [twoCalls[0]!]): LoopStep => ({ ...(llm(round, calls) as Extract<LoopStep, { kind: 'llm' }>), promptTokens });
    expect(rebuildProgress([], rules()).calibration).toEqual({ factor: 1.15, lastSentEstimate: null });

    const round1 = [measured(1, 117), request(1), answered(1, 150), tool(1, 'a')];
    expect(rebuildProgress(round1, rules()).calibration).toEqual({ factor: 150 / 117, lastSentEstimate: 117 });
    // A send reported as 0 / 0 was not measured: the next report is divided by the last measured estimate.
    const round2 = [...round1, measured(2, 0, 0), request(2), answered(2, 234, [twoCalls[1]!])];
    expect(rebuildProgress(round2, rules()).calibration).toEqual({ factor: 2, lastSentEstimate: 117 });

    const approval = rules({ needsApproval: () => true });
    const waiting = [measured(1, 117), request(1), answered(1, 150, twoCalls), { kind: 'approval', round: 1, durationMs: 0, pendingToolCalls: twoCalls } as LoopStep];
    expect(rebuildProgress(waiting, approval).calibration.factor).toBe(150 / 117);
    const decided: LoopStep = { kind: 'approval', round: 1, durationMs: 0, decisions: twoCalls.map((call) => ({ toolCallId: call.id, approved: true, reason: null, decidedBy: 'editor' })) };
    expect(rebuildProgress([...waiting, decided], approval).calibration).toEqual({ factor: 1.15, lastSentEstimate: null });
  });

  test('an approval nobody decided in time refuses every pending call as not approved; deadlines are unix seconds', () => {
    const approval = rules({ needsApproval: (name) => name === 'calculator' });
    expect(approvalDeadline(1_000, 30)).toBe(1_030);
    expect(approvalDeadline(1_000, null)).toBeNull();
    expect([approvalTimedOut(1_030, 1_029), approvalTimedOut(1_030, 1_030), approvalTimedOut(null, 9e9)]).toEqual([false, true, false]);
    const timedOut = approvalTimeoutStep(twoCalls, 1, 30);
    expect(timedOut.decisions).toEqual(twoCalls.map((call) => ({ toolCallId: call.id, approved: false, reason: 'No decision within 30 s.', decidedBy: null })));
    const steps: LoopStep[] = [context(1), request(1), llm(1, twoCalls), { kind: 'approval', round: 1, durationMs: 0, pendingToolCalls: twoCalls, deadlineAt: 1_030 }, timedOut];
    expect(nextAction(rebuildProgress(steps, approval), approval)).toMatchObject({ kind: 'run_tool', call: { id: 'a' }, refusal: refusal.notApproved('calculator') });
    // A refused call is not one that may have been running at a crash.
    expect(nextAction(rebuildProgress(steps, approval), { ...approval, isIdempotent: () => false }, true)).toMatchObject({ kind: 'run_tool', refusal: refusal.notApproved('calculator') });
  });

  test('a call begun and not answered is in flight; taking it rewinds the calibration to before its CONTEXT', () => {
    const progress = rebuildProgress([context(1), request(1)], rules());
    expect(progress.inFlight).toMatchObject({ round: 1, context: { estimate: 10 }, request: { toolsOffered: ['calculator'] } });
    const before = rebuildProgress([], rules()).calibration;
    expect(takeInFlightCall(progress)).toMatchObject({ round: 1, calibrationBefore: before });
    expect(progress.inFlight).toBeNull();
    expect(progress.calibration).toEqual(before);
    expect(rebuildProgress([context(1), request(1), llm(1, [], 'done')], rules()).inFlight).toBeNull();
  });

  test('remote calls are counted from the TOOL steps that made one, so the budget survives a resume', () => {
    const remote = (id: string): LoopStep => ({ ...(tool(1, id) as Extract<LoopStep, { kind: 'tool' }>), remoteCall: true });
    expect(rebuildProgress([context(1), request(1), llm(1, twoCalls), remote('a'), tool(1, 'b')], rules()).remoteCallsMade).toBe(1);
  });

  test('budgets: spent tokens plus the next prompt\'s estimate, and its cost at the input price', () => {
    const progress = rebuildProgress([context(1), request(1), llm(1, twoCalls)], rules());
    expect(budgetWouldBeExceeded(progress, { maxTotalTokens: 25, maxCost: null }, { promptEstimate: 10, costPerPromptToken: null })).toBe(false);
    expect(budgetWouldBeExceeded(progress, { maxTotalTokens: 24, maxCost: null }, { promptEstimate: 10, costPerPromptToken: null })).toBe(true);
    expect(budgetWouldBeExceeded(progress, { maxTotalTokens: null, maxCost: 0.05 }, { promptEstimate: 10, costPerPromptToken: 0.01 })).toBe(true);
    expect(budgetWouldBeExceeded(progress, { maxTotalTokens: null, maxCost: 0.2 }, { promptEstimate: 10, costPerPromptToken: 0.01 })).toBe(false);
  });

  test('structured output: an answer that failed the schema gets one repair call, a second failure ends invalid_output (FAILED)', () => {
    const noTools = rules({ offersTools: false, maxRounds: 1 });
    const failed = (round: number, content: string): LoopStep => ({ ...(llm(round, [], content) as Extract<LoopStep, { kind: 'llm' }>), outputValid: false });
    const first = rebuildProgress([context(1), request(1, []), failed(1, 'bad')], noTools);
    expect(nextAction(first, noTools)).toEqual({ kind: 'call_model', round: 2, withTools: false, repair: true });
    const second = rebuildProgress([context(1), request(1, []), failed(1, 'bad'), context(2), request(2, []), failed(2, 'worse')], noTools);
    expect(nextAction(second, noTools)).toEqual({ kind: 'end', reason: 'invalid_output', truncated: false, finalContent: 'worse' });
    expect(endStatusOf('invalid_output')).toBe('FAILED');
    const repaired = rebuildProgress([context(1), request(1, []), failed(1, 'bad'), context(2), request(2, []), { ...(llm(2, [], 'good') as Extract<LoopStep, { kind: 'llm' }>), outputValid: true }], noTools);
    expect(nextAction(repaired, noTools)).toEqual({ kind: 'end', reason: 'completed', truncated: false, finalContent: 'good' });
    expect(repaired.usage.totalTokens).toBe(30);
  });
});
