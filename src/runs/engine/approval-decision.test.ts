import { approvalDeadline, approvalTimedOut, decideApproval, timeoutDecision, type ApprovalWait } from './approval-decision';
import type { LoopStep, RequestedToolCall } from './loop-step';

const calls: RequestedToolCall[] = [
  { id: 'call_1', name: 'calculator', arguments: { expression: '1+1' } },
  { id: 'call_2', name: 'fetch_page', arguments: { url: 'https://example.org' } },
];

/** A request offering tools: a turn is open only after an answer to a call that offered some. */
function request(round: number): LoopStep {
  return { kind: 'request', round, durationMs: 0, messagesSent: [{ role: 'user', content: 'go' }], toolsOffered: ['calculator', 'fetch_page'] };
}

function llm(round: number, requested: RequestedToolCall[]): LoopStep {
  return {
    kind: 'llm',
    round,
    durationMs: 1,
    content: '',
    thinking: null,
    finishReason: 'tool_calls',
    rawFinishReason: 'tool_calls',
    promptTokens: 1,
    completionTokens: 1,
    totalTokens: 2,
    estimatedCost: null,
    requestedToolCalls: requested,
  };
}

/** A run in round 2 whose turn asks for both calls and waits for a person. */
function waiting(): ApprovalWait {
  return {
    maxRounds: 5,
    steps: [
      request(1),
      llm(1, [{ id: 'call_0', name: 'calculator', arguments: {} }]),
      { kind: 'tool', round: 1, durationMs: 0, toolCallId: 'call_0', toolName: 'calculator', toolArguments: {}, toolResult: '2', toolIsError: false },
      request(2),
      llm(2, calls),
      { kind: 'approval', round: 2, durationMs: 0, pendingToolCalls: calls },
    ],
  };
}

describe('decideApproval', () => {
  it('makes one APPROVAL step deciding every pending call in the order asked, in the waiting round', () => {
    const step = decideApproval(waiting(), [
      { toolCallId: 'call_2', approve: false, reason: 'not now' },
      { toolCallId: 'call_1', approve: true },
    ], 'editor token');
    expect(step).toEqual({
      kind: 'approval',
      round: 2,
      durationMs: 0,
      decisions: [
        { toolCallId: 'call_1', approved: true, reason: null, decidedBy: 'editor token' },
        { toolCallId: 'call_2', approved: false, reason: 'not now', decidedBy: 'editor token' },
      ],
    });
  });

  it('refuses a run that waits on nothing with CONFLICT', () => {
    const decided = waiting();
    const step = decideApproval(decided, [{ toolCallId: 'call_1', approve: true }, { toolCallId: 'call_2', approve: true }], 'a');
    const after: ApprovalWait = { ...decided, steps: [...decided.steps, step] };
    expect(() => decideApproval(after, [{ toolCallId: 'call_1', approve: true }], 'a')).toThrow(
      expect.objectContaining({ message: 'The run has no pending tool calls', code: 'CONFLICT' }),
    );
    expect(() => decideApproval({ maxRounds: 5, steps: [] }, [], 'a')).toThrow('The run has no pending tool calls');
  });

  it.each([
    ['an unknown call', [{ toolCallId: 'call_9', approve: true }], 'No pending tool call "call_9" in this run'],
    ['a call decided twice', [{ toolCallId: 'call_1', approve: true }, { toolCallId: 'call_1', approve: false }], 'Tool call "call_1" is decided twice'],
    ['a reason over 1000 characters', [{ toolCallId: 'call_1', approve: false, reason: 'x'.repeat(1001) }], 'A reason is at most 1000 characters'],
    ['a call left undecided', [{ toolCallId: 'call_1', approve: true }], 'Every pending call must be decided at once; missing: call_2'],
  ])('refuses %s with BAD_USER_INPUT naming it', (_case, decisions, message) => {
    expect(() => decideApproval(waiting(), decisions, 'a')).toThrow(
      expect.objectContaining({ message, code: 'BAD_USER_INPUT', field: 'decisions' }),
    );
  });

  it('takes a reason of exactly 1000 characters', () => {
    const step = decideApproval(waiting(), [
      { toolCallId: 'call_1', approve: false, reason: 'x'.repeat(1000) },
      { toolCallId: 'call_2', approve: true, reason: null },
    ], 'a');
    expect(step.decisions?.[0]?.reason).toHaveLength(1000);
  });
});

describe('timeoutDecision', () => {
  it('refuses every pending call, decided by no one, saying how long the wait was', () => {
    expect(timeoutDecision(waiting(), 30)).toEqual({
      kind: 'approval',
      round: 2,
      durationMs: 0,
      timedOut: true,
      decisions: [
        { toolCallId: 'call_1', approved: false, reason: 'No decision within 30 s.', decidedBy: null },
        { toolCallId: 'call_2', approved: false, reason: 'No decision within 30 s.', decidedBy: null },
      ],
    });
    expect(timeoutDecision(waiting(), null)?.decisions?.[0]?.reason).toBe('No decision before the approval timeout.');
  });

  it('is null for a run that waits on no call (already decided, or never asked)', () => {
    const decided = waiting();
    const step = decideApproval(decided, [{ toolCallId: 'call_1', approve: true }, { toolCallId: 'call_2', approve: true }], 'a');
    expect(timeoutDecision({ ...decided, steps: [...decided.steps, step] }, 30)).toBeNull();
    expect(timeoutDecision({ maxRounds: 5, steps: [request(1), llm(1, calls)] }, 30)).toBeNull();
  });
});

describe('approval deadlines', () => {
  it('sets a deadline only with a timeout, and a wait ends at the deadline, not before', () => {
    expect(approvalDeadline(1_000, 60)).toBe(1_060);
    expect(approvalDeadline(1_000, 0)).toBe(1_000);
    expect(approvalDeadline(1_000, null)).toBeNull();
    expect(approvalDeadline(1_000, undefined)).toBeNull();
    expect(approvalTimedOut(1_060, 1_059)).toBe(false);
    expect(approvalTimedOut(1_060, 1_060)).toBe(true);
    expect(approvalTimedOut(null, Number.MAX_SAFE_INTEGER)).toBe(false);
  });
});
