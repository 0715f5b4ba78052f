/**
 * Variations within a wire family that real providers and compatible servers
 * produce: array content (Mistral), Groq's usage field, whole tool calls
 * without an index, error frames inside a 200 stream, blocked prompts,
 * negative counts.
 */
import {
  ProviderConnectionError,
  ProviderRateLimitError,
  ProviderResponseError,
} from '../../src/providers/adapters/errors';
import { createChatAdapter } from '../../src/providers/adapters/registry';
import type { AdapterType, ChatResult, StreamEvent } from '../../src/providers/adapters/types';
import { baseRequest, ndjsonLines, sseFrames } from './support/kit';

function adapterAnswering(adapterType: AdapterType, body: string, contentType = 'application/json') {
  const warn = jest.fn();
  const adapter = createChatAdapter(
    {
      identifier: `${adapterType}-x`,
      adapterType,
      endpointUrl: 'http://127.0.0.1:9/v1',
      apiKey: 'key-123456',
      organizationId: '',
      apiTimeout: 5,
      maxRetries: 0,
      options: {},
    },
    { fetch: async () => new Response(body, { status: 200, headers: { 'content-type': contentType } }), logger: { warn } },
  );
  return { adapter, warn };
}

async function streamResult(adapterType: AdapterType, stream: string): Promise<ChatResult> {
  const { adapter } = adapterAnswering(adapterType, stream, 'text/event-stream');
  let result: ChatResult | null = null;
  for await (const event of adapter.stream(baseRequest())) if (event.type === 'done') result = event.result;
  if (result === null) throw new Error('no done event');
  return result;
}

describe('OpenAI-compatible variants', () => {
  it('reads Mistral array content with thinking chunks', async () => {
    const body = {
      choices: [
        {
          message: {
            role: 'assistant',
            content: [
              { type: 'thinking', thinking: [{ type: 'text', text: 'Erst überlegen.' }] },
              { type: 'text', text: 'Antwort.' },
            ],
          },
          finish_reason: 'stop',
        },
      ],
      usage: { prompt_tokens: 5, completion_tokens: 7, total_tokens: 12 },
    };
    const result = await adapterAnswering('mistral', JSON.stringify(body)).adapter.chat(baseRequest());
    expect(result).toMatchObject({ content: 'Antwort.', thinking: 'Erst überlegen.', finishReason: 'stop' });
  });

  it("takes Groq's stream usage from x_groq", async () => {
    const stream = sseFrames(
      [
        { choices: [{ index: 0, delta: { content: 'Hi' }, finish_reason: null }] },
        { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }], x_groq: { usage: { prompt_tokens: 9, completion_tokens: 2, total_tokens: 11 } } },
      ],
      { done: true },
    );
    expect((await streamResult('groq', stream)).usage).toEqual({ promptTokens: 9, completionTokens: 2, totalTokens: 11 });
  });

  it('assembles whole tool calls sent without an index, and calls a `stop` with calls tool_calls', async () => {
    const stream = sseFrames(
      [
        { choices: [{ index: 0, delta: { tool_calls: [{ id: 'a', function: { name: 'get_time', arguments: '{}' } }] } }] },
        { choices: [{ index: 0, delta: { tool_calls: [{ id: 'b', function: { name: 'get_weather', arguments: { city: 'Köln' } } }] } }] },
        { choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] },
      ],
      { done: true },
    );
    const result = await streamResult('custom', stream);
    expect(result.toolCalls).toEqual([
      { id: 'a', type: 'function', function: { name: 'get_time', arguments: '{}' } },
      { id: 'b', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Köln"}' } },
    ]);
    expect(result.finishReason).toBe('tool_calls');
    expect(result.rawFinishReason).toBe('stop');
  });

  it('clamps negative token counts to 0', async () => {
    const body = { choices: [{ message: { content: 'x' }, finish_reason: 'stop' }], usage: { prompt_tokens: -4, completion_tokens: 3 } };
    const result = await adapterAnswering('openai', JSON.stringify(body)).adapter.chat(baseRequest());
    expect(result.usage).toEqual({ promptTokens: 0, completionTokens: 3, totalTokens: 3 });
  });

  it('uses the refusal as the answer when there is no content', async () => {
    const body = { choices: [{ message: { content: null, refusal: 'Dabei kann ich nicht helfen.' }, finish_reason: 'stop' }] };
    const result = await adapterAnswering('openai', JSON.stringify(body)).adapter.chat(baseRequest());
    expect(result.content).toBe('Dabei kann ich nicht helfen.');
  });

  it('an error object inside a 200 stream (OpenRouter) fails the stream with the message, key redacted', async () => {
    const stream = sseFrames([
      { choices: [{ index: 0, delta: { content: 'Hal' } }] },
      { error: { code: 502, message: 'Upstream failed for key key-123456' } },
    ]);
    const error: unknown = await streamResult('openrouter', stream).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderResponseError);
    expect((error as Error).message).toContain('Upstream failed for key [redacted]');
  });

  it('maps the documented finish reasons and keeps the raw one', async () => {
    for (const [raw, expected] of [
      ['content_filter', 'content_filter'],
      ['length', 'length'],
      ['function_call', 'tool_calls'],
      ['something_new', 'other'],
    ] as const) {
      const body = { choices: [{ message: { content: 'x' }, finish_reason: raw }] };
      const result = await adapterAnswering('openai', JSON.stringify(body)).adapter.chat(baseRequest());
      expect([result.finishReason, result.rawFinishReason]).toEqual([expected, raw]);
    }
  });

  it('a body of the wrong shape is a response error naming the path, not the values', async () => {
    const body = { choices: [{ message: { content: 42 }, finish_reason: 'stop' }] };
    const error: unknown = await adapterAnswering('openai', JSON.stringify(body)).adapter.chat(baseRequest()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderResponseError);
    expect((error as Error).message).toMatch(/^openai-x: chat completion has an unexpected shape: choices\.0\.message\.content/);
  });
});

describe('Anthropic variants', () => {
  it.each([
    ['overloaded_error', ProviderConnectionError],
    ['rate_limit_error', ProviderRateLimitError],
    ['invalid_request_error', ProviderResponseError],
  ] as const)('an %s event mid-stream becomes the matching error', async (type, errorClass) => {
    const stream = sseFrames(
      [
        { type: 'message_start', message: { usage: { input_tokens: 3, output_tokens: 1 } } },
        { type: 'content_block_start', index: 0, content_block: { type: 'text', text: '' } },
        { type: 'content_block_delta', index: 0, delta: { type: 'text_delta', text: 'Hal' } },
        { type: 'error', error: { type, message: 'Overloaded' } },
      ],
      { eventNames: true },
    );
    const { adapter } = adapterAnswering('anthropic', stream, 'text/event-stream');
    const seen: StreamEvent[] = [];
    const run = async () => {
      for await (const event of adapter.stream(baseRequest())) seen.push(event);
    };
    await expect(run()).rejects.toBeInstanceOf(errorClass);
    expect(seen).toEqual([{ type: 'content', text: 'Hal' }]);
  });

  it('maps refusal and pause_turn, and keeps the raw reason', async () => {
    for (const [raw, expected] of [
      ['refusal', 'content_filter'],
      ['stop_sequence', 'stop'],
      ['pause_turn', 'other'],
    ] as const) {
      const body = { type: 'message', content: [{ type: 'text', text: 'x' }], stop_reason: raw, usage: { input_tokens: 1, output_tokens: 1 } };
      const result = await adapterAnswering('anthropic', JSON.stringify(body)).adapter.chat(baseRequest());
      expect([result.finishReason, result.rawFinishReason]).toEqual([expected, raw]);
    }
  });

  it('clamps temperature to 1 with a warning', async () => {
    const fetched: string[] = [];
    const adapter = createChatAdapter(
      { identifier: 'a', adapterType: 'anthropic', endpointUrl: '', apiKey: 'k', organizationId: '', apiTimeout: 5, maxRetries: 0, options: {} },
      {
        fetch: async (_input, init) => {
          fetched.push(String(init?.body));
          return new Response(JSON.stringify({ content: [], stop_reason: 'end_turn', usage: {} }));
        },
      },
    );
    const request = baseRequest();
    request.options.temperature = 1.6;
    const result = await adapter.chat(request);
    expect(JSON.parse(fetched[0] ?? '{}')).toMatchObject({ temperature: 1 });
    expect(result.warnings).toEqual(["temperature 1.6 is above anthropic's maximum; sent 1"]);
  });
});

describe('Gemini variants', () => {
  it('a blocked prompt (no candidates) is a content_filter finish with the block reason', async () => {
    const body = { promptFeedback: { blockReason: 'PROHIBITED_CONTENT' }, usageMetadata: { promptTokenCount: 8, totalTokenCount: 8 } };
    const result = await adapterAnswering('gemini', JSON.stringify(body)).adapter.chat(baseRequest());
    expect(result).toMatchObject({ content: '', finishReason: 'content_filter', rawFinishReason: 'PROHIBITED_CONTENT' });
    expect(result.usage).toEqual({ promptTokens: 8, completionTokens: 0, totalTokens: 8 });
  });

  it('keeps a call id Gemini did send', async () => {
    const body = {
      candidates: [{ content: { role: 'model', parts: [{ functionCall: { id: 'fc-7', name: 'get_time', args: {} } }] }, finishReason: 'STOP' }],
    };
    const result = await adapterAnswering('gemini', JSON.stringify(body)).adapter.chat(baseRequest());
    expect(result.toolCalls[0]?.id).toBe('fc-7');
  });

  it('MALFORMED_FUNCTION_CALL is an error finish', async () => {
    const body = { candidates: [{ content: { parts: [] }, finishReason: 'MALFORMED_FUNCTION_CALL' }] };
    const result = await adapterAnswering('gemini', JSON.stringify(body)).adapter.chat(baseRequest());
    expect(result.finishReason).toBe('error');
  });
});

describe('Ollama variants', () => {
  it('an error line mid-stream fails the stream with its message', async () => {
    const stream = ndjsonLines([
      { model: 'm', message: { role: 'assistant', content: 'Hal' }, done: false },
      { error: 'model runner has unexpectedly stopped' },
    ]);
    await expect(streamResult('ollama', stream)).rejects.toThrow('ollama-x: provider reported an error: model runner has unexpectedly stopped');
  });

  it('a whole answer without prompt_eval_count (prompt fully cached) counts 0 prompt tokens', async () => {
    const body = { model: 'm', message: { role: 'assistant', content: 'ok' }, done: true, done_reason: 'stop', eval_count: 2 };
    const result = await adapterAnswering('ollama', JSON.stringify(body)).adapter.chat(baseRequest());
    expect(result.usage).toEqual({ promptTokens: 0, completionTokens: 2, totalTokens: 2 });
  });
});
