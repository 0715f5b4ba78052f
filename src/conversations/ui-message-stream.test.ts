import { readChatRequest } from './conversation-rules';
import { TurnStreamTranslator, type UIMessageChunk } from './ui-message-stream';

const textOf = (chunks: UIMessageChunk[]) =>
  chunks
    .filter((chunk): chunk is Extract<UIMessageChunk, { type: 'text-delta' }> => chunk.type === 'text-delta')
    .map((chunk) => chunk.delta)
    .join('');
const llm = (round: number, content: string, extra: Record<string, unknown> = {}) => ({ kind: 'llm', round, content, thinking: null, finishReason: 'stop', requestedToolCalls: [], ...extra });
const end = { kind: 'end', round: 1, status: 'COMPLETED', finalContent: 'Hello world' };

describe('TurnStreamTranslator', () => {
  test('deltas that continue the text stream it; the stored step adds only the rest', () => {
    const t = new TurnStreamTranslator('c:1');
    const chunks = [
      ...t.start(),
      ...t.step({ kind: 'request', round: 1 }),
      ...t.delta({ kind: 'content', text: 'Hel', round: 1, offset: 0 }),
      ...t.delta({ kind: 'content', text: 'lo', round: 1, offset: 3 }),
      ...t.step(llm(1, 'Hello world')),
      ...t.step(end),
    ];
    expect(chunks.map((c) => c.type)).toEqual(['start', 'start-step', 'text-start', 'text-delta', 'text-delta', 'text-delta', 'text-end', 'finish-step', 'finish']);
    expect(chunks[0]).toEqual({ type: 'start', messageId: 'c:1' });
    expect(textOf(chunks)).toBe('Hello world');
    expect(t.state).toBe('finished');
  });

  test('a gap waits for the stored step, a repeat is skipped, a late delta after the step is ignored', () => {
    const t = new TurnStreamTranslator('c:1');
    const chunks = [
      ...t.delta({ kind: 'content', text: 'Hel', round: 1, offset: 0 }),
      ...t.delta({ kind: 'content', text: 'Hel', round: 1, offset: 0 }),
      ...t.delta({ kind: 'content', text: 'llo w', round: 1, offset: 2 }),
      ...t.delta({ kind: 'content', text: 'rld', round: 1, offset: 8 }),
      ...t.step({ kind: 'request', round: 1 }),
      ...t.step(llm(1, 'Hello world')),
      ...t.delta({ kind: 'content', text: 'rld', round: 1, offset: 8 }),
    ];
    expect(textOf(chunks)).toBe('Hello world');
    expect(chunks.filter((c) => c.type === 'start-step')).toHaveLength(1);
  });

  test('a replay without deltas sends each round\'s stored text; tools and approval have their chunks', () => {
    const t = new TurnStreamTranslator('c:3');
    const call = { id: 'call_1', name: 'calculator', arguments: { expression: '2+3' } };
    const chunks = [
      ...t.step({ kind: 'context', round: 1 }),
      ...t.step({ kind: 'request', round: 1 }),
      ...t.step(llm(1, '', { requestedToolCalls: [call], finishReason: 'tool_calls' })),
      ...t.step({ kind: 'approval', round: 1, pendingToolCalls: [call] }),
    ];
    expect(t.state).toBe('awaiting-approval');
    chunks.push(...t.step({ kind: 'approval', round: 1, decisions: [{ toolCallId: 'call_1', approved: true }] }));
    expect(t.state).toBe('open');
    chunks.push(
      ...t.step({ kind: 'tool', round: 1, toolCallId: 'call_1', toolResult: '5', toolIsError: false }),
      ...t.step({ kind: 'request', round: 2 }),
      ...t.step(llm(2, 'It is 5.')),
      ...t.step({ kind: 'end', round: 2, status: 'COMPLETED' }),
    );
    expect(chunks).toContainEqual({ type: 'tool-input-available', toolCallId: 'call_1', toolName: 'calculator', input: { expression: '2+3' }, dynamic: true });
    expect(chunks).toContainEqual({ type: 'tool-approval-request', approvalId: 'call_1', toolCallId: 'call_1' });
    expect(chunks).toContainEqual({ type: 'tool-output-available', toolCallId: 'call_1', output: '5', dynamic: true });
    expect(textOf(chunks)).toBe('It is 5.');
    expect(chunks.map((c) => c.type).filter((type) => type.endsWith('-step'))).toEqual(['start-step', 'finish-step', 'start-step', 'finish-step']);
  });

  test('a failed turn ends with an error chunk, a paused one with finish', () => {
    const failed = new TurnStreamTranslator('c:1');
    expect(failed.step({ kind: 'end', round: 1, status: 'FAILED', error: 'Provider said no' })).toEqual([
      { type: 'error', errorText: 'Provider said no' },
      { type: 'finish', finishReason: 'error' },
    ]);
    const paused = new TurnStreamTranslator('c:1');
    paused.step({ kind: 'request', round: 1 });
    expect(paused.pause()).toEqual([{ type: 'finish-step' }, { type: 'finish', finishReason: 'tool-calls' }]);
  });
});

describe('readChatRequest', () => {
  const user = (text: string) => ({ id: 'm', role: 'user', parts: [{ type: 'text', text }] });

  test('takes the last user message only', () => {
    const body = { id: 'c', messages: [user('old'), { id: 'a', role: 'assistant', parts: [{ type: 'text', text: 'x' }] }, user('new')], trigger: 'submit-message' };
    expect(readChatRequest(body)).toEqual({ ok: true, kind: 'message', conversationId: 'c', content: 'new', options: {} });
  });

  test('takes the tools of the body, and the answered approvals of a last assistant message', () => {
    expect(readChatRequest({ id: 'c', messages: [user('x')], tools: ['calculator'], approvalRequired: ['calculator'] })).toEqual({
      ok: true,
      kind: 'message',
      conversationId: 'c',
      content: 'x',
      options: { tools: ['calculator'], approvalRequired: ['calculator'] },
    });
    const assistant = {
      id: 'a',
      role: 'assistant',
      parts: [
        { type: 'step-start' },
        { type: 'dynamic-tool', toolName: 'calculator', toolCallId: 'call_1', state: 'approval-responded', input: {}, approval: { id: 'call_1', approved: true } },
        { type: 'tool-clock', toolCallId: 'call_2', state: 'approval-responded', input: {}, approval: { id: 'call_2', approved: false, reason: 'not now' } },
        { type: 'dynamic-tool', toolName: 'calculator', toolCallId: 'call_0', state: 'output-available', input: {}, output: '1' },
      ],
    };
    expect(readChatRequest({ id: 'c', messages: [user('x'), assistant] })).toEqual({
      ok: true,
      kind: 'decisions',
      conversationId: 'c',
      decisions: [
        { toolCallId: 'call_1', approve: true },
        { toolCallId: 'call_2', approve: false, reason: 'not now' },
      ],
    });
  });

  test.each([
    ['not an object', []],
    ['no id', { messages: [user('x')] }],
    ['no messages', { id: 'c', messages: [] }],
    ['no user message', { id: 'c', messages: [{ role: 'assistant', parts: [] }] }],
    ['an empty message', { id: 'c', messages: [user('  ')] }],
    ['a regenerate', { id: 'c', messages: [user('x')], trigger: 'regenerate-message' }],
    ['tools that are not names', { id: 'c', messages: [user('x')], tools: 'calculator' }],
    ['too many tools', { id: 'c', messages: [user('x')], approvalRequired: Array.from({ length: 65 }, (_, i) => `t${i}`) }],
  ])('refuses %s', (_name, body) => {
    expect(readChatRequest(body).ok).toBe(false);
  });
});
