import { createChatAdapter } from './registry';
import { demoAnswer, findArithmeticExpression, splitIntoDeltas } from './demo.adapter';
import { ProviderCancelledError } from './errors';
import type { ChatRequest, ProviderSettings, StreamEvent, ToolDefinition } from './types';

const calculator: ToolDefinition = { name: 'calculator', description: 'Arithmetic', parameters: { type: 'object', properties: { expression: { type: 'string' } } } };

function settings(options: Record<string, unknown> = {}): ProviderSettings {
  return { identifier: 'demo', adapterType: 'demo', endpointUrl: '', apiKey: null, organizationId: '', apiTimeout: 30, maxRetries: 0, options };
}

function request(prompt: string, extra: Partial<ChatRequest> = {}): ChatRequest {
  return { messages: [{ role: 'system', content: 'Be brief.' }, { role: 'user', content: prompt }], options: { model: 'demo' }, ...extra };
}

async function collect(events: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
  const seen: StreamEvent[] = [];
  for await (const event of events) seen.push(event);
  return seen;
}

describe('findArithmeticExpression', () => {
  it.each([
    ['What is 17 * 23?', '17 * 23'],
    ['Compute (2 + 3) * 4, please.', '(2 + 3) * 4'],
    ['How much is 1.5/3 and 7?', '1.5/3'],
    ['-4 + 10 % 3', '-4 + 10 % 3'],
  ])('finds the expression in %j', (text, expected) => {
    expect(findArithmeticExpression(text)).toBe(expected);
  });

  it.each(['What is 17?', 'Tell me about 2026', 'no numbers here', 'version 1.2.3'])('finds none in %j', (text) => {
    expect(findArithmeticExpression(text)).toBeNull();
  });
});

describe('demoAnswer', () => {
  it('calls the calculator when it is offered and the prompt holds arithmetic', () => {
    const answer = demoAnswer(request('What is 17 * 23?', { tools: [calculator] }));
    expect(answer.content).toBe('');
    expect(answer.toolCalls).toEqual([{ id: 'call_demo_1', type: 'function', function: { name: 'calculator', arguments: '{"expression":"17 * 23"}' } }]);
  });

  it('answers in words when the calculator is not offered', () => {
    const answer = demoAnswer(request('What is 17 * 23?'));
    expect(answer.toolCalls).toEqual([]);
    expect(answer.content).toContain('"What is 17 * 23?"');
  });

  it('reports the tool result after a tool call', () => {
    const answer = demoAnswer({
      tools: [calculator],
      messages: [
        { role: 'user', content: 'What is 17 * 23?' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'calculator', arguments: '{"expression":"17 * 23"}' } }] },
        { role: 'tool', tool_call_id: 'c1', content: '391' },
      ],
    });
    expect(answer).toEqual({ thinking: null, content: 'The result is 391.', toolCalls: [] });
  });

  it('is deterministic', () => {
    expect(demoAnswer(request('Hello there'))).toEqual(demoAnswer(request('Hello there')));
  });
});

describe('the demo adapter', () => {
  it('streams its answer in several deltas, then a result equal to what chat answers, with usage', async () => {
    const adapter = createChatAdapter(settings({ deltaDelayMs: 0 }));
    expect(adapter.adapterType).toBe('demo');
    const events = await collect(adapter.stream(request('Hello there, demo')));
    const deltas = events.filter((event) => event.type === 'content');
    expect(deltas.length).toBeGreaterThan(5);
    const done = events[events.length - 1];
    if (done?.type !== 'done') throw new Error('the last event must be done');
    expect(deltas.map((event) => (event.type === 'content' ? event.text : '')).join('')).toBe(done.result.content);
    expect(done.result).toMatchObject({ finishReason: 'stop', rawFinishReason: 'stop', toolCalls: [] });
    expect(done.result.usage.promptTokens).toBeGreaterThan(0);
    expect(done.result.usage.completionTokens).toBeGreaterThan(0);
    expect(done.result.usage.totalTokens).toBe(done.result.usage.promptTokens + done.result.usage.completionTokens);
    expect(done.result.raw).toBeUndefined();
    expect(await adapter.chat(request('Hello there, demo'))).toEqual(done.result);
  });

  it('streams thinking before a tool call and keeps the body only with raw capture', async () => {
    const adapter = createChatAdapter(settings({ deltaDelayMs: 0 }));
    const events = await collect(adapter.stream(request('What is 17 * 23?', { tools: [calculator], options: { model: 'demo', captureRaw: true } })));
    expect(events.filter((event) => event.type === 'thinking').length).toBeGreaterThan(1);
    const done = events[events.length - 1];
    if (done?.type !== 'done') throw new Error('the last event must be done');
    expect(done.result.finishReason).toBe('tool_calls');
    expect(done.result.toolCalls[0]?.function.name).toBe('calculator');
    expect(done.result.raw).toMatchObject({ demo: true, model: 'demo' });
  });

  it('stops at once with the cancellation error when the signal fires mid-stream', async () => {
    const adapter = createChatAdapter(settings({ deltaDelayMs: 50 }));
    const controller = new AbortController();
    const seen: string[] = [];
    const streaming = (async () => {
      for await (const event of adapter.stream(request('Say something long', { signal: controller.signal }))) if (event.type === 'content') seen.push(event.text);
    })();
    await new Promise((resolve) => setTimeout(resolve, 130));
    controller.abort();
    await expect(streaming).rejects.toBeInstanceOf(ProviderCancelledError);
    expect(seen.length).toBeGreaterThan(0);
    expect(seen.length).toBeLessThan(splitIntoDeltas(demoAnswer(request('Say something long')).content).length);
  });

  it("takes its delay between deltas from the call options before the provider's", async () => {
    const adapter = createChatAdapter(settings({ deltaDelayMs: 10_000 }));
    const events = await collect(adapter.stream(request('Hello there', { options: { model: 'demo', deltaDelayMs: 0 } })));
    expect(events[events.length - 1]?.type).toBe('done');
  });

  it('refuses a request whose signal already fired', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(createChatAdapter(settings()).chat(request('Hi', { signal: controller.signal }))).rejects.toBeInstanceOf(ProviderCancelledError);
  });
});
