/**
 * What each adapter puts on the wire for the service's OpenAI-shaped history
 * (behaviour.md §9): system placement, tool schemas, assistant tool calls,
 * tool-result turns, sampling options and warnings.
 */
import { ProviderRequestError } from '../../src/providers/adapters/errors';
import { GEMINI_SKIP_SIGNATURE } from '../../src/providers/adapters/gemini.adapter';
import { createChatAdapter } from '../../src/providers/adapters/registry';
import type { AdapterType, ChatMessage, ChatRequest, ProviderSettings } from '../../src/providers/adapters/types';
import { anthropicKit } from './fixtures/anthropic';
import { geminiKit } from './fixtures/gemini';
import { ollamaKit } from './fixtures/ollama';
import { openAiKit } from './fixtures/openai';
import { FakeProvider, type RecordedRequest } from './support/fake-provider';
import { API_KEY, type ProviderKit, baseRequest } from './support/kit';

const SYSTEM = 'Du bist ein hilfreicher Assistent.';
const SNIPPET = '<snippet name="tone">Antworte knapp.</snippet>';

const CONVERSATION: ChatMessage[] = [
  { role: 'system', content: SYSTEM },
  { role: 'system', content: SNIPPET },
  { role: 'user', content: 'Wetter in Köln und München?' },
  {
    role: 'assistant',
    content: null,
    tool_calls: [
      { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Köln"}' } },
      { id: 'call_2', type: 'function', function: { name: 'get_weather', arguments: '{"city":"München"}' } },
    ],
  },
  { role: 'tool', tool_call_id: 'call_1', content: '18 °C, sonnig' },
  { role: 'tool', tool_call_id: 'call_2', content: '21 °C, bewölkt' },
  { role: 'assistant', content: 'Köln: 18 °C, München: 21 °C.' },
  { role: 'user', content: 'Danke! Und die Uhrzeit?' },
];

const WEATHER_SCHEMA = { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] };

let server: FakeProvider;
beforeAll(async () => {
  server = await FakeProvider.start();
});
afterAll(async () => {
  await server.close();
});
beforeEach(() => server.reset());

function settings(adapterType: AdapterType, overrides: Partial<ProviderSettings> = {}): ProviderSettings {
  return {
    identifier: `${adapterType}-main`,
    adapterType,
    endpointUrl: server.url,
    apiKey: API_KEY,
    organizationId: '',
    apiTimeout: 10,
    maxRetries: 0,
    options: {},
    ...overrides,
  };
}

async function send(kit: ProviderKit, request: ChatRequest, overrides: Partial<ProviderSettings> = {}, adapterType = kit.adapterType) {
  server.enqueue({ body: JSON.stringify(kit.scenarios.text.body) });
  const result = await createChatAdapter(settings(adapterType, overrides)).chat(request);
  const sent = server.requests[server.requests.length - 1] as RecordedRequest;
  return { result, sent, body: sent.json };
}

async function sendStreaming(kit: ProviderKit, request: ChatRequest, adapterType = kit.adapterType): Promise<RecordedRequest> {
  server.enqueue({ body: kit.scenarios.text.stream, headers: { 'content-type': kit.streamContentType } });
  for await (const event of createChatAdapter(settings(adapterType)).stream(request)) void event;
  return server.requests[server.requests.length - 1] as RecordedRequest;
}

describe('OpenAI-compatible request', () => {
  it('sends the history as it is, tools as functions, neutral settings left out', async () => {
    const { sent, body, result } = await send(openAiKit, baseRequest({ messages: CONVERSATION }));
    expect(sent.path).toBe('/chat/completions');
    expect(sent.headers.authorization).toBe(`Bearer ${API_KEY}`);
    expect(body).toEqual({
      model: 'test-model-1',
      messages: CONVERSATION,
      temperature: 0.2,
      max_completion_tokens: 256,
      tools: [
        { type: 'function', function: { name: 'get_weather', description: 'Current weather for a city', parameters: WEATHER_SCHEMA } },
        { type: 'function', function: { name: 'get_time', description: 'Current time', parameters: { type: 'object', properties: {} } } },
      ],
    });
    expect(result.warnings).toEqual([]);
  });

  it('streams with usage included; Mistral gets max_tokens and no stream_options', async () => {
    const openai = await sendStreaming(openAiKit, baseRequest());
    expect(openai.json).toMatchObject({ stream: true, stream_options: { include_usage: true } });
    const mistral = await sendStreaming(openAiKit, baseRequest(), 'mistral');
    expect(mistral.json).toMatchObject({ stream: true, max_tokens: 256 });
    expect(mistral.json).not.toHaveProperty('stream_options');
    expect(mistral.json).not.toHaveProperty('max_completion_tokens');
  });

  it('leaves providerReplay and empty tool_calls off the wire', async () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'hi' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_time', arguments: '{}' }, providerReplay: 'gemini:abc' }],
      },
      { role: 'tool', tool_call_id: 'c1', content: '12:00' },
      { role: 'assistant', content: 'Es ist 12 Uhr.', tool_calls: [] },
    ];
    const { body } = await send(openAiKit, baseRequest({ messages, tools: [] }));
    expect(body.messages).toEqual([
      { role: 'user', content: 'hi' },
      { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'get_time', arguments: '{}' } }] },
      { role: 'tool', tool_call_id: 'c1', content: '12:00' },
      { role: 'assistant', content: 'Es ist 12 Uhr.' },
    ]);
    expect(body).not.toHaveProperty('tools');
  });

  it('passes options the service knows, warns about the others; custom passes everything', async () => {
    const request = baseRequest();
    request.options = { ...request.options, seed: 7, top_k: 40, frequency_penalty: 0.5, system_prompt: 'ignored' };
    const { body, result } = await send(openAiKit, request);
    expect(body).toMatchObject({ seed: 7, frequency_penalty: 0.5 });
    expect(body).not.toHaveProperty('top_k');
    expect(body).not.toHaveProperty('system_prompt');
    expect(result.warnings).toEqual(['top_k is not supported by openai']);

    const custom = await send(openAiKit, request, { apiKey: null }, 'custom');
    expect(custom.body).toMatchObject({ seed: 7, top_k: 40, max_tokens: 256 });
    expect(custom.sent.headers.authorization).toBeUndefined();
    expect(custom.result.warnings).toEqual([]);
  });

  it('sends the organisation header for openai only', async () => {
    const { sent } = await send(openAiKit, baseRequest(), { organizationId: 'org-42' });
    expect(sent.headers['openai-organization']).toBe('org-42');
    const groq = await send(openAiKit, baseRequest(), { organizationId: 'org-42' }, 'groq');
    expect(groq.sent.headers['openai-organization']).toBeUndefined();
  });
});

describe('Anthropic request', () => {
  it('lifts every system message into `system`, tool calls into tool_use, results into one user turn', async () => {
    const { sent, body, result } = await send(anthropicKit, baseRequest({ messages: CONVERSATION }));
    expect(sent.path).toBe('/messages');
    expect(sent.headers['x-api-key']).toBe(API_KEY);
    expect(sent.headers['anthropic-version']).toBe('2023-06-01');
    expect(sent.headers.authorization).toBeUndefined();
    expect(body).toEqual({
      model: 'test-model-1',
      max_tokens: 256,
      system: `${SYSTEM}\n\n${SNIPPET}`,
      temperature: 0.2,
      messages: [
        { role: 'user', content: 'Wetter in Köln und München?' },
        {
          role: 'assistant',
          content: [
            { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Köln' } },
            { type: 'tool_use', id: 'call_2', name: 'get_weather', input: { city: 'München' } },
          ],
        },
        {
          role: 'user',
          content: [
            { type: 'tool_result', tool_use_id: 'call_1', content: '18 °C, sonnig' },
            { type: 'tool_result', tool_use_id: 'call_2', content: '21 °C, bewölkt' },
          ],
        },
        { role: 'assistant', content: [{ type: 'text', text: 'Köln: 18 °C, München: 21 °C.' }] },
        { role: 'user', content: 'Danke! Und die Uhrzeit?' },
      ],
      tools: [
        { name: 'get_weather', description: 'Current weather for a city', input_schema: WEATHER_SCHEMA },
        { name: 'get_time', description: 'Current time', input_schema: { type: 'object', properties: {} } },
      ],
    });
    expect(result.warnings).toEqual([]);
  });

  it('defaults max_tokens to 4096 and warns about penalties it cannot apply', async () => {
    const request = baseRequest();
    request.options = { model: 'claude', frequency_penalty: 0.4, presence_penalty: 0.1, top_p: 0.9, stop: 'ENDE' };
    const { body, result } = await send(anthropicKit, request);
    expect(body).toMatchObject({ max_tokens: 4096, top_p: 0.9, stop_sequences: ['ENDE'] });
    expect(body).not.toHaveProperty('frequency_penalty');
    expect(body).not.toHaveProperty('presence_penalty');
    expect(result.warnings).toEqual(['frequency_penalty is not supported by anthropic', 'presence_penalty is not supported by anthropic']);
  });

  it('replays signed thinking in front of the tool calls it led to', async () => {
    const replay = [{ type: 'thinking', thinking: 'Plan', signature: 'sig-1' }];
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Zeit?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [
          { id: 'toolu_1', type: 'function', function: { name: 'get_time', arguments: '' }, providerReplay: `anthropic:${JSON.stringify(replay)}` },
        ],
      },
      { role: 'tool', tool_call_id: 'toolu_1', content: '12:00' },
    ];
    const { body } = await send(anthropicKit, baseRequest({ messages }));
    expect((body.messages as unknown[])[1]).toEqual({
      role: 'assistant',
      content: [...replay, { type: 'tool_use', id: 'toolu_1', name: 'get_time', input: {} }],
    });
  });

  it('streams with stream: true', async () => {
    const sent = await sendStreaming(anthropicKit, baseRequest());
    expect(sent.json).toMatchObject({ stream: true });
    expect(sent.headers.accept).toBe('text/event-stream');
  });
});

describe('Gemini request', () => {
  it('puts the model in the path, systems in systemInstruction, calls as model functionCall, results as functionResponse', async () => {
    const { sent, body } = await send(geminiKit, baseRequest({ messages: CONVERSATION }));
    expect(sent.path).toBe('/models/test-model-1:generateContent');
    expect(sent.headers['x-goog-api-key']).toBe(API_KEY);
    expect(sent.path).not.toContain(API_KEY);
    expect(body).toEqual({
      systemInstruction: { parts: [{ text: `${SYSTEM}\n\n${SNIPPET}` }] },
      contents: [
        { role: 'user', parts: [{ text: 'Wetter in Köln und München?' }] },
        {
          role: 'model',
          parts: [
            // No signature came with the call: the first one gets the documented placeholder.
            { functionCall: { name: 'get_weather', args: { city: 'Köln' } }, thoughtSignature: GEMINI_SKIP_SIGNATURE },
            { functionCall: { name: 'get_weather', args: { city: 'München' } } },
          ],
        },
        {
          role: 'user',
          parts: [
            { functionResponse: { name: 'get_weather', response: { name: 'get_weather', content: '18 °C, sonnig' } } },
            { functionResponse: { name: 'get_weather', response: { name: 'get_weather', content: '21 °C, bewölkt' } } },
          ],
        },
        { role: 'model', parts: [{ text: 'Köln: 18 °C, München: 21 °C.' }] },
        { role: 'user', parts: [{ text: 'Danke! Und die Uhrzeit?' }] },
      ],
      tools: [
        {
          functionDeclarations: [
            { name: 'get_weather', description: 'Current weather for a city', parametersJsonSchema: WEATHER_SCHEMA },
            { name: 'get_time', description: 'Current time', parametersJsonSchema: { type: 'object', properties: {} } },
          ],
        },
      ],
      generationConfig: { temperature: 0.2, maxOutputTokens: 256 },
    });
  });

  it('sends back the thought signature a call came with', async () => {
    const messages: ChatMessage[] = [
      { role: 'user', content: 'Zeit?' },
      {
        role: 'assistant',
        content: null,
        tool_calls: [{ id: 'call_x', type: 'function', function: { name: 'get_time', arguments: '{}' }, providerReplay: 'gemini:SIG==' }],
      },
      { role: 'tool', tool_call_id: 'call_x', content: '12:00' },
    ];
    const { body } = await send(geminiKit, baseRequest({ messages }));
    expect((body.contents as unknown[])[1]).toEqual({
      role: 'model',
      parts: [{ functionCall: { name: 'get_time', args: {} }, thoughtSignature: 'SIG==' }],
    });
  });

  it('streams through :streamGenerateContent?alt=sse and maps options into generationConfig', async () => {
    const request = baseRequest();
    request.options = { ...request.options, top_k: 20, stop: 'ENDE', presence_penalty: 0.3 };
    const sent = await sendStreaming(geminiKit, request);
    expect(sent.path).toBe('/models/test-model-1:streamGenerateContent?alt=sse');
    expect(sent.json.generationConfig).toEqual({
      temperature: 0.2,
      maxOutputTokens: 256,
      presencePenalty: 0.3,
      topK: 20,
      stopSequences: ['ENDE'],
    });
  });
});

describe('Ollama request', () => {
  it('posts to /api/chat with stream false, object arguments and tool_name on results', async () => {
    const { sent, body } = await send(ollamaKit, baseRequest({ messages: CONVERSATION }));
    expect(sent.path).toBe('/api/chat');
    expect(body).toEqual({
      model: 'test-model-1',
      stream: false,
      messages: [
        { role: 'system', content: SYSTEM },
        { role: 'system', content: SNIPPET },
        { role: 'user', content: 'Wetter in Köln und München?' },
        {
          role: 'assistant',
          content: '',
          tool_calls: [
            { function: { name: 'get_weather', arguments: { city: 'Köln' } } },
            { function: { name: 'get_weather', arguments: { city: 'München' } } },
          ],
        },
        { role: 'tool', content: '18 °C, sonnig', tool_name: 'get_weather' },
        { role: 'tool', content: '21 °C, bewölkt', tool_name: 'get_weather' },
        { role: 'assistant', content: 'Köln: 18 °C, München: 21 °C.' },
        { role: 'user', content: 'Danke! Und die Uhrzeit?' },
      ],
      tools: [
        { type: 'function', function: { name: 'get_weather', description: 'Current weather for a city', parameters: WEATHER_SCHEMA } },
        { type: 'function', function: { name: 'get_time', description: 'Current time', parameters: { type: 'object', properties: {} } } },
      ],
      options: { temperature: 0.2, num_predict: 256 },
    });
  });

  it('streams with stream true; think and model options go where Ollama reads them', async () => {
    const request = baseRequest();
    request.options = { ...request.options, think: true, num_ctx: 8192 };
    const sent = await sendStreaming(ollamaKit, request);
    expect(sent.json).toMatchObject({ stream: true, think: true, options: { temperature: 0.2, num_predict: 256, num_ctx: 8192 } });
  });
});

describe('integers beyond 2^53 in the call options', () => {
  // As plainValueOf hands them over: a bigint where a number would round (9007199254740993 → …992).
  const SEED = 9007199254740993n;
  const BIG = 9223372036854775807n;

  it.each([
    ['custom', openAiKit, ['"seed":9007199254740993', '"logit_bias":{"42":-9223372036854775807}', '"max_tokens":9223372036854775807']],
    ['openai', openAiKit, ['"seed":9007199254740993', '"max_completion_tokens":9223372036854775807']],
    ['groq', openAiKit, ['"seed":9007199254740993']],
    ['openrouter', openAiKit, ['"seed":9007199254740993']],
    ['mistral', openAiKit, ['"random_seed":9007199254740993', '"max_tokens":9223372036854775807']],
    ['anthropic', anthropicKit, ['"top_k":9007199254740993', '"max_tokens":9223372036854775807']],
    ['gemini', geminiKit, ['"seed":9007199254740993', '"topK":9007199254740993', '"maxOutputTokens":9223372036854775807']],
    ['ollama', ollamaKit, ['"seed":9007199254740993', '"top_k":9007199254740993', '"num_predict":9223372036854775807']],
  ] as const)('%s writes them with their digits, whole and streamed', async (adapterType, kit, expected) => {
    const request = baseRequest({ tools: [] });
    request.options = { ...request.options, seed: SEED, top_k: SEED, logit_bias: { 42: -BIG }, max_tokens: BIG };
    const { sent } = await send(kit, request, {}, adapterType);
    for (const text of expected) expect(sent.text).toContain(text);
    const streamed = await sendStreaming(kit, request, adapterType);
    for (const text of expected) expect(streamed.text).toContain(text);
  });

  it('safe numbers stay as they were', async () => {
    const request = baseRequest({ tools: [] });
    request.options = { ...request.options, seed: 9007199254740991, top_k: 40 };
    const { sent, body } = await send(openAiKit, request, {}, 'custom');
    expect(body).toMatchObject({ seed: 9007199254740991, top_k: 40, temperature: 0.2, max_tokens: 256 });
    expect(sent.text).toContain('"seed":9007199254740991');
  });
});

describe('endpoints', () => {
  const body = JSON.stringify(openAiKit.scenarios.text.body);

  function recordingFetch(urls: string[], response: unknown = JSON.parse(body)): typeof fetch {
    return async (input) => {
      urls.push(String(input));
      return new Response(JSON.stringify(response), { status: 200, headers: { 'content-type': 'application/json' } });
    };
  }

  it.each([
    ['openai', openAiKit, 'https://api.openai.com/v1/chat/completions'],
    ['openrouter', openAiKit, 'https://openrouter.ai/api/v1/chat/completions'],
    ['mistral', openAiKit, 'https://api.mistral.ai/v1/chat/completions'],
    ['groq', openAiKit, 'https://api.groq.com/openai/v1/chat/completions'],
    ['anthropic', anthropicKit, 'https://api.anthropic.com/v1/messages'],
    ['gemini', geminiKit, 'https://generativelanguage.googleapis.com/v1beta/models/test-model-1:generateContent'],
    ['ollama', ollamaKit, 'http://localhost:11434/api/chat'],
  ] as const)('%s defaults to its public endpoint', async (adapterType, kit, expected) => {
    const urls: string[] = [];
    await createChatAdapter(settings(adapterType, { endpointUrl: '' }), { fetch: recordingFetch(urls, kit.scenarios.text.body) }).chat(baseRequest());
    expect(urls).toEqual([expected]);
  });

  it('uses a configured endpoint, with or without a trailing slash', async () => {
    const urls: string[] = [];
    const fetcher = recordingFetch(urls);
    await createChatAdapter(settings('openai', { endpointUrl: 'https://gateway.example/v1/' }), { fetch: fetcher }).chat(baseRequest());
    await createChatAdapter(settings('custom', { endpointUrl: 'http://10.0.0.5:8000/v1' }), { fetch: fetcher }).chat(baseRequest());
    expect(urls).toEqual(['https://gateway.example/v1/chat/completions', 'http://10.0.0.5:8000/v1/chat/completions']);
  });

  it('custom without an endpoint is a request error and sends nothing', async () => {
    const urls: string[] = [];
    const adapter = createChatAdapter(settings('custom', { endpointUrl: '' }), { fetch: recordingFetch(urls) });
    await expect(adapter.chat(baseRequest())).rejects.toThrow(ProviderRequestError);
    await expect(adapter.chat(baseRequest())).rejects.toThrow('custom-main: no endpoint: a custom provider needs its endpoint URL set');
    expect(urls).toEqual([]);
  });

  it('maps every adapter type to its family and refuses an unknown one', () => {
    for (const type of ['openai', 'openrouter', 'mistral', 'groq', 'custom', 'anthropic', 'gemini', 'ollama'] as const) {
      expect(createChatAdapter(settings(type)).adapterType).toBe(type);
    }
    expect(() => createChatAdapter(settings('cohere' as AdapterType))).toThrow('cohere-main: unknown adapter type "cohere"');
  });

  it('adds custom headers from the provider options without letting them replace auth', async () => {
    const seen: Headers[] = [];
    const fetcher: typeof fetch = async (_input, init) => {
      seen.push(new Headers(init?.headers));
      return new Response(body, { status: 200 });
    };
    const options = { customHeaders: { 'X-Gateway-Tenant': 'acme', Authorization: 'Bearer other' } };
    await createChatAdapter(settings('openai', { options }), { fetch: fetcher }).chat(baseRequest());
    expect(seen[0]?.get('x-gateway-tenant')).toBe('acme');
    expect(seen[0]?.get('authorization')).toBe(`Bearer ${API_KEY}`);
  });
});

describe('JSON output (nr_llm\'s response_format "json", a task\'s response_schema)', () => {
  const schema = { type: 'object', required: ['a'] };
  const jsonRequest = (withSchema: boolean): ChatRequest => {
    const request = baseRequest();
    request.options = { ...request.options, response_format: 'json', ...(withSchema ? { response_schema: schema } : {}) };
    return request;
  };

  it('OpenAI-compatible: json_object, or json_schema with the schema', async () => {
    expect((await send(openAiKit, jsonRequest(false))).body.response_format).toEqual({ type: 'json_object' });
    const { body, result } = await send(openAiKit, jsonRequest(true));
    expect(body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'output', schema } });
    expect(body.response_schema).toBeUndefined();
    expect(result.warnings).toEqual([]);
  });

  it('an object response_format from a configuration\'s options still passes as it is', async () => {
    const request = baseRequest();
    request.options = { ...request.options, response_format: { type: 'json_object' } };
    expect((await send(openAiKit, request)).body.response_format).toEqual({ type: 'json_object' });
  });

  it('Ollama: format "json", or the schema', async () => {
    expect((await send(ollamaKit, jsonRequest(false))).body.format).toBe('json');
    expect((await send(ollamaKit, jsonRequest(true))).body.format).toEqual(schema);
  });

  it('Gemini: responseMimeType application/json, with responseJsonSchema', async () => {
    expect((await send(geminiKit, jsonRequest(false))).body.generationConfig).toMatchObject({ responseMimeType: 'application/json' });
    expect((await send(geminiKit, jsonRequest(true))).body.generationConfig).toMatchObject({ responseMimeType: 'application/json', responseJsonSchema: schema });
  });

  it('Anthropic has no JSON mode: nothing is added and nothing warned (the prompt asks for JSON)', async () => {
    const { body, result } = await send(anthropicKit, jsonRequest(true));
    expect(body.response_format).toBeUndefined();
    expect(body.response_schema).toBeUndefined();
    expect(result.warnings).toEqual([]);
  });
});

