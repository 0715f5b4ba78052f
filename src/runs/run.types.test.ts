import 'reflect-metadata';
import { RunStepKind, toRunStep } from './run.types';
import type { StoredStep } from './trace-bus';

describe('toRunStep', () => {
  it('maps a REQUEST step, its transcript only when read, and keeps one view per stored step', () => {
    const stored: StoredStep = {
      sequence: 3,
      kind: 'request',
      round: 1,
      durationMs: 0,
      messagesSent: [
        { role: 'user', content: 'Work it out.' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'calculator', arguments: '{"expression":"1 * 21"}' } }] },
        { role: 'tool', content: '21', tool_call_id: 'c1' },
      ],
      toolsOffered: ['calculator'],
    };
    const view = toRunStep(stored);
    expect(view).toMatchObject({ sequence: 3, kind: RunStepKind.REQUEST, round: 1, messageCount: 3, toolsOffered: ['calculator'], status: null, content: null });
    expect(view.messagesSent).toEqual([
      { role: 'user', content: 'Work it out.', toolCalls: null, toolCallId: null },
      { role: 'assistant', content: null, toolCalls: [{ id: 'c1', name: 'calculator', arguments: { expression: '1 * 21' } }], toolCallId: null },
      { role: 'tool', content: '21', toolCalls: null, toolCallId: 'c1' },
    ]);
    expect(view.messagesSent).toBe(view.messagesSent);
    expect(toRunStep(stored)).toBe(view);
  });

  it('reads rows written by other programs without failing: unknown kinds, odd values', () => {
    const odd = toRunStep({ sequence: 7, kind: 'something-new', round: 2, durationMs: 1.5, status: 'COMPLETED', promptTokens: '12', totalTokens: 2 ** 40, content: 42, requestedToolCalls: 'nope' });
    expect(odd).toMatchObject({ kind: RunStepKind.END, status: null, promptTokens: null, content: null, requestedToolCalls: null, messagesSent: null, messageCount: null });
    expect(odd.totalTokens === null || Number.isSafeInteger(odd.totalTokens)).toBe(true);
    const end = toRunStep({ sequence: 8, kind: 'end', round: 2, durationMs: 0, status: 'COMPLETED', finalContent: 'Done.', requestedToolCalls: [{ id: 'c', name: 't', arguments: {}, raw: 'secret provider state' }] });
    expect(end).toMatchObject({ kind: RunStepKind.END, status: 'COMPLETED', content: 'Done.', requestedToolCalls: [{ id: 'c', name: 't', arguments: {} }] });
    expect(end.requestedToolCalls![0]).not.toHaveProperty('raw');
  });
});
