/**
 * One contract, every wire family: the same behaviours checked against a
 * local server answering in each provider's documented format.
 */
import {
  ProviderAuthenticationError,
  ProviderCancelledError,
  ProviderConnectionError,
  ProviderRateLimitError,
  ProviderRequestError,
  ProviderResponseError,
} from '../../src/providers/adapters/errors';
import { createChatAdapter, type ChatAdapterDeps } from '../../src/providers/adapters/registry';
import type { ChatResult, ProviderSettings, StreamEvent } from '../../src/providers/adapters/types';
import { anthropicKit } from './fixtures/anthropic';
import { geminiKit } from './fixtures/gemini';
import { ollamaKit } from './fixtures/ollama';
import { openAiKit } from './fixtures/openai';
import { FakeProvider, rechunkingFetch } from './support/fake-provider';
import { API_KEY, type ProviderKit, type Scenario, TEXT_PIECES, baseRequest, settingsFor } from './support/kit';

const KITS: ProviderKit[] = [openAiKit, anthropicKit, geminiKit, ollamaKit];
const INVENTED_ID = /^call_[0-9a-f]{32}$/;

async function collect(events: AsyncIterable<StreamEvent>): Promise<StreamEvent[]> {
  const out: StreamEvent[] = [];
  for await (const event of events) out.push(event);
  return out;
}

function doneResult(events: StreamEvent[]): ChatResult {
  const last = events[events.length - 1];
  if (last?.type !== 'done') throw new Error(`stream did not end with done: ${JSON.stringify(events.map((event) => event.type))}`);
  return last.result;
}

function textOf(events: StreamEvent[], type: 'content' | 'thinking'): string {
  return events.map((event) => (event.type === type ? event.text : '')).join('');
}

/** Frames of a scripted stream, for cutting it at a frame boundary. */
function framesOf(stream: string): string[] {
  const separator = stream.includes('\r\n\r\n') ? '\r\n\r\n' : stream.includes('\n\n') ? '\n\n' : '\n';
  return stream
    .split(separator)
    .filter((frame) => frame !== '')
    .map((frame) => frame + separator);
}

describe.each(KITS)('$name adapter contract', (kit) => {
  let server: FakeProvider;
  let sleeps: number[];
  let warn: jest.Mock;

  beforeAll(async () => {
    server = await FakeProvider.start();
  });
  afterAll(async () => {
    await server.close();
  });
  beforeEach(() => {
    server.reset();
    sleeps = [];
    warn = jest.fn();
  });

  function adapter(overrides: Partial<ProviderSettings> = {}, deps: ChatAdapterDeps = {}) {
    return createChatAdapter(settingsFor(kit, server.url, overrides), {
      logger: { warn },
      retry: {
        baseDelayMs: 40,
        sleep: async (ms: number) => {
          sleeps.push(ms);
        },
      },
      ...deps,
    });
  }

  /**
   * Invented ids must look random; they are then replaced so results compare with the fixtures.
   * The reported model is compared on its own (below), not with every fixture.
   */
  function comparable(reported: ChatResult): ChatResult {
    const { model: _model, ...result } = reported;
    if (!kit.inventsIds) return result;
    return {
      ...result,
      toolCalls: result.toolCalls.map((call) => {
        expect(call.id).toMatch(INVENTED_ID);
        return { ...call, id: '<invented>' };
      }),
    };
  }

  const scenarios: [string, Scenario][] = Object.entries({ ...kit.scenarios, ...kit.extraScenarios });

  describe.each(scenarios)('%s', (_name, scenario) => {
    it('chat returns the normalised result', async () => {
      server.enqueue({ body: JSON.stringify(scenario.body) });
      const result = await adapter().chat(baseRequest());
      expect(comparable(result)).toEqual({ ...scenario.expected, warnings: [] });
      expect(result).not.toHaveProperty('raw');
      expect(warn).toHaveBeenCalledTimes(scenario.skipped ?? 0);
    });

    it('a stream cut every 1..7 bytes ends with the chat result', async () => {
      for (let size = 1; size <= 7; size++) {
        server.enqueue({ body: scenario.stream, headers: { 'content-type': kit.streamContentType } });
        const events = await collect(adapter({}, { fetch: rechunkingFetch(size) }).stream(baseRequest()));
        expect(events.filter((event) => event.type === 'done')).toHaveLength(1);
        const result = doneResult(events);
        expect(comparable(result)).toEqual({ ...scenario.expected, warnings: [] });
        // The deltas are the answer as it arrived; the final result only trims around removed think tags.
        expect(textOf(events, 'content').trim()).toBe(result.content);
        expect(textOf(events, 'thinking')).toBe(result.thinking ?? '');
      }
      expect(warn).toHaveBeenCalledTimes(7 * (scenario.skipped ?? 0));
    });
  });

  it('reports the model the provider names in its answer (every wire format carries one: model, or Gemini\'s modelVersion)', async () => {
    const body = kit.scenarios.text.body as { model?: unknown; modelVersion?: unknown };
    const named = body.model ?? body.modelVersion;
    server.enqueue({ body: JSON.stringify(kit.scenarios.text.body) });
    server.enqueue({ body: kit.scenarios.text.stream, headers: { 'content-type': kit.streamContentType } });
    const plain = await adapter().chat(baseRequest());
    const streamed = doneResult(await collect(adapter().stream(baseRequest())));
    const expected = typeof named === 'string' ? named : undefined;
    expect(expected).toBeDefined();
    expect(plain.model).toBe(expected);
    expect(streamed.model).toBe(expected);
  });

  it('posts to the documented path with the key in the documented header', async () => {
    server.enqueue({ body: JSON.stringify(kit.scenarios.text.body) });
    server.enqueue({ body: kit.scenarios.text.stream, headers: { 'content-type': kit.streamContentType } });
    await adapter().chat(baseRequest());
    await collect(adapter().stream(baseRequest()));
    const [plain, streamed] = server.requests;
    const [header, value] = kit.authHeader(API_KEY);
    expect(plain?.method).toBe('POST');
    expect(plain?.path).toBe(kit.expectedPath(false, 'test-model-1'));
    expect(streamed?.path).toBe(kit.expectedPath(true, 'test-model-1'));
    expect(plain?.headers[header]).toBe(value);
    expect(plain?.headers['content-type']).toBe('application/json');
  });

  it('a stream the server writes in 3-byte pieces decodes the same', async () => {
    server.enqueue({ body: kit.scenarios.thinking.stream, chunkBytes: 3, headers: { 'content-type': kit.streamContentType } });
    const result = doneResult(await collect(adapter().stream(baseRequest())));
    expect(comparable(result)).toEqual({ ...kit.scenarios.thinking.expected, warnings: [] });
  });

  it('keeps the decoded body only when raw capture is asked for', async () => {
    server.enqueue({ body: JSON.stringify(kit.scenarios.text.body) });
    server.enqueue({ body: kit.scenarios.text.stream, headers: { 'content-type': kit.streamContentType } });
    const request = baseRequest();
    request.options.captureRaw = true;
    const plain = await adapter().chat(request);
    expect(plain.raw).toEqual(kit.scenarios.text.body);
    const streamed = doneResult(await collect(adapter().stream(request)));
    expect(Array.isArray(streamed.raw)).toBe(true);
    expect((streamed.raw as unknown[]).length).toBeGreaterThan(2);
  });

  it('401 is an authentication error, not retried, and never shows the key', async () => {
    server.enqueue({ status: 401, body: JSON.stringify(kit.errorBody(401, `Incorrect API key provided: ${API_KEY}.`)) });
    const error: unknown = await adapter().chat(baseRequest()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderAuthenticationError);
    const authError = error as ProviderAuthenticationError;
    expect(authError.status).toBe(401);
    expect(authError.provider).toBe(`${kit.name}-main`);
    expect(authError.message).toMatch(new RegExp(`^${kit.name}-main: HTTP 401 authentication failed: .*Incorrect API key provided`));
    expect(authError.message).not.toContain(API_KEY);
    expect(authError.bodyExcerpt).not.toContain(API_KEY);
    expect(server.requests).toHaveLength(1);
  });

  it('401 on a stream fails the first step of the iteration', async () => {
    server.enqueue({ status: 401, body: JSON.stringify(kit.errorBody(401, 'invalid key')) });
    await expect(collect(adapter().stream(baseRequest()))).rejects.toBeInstanceOf(ProviderAuthenticationError);
  });

  it('400 is a request error and is not retried', async () => {
    server.enqueue({ status: 400, body: JSON.stringify(kit.errorBody(400, 'messages: field required')) });
    const error: unknown = await adapter().chat(baseRequest()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderRequestError);
    expect((error as Error).message).toContain('messages: field required');
    expect(server.requests).toHaveLength(1);
  });

  it('429 with Retry-After waits that long, then succeeds', async () => {
    server.enqueue(
      { status: 429, headers: { 'retry-after': '2' }, body: JSON.stringify(kit.errorBody(429, 'Rate limit reached')) },
      { body: JSON.stringify(kit.scenarios.text.body) },
    );
    const result = await adapter().chat(baseRequest());
    expect(result.content).toBe(kit.scenarios.text.expected.content);
    expect(sleeps).toEqual([2000]);
    expect(server.requests).toHaveLength(2);
    expect(warn).toHaveBeenCalledWith(expect.objectContaining({ status: 429, delayMs: 2000 }), 'provider call failed, retrying');
  });

  it('429 past the retries is a rate-limit error carrying the wait', async () => {
    const limited = { status: 429, headers: { 'retry-after': '1' }, body: JSON.stringify(kit.errorBody(429, 'slow down')) };
    server.enqueue(limited, limited, limited);
    const error: unknown = await adapter().chat(baseRequest()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderRateLimitError);
    expect((error as ProviderRateLimitError).retryAfterMs).toBe(1000);
    expect((error as Error).message).toMatch(new RegExp(`^${kit.name}-main: HTTP 429 rate limited: .*slow down`));
    expect(server.requests).toHaveLength(3);
  });

  it('500 then success: retried after a jittered backoff', async () => {
    server.enqueue({ status: 500, body: JSON.stringify(kit.errorBody(500, 'internal')) }, { body: JSON.stringify(kit.scenarios.text.body) });
    const result = await adapter().chat(baseRequest());
    expect(result.content).toBe(kit.scenarios.text.expected.content);
    expect(sleeps).toHaveLength(1);
    expect(sleeps[0]).toBeGreaterThanOrEqual(20);
    expect(sleeps[0]).toBeLessThanOrEqual(40);
  });

  it('5xx on every attempt ends in a connection error after maxRetries', async () => {
    const failing = { status: 503, body: JSON.stringify(kit.errorBody(503, 'overloaded')) };
    server.enqueue(failing, failing, failing);
    const error: unknown = await adapter().chat(baseRequest()).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderConnectionError);
    expect((error as ProviderConnectionError).retryable).toBe(true);
    expect(server.requests).toHaveLength(3);
    // Exponential: the second wait is drawn from a step twice as long.
    expect(sleeps[1]).toBeGreaterThanOrEqual(40);
  });

  it('a reset connection is a retryable connection error', async () => {
    server.enqueue({ reset: true }, { body: JSON.stringify(kit.scenarios.text.body) });
    const result = await adapter().chat(baseRequest());
    expect(result.content).toBe(kit.scenarios.text.expected.content);
    expect(server.requests).toHaveLength(2);
  });

  it('times out after options.timeout seconds and closes the connection', async () => {
    server.enqueue({ hang: true });
    const request = baseRequest();
    request.options.timeout = 0.2;
    const started = Date.now();
    const error: unknown = await adapter({ maxRetries: 0 }).chat(request).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderConnectionError);
    expect((error as Error).message).toBe(`${kit.name}-main: timed out after 0.2s`);
    expect(Date.now() - started).toBeLessThan(2000);
    await server.requests[0]?.clientClosed;
    expect(server.requests[0]?.clientClosedEarly).toBe(true);
  });

  it('a timeout is retried', async () => {
    server.enqueue({ hang: true }, { body: JSON.stringify(kit.scenarios.text.body) });
    const result = await adapter({ apiTimeout: 0.2, maxRetries: 1 }).chat(baseRequest());
    expect(result.content).toBe(kit.scenarios.text.expected.content);
    expect(server.requests).toHaveLength(2);
  });

  it("the caller's AbortSignal cancels at once, closes the socket and is not retried", async () => {
    server.enqueue({ hang: true }, { body: JSON.stringify(kit.scenarios.text.body) });
    const controller = new AbortController();
    const pending = adapter({ maxRetries: 3 }).chat({ ...baseRequest(), signal: controller.signal });
    const outcome = expect(pending).rejects.toBeInstanceOf(ProviderCancelledError);
    await server.received(1);
    const aborted = Date.now();
    controller.abort();
    await outcome;
    // At once: not when the 10 s timeout would have fired.
    expect(Date.now() - aborted).toBeLessThan(1000);
    await server.requests[0]?.clientClosed;
    expect(server.requests[0]?.clientClosedEarly).toBe(true);
    expect(server.requests).toHaveLength(1);
    expect(sleeps).toEqual([]);
  });

  it('cancelling mid-stream stops the iteration and closes the socket', async () => {
    const stream = kit.scenarios.text.stream;
    // Everything up to the first frame with text, then silence.
    const frames = framesOf(stream);
    const firstText = frames.findIndex((frame) => frame.includes(TEXT_PIECES[0] ?? ''));
    server.enqueue({
      body: stream,
      stallAfterBytes: Buffer.byteLength(frames.slice(0, firstText + 1).join('')),
      headers: { 'content-type': kit.streamContentType },
    });
    const controller = new AbortController();
    const seen: StreamEvent[] = [];
    const iterate = async () => {
      for await (const event of adapter().stream({ ...baseRequest(), signal: controller.signal })) {
        seen.push(event);
        if (event.type === 'content') controller.abort();
      }
    };
    const started = Date.now();
    await expect(iterate()).rejects.toBeInstanceOf(ProviderCancelledError);
    expect(Date.now() - started).toBeLessThan(1000);
    expect(seen.some((event) => event.type === 'content')).toBe(true);
    expect(seen.some((event) => event.type === 'done')).toBe(false);
    await server.requests[0]?.clientClosed;
    expect(server.requests[0]?.clientClosedEarly).toBe(true);
  });

  it('a stream that falls silent for longer than the timeout is a connection error', async () => {
    const frames = framesOf(kit.scenarios.text.stream);
    server.enqueue({ body: kit.scenarios.text.stream, stallAfterBytes: Buffer.byteLength(frames[0] ?? ''), headers: { 'content-type': kit.streamContentType } });
    const request = baseRequest();
    request.options.timeout = 0.2;
    const error: unknown = await collect(adapter().stream(request)).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderConnectionError);
    expect((error as Error).message).toBe(`${kit.name}-main: timed out after 0.2s`);
  });

  it('a stream that sends only keep-alives ends at the idle deadline (the provider\'s apiTimeout)', async () => {
    // SSE comment lines, or blank NDJSON lines: bytes, but no frame.
    server.enqueue({ keepAlive: kit.streamContentType.includes('event-stream') ? ': keep-alive\n\n' : '\n', keepAliveEveryMs: 40 });
    const started = Date.now();
    const error: unknown = await collect(adapter({ apiTimeout: 0.3, maxRetries: 0 }).stream(baseRequest())).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderConnectionError);
    expect((error as Error).message).toBe(`${kit.name}-main: timed out after 0.3s`);
    expect(Date.now() - started).toBeLessThan(3000);
  });

  it('an answer beyond the byte cap ends the call with a clear error, read in pieces or announced by its length', async () => {
    const big = JSON.stringify({ padding: 'x'.repeat(4096) });
    server.enqueue({ body: big, chunkBytes: 512 }, { body: big });
    for (let i = 0; i < 2; i += 1) {
      const error: unknown = await adapter({ maxRetries: 3 }, { maxResponseBytes: 1024 }).chat(baseRequest()).catch((caught: unknown) => caught);
      expect(error).toBeInstanceOf(ProviderResponseError);
      expect((error as Error).message).toBe(`${kit.name}-main: answer larger than 1024 bytes (PROVIDER_MAX_RESPONSE_BYTES)`);
    }
    // Not retried: the same question gets the same long answer.
    expect(server.requests).toHaveLength(2);
    const stream = kit.scenarios.text.stream;
    server.enqueue({ body: stream + ' '.repeat(2048), chunkBytes: 256, headers: { 'content-type': kit.streamContentType } });
    const streamed: unknown = await collect(adapter({}, { maxResponseBytes: Buffer.byteLength(stream) - 1 }).stream(baseRequest())).catch((caught: unknown) => caught);
    expect(streamed).toBeInstanceOf(ProviderResponseError);
  });

  it('leaving a stream early releases the connection', async () => {
    const frames = framesOf(kit.scenarios.text.stream);
    const firstText = frames.findIndex((frame) => frame.includes(TEXT_PIECES[0] ?? ''));
    server.enqueue({
      body: kit.scenarios.text.stream,
      stallAfterBytes: Buffer.byteLength(frames.slice(0, firstText + 1).join('')),
      headers: { 'content-type': kit.streamContentType },
    });
    for await (const event of adapter().stream(baseRequest())) {
      if (event.type === 'content') break;
    }
    await server.requests[0]?.clientClosed;
    expect(server.requests[0]?.clientClosedEarly).toBe(true);
  });

  it('an already aborted signal sends nothing', async () => {
    const controller = new AbortController();
    controller.abort();
    await expect(adapter().chat({ ...baseRequest(), signal: controller.signal })).rejects.toBeInstanceOf(ProviderCancelledError);
    expect(server.requests).toHaveLength(0);
  });

  it('a stream that ends before the provider finished it is a connection error, not an answer', async () => {
    const frames = framesOf(kit.scenarios.text.stream);
    server.enqueue({ body: frames.slice(0, 2).join(''), headers: { 'content-type': kit.streamContentType } });
    const error: unknown = await collect(adapter().stream(baseRequest())).catch((caught: unknown) => caught);
    expect(error).toBeInstanceOf(ProviderConnectionError);
    expect((error as Error).message).toContain('stream ended early');
  });

  it('a body that is not JSON is a response error naming the provider', async () => {
    server.enqueue({ body: '<html>502 Bad Gateway</html>' });
    await expect(adapter({ maxRetries: 0 }).chat(baseRequest())).rejects.toThrow(`${kit.name}-main: response body is not JSON`);
  });

  if (kit.needsKey) {
    it.each([
      ['no key', null],
      ['a TYPO3 vault identifier', '01890a5d-ac96-774b-bcce-b302099a8057'],
    ])('%s is an authentication error telling to set the key, and nothing is sent', async (_label, apiKey) => {
      await expect(adapter({ apiKey }).chat(baseRequest())).rejects.toThrow(
        expect.objectContaining({ name: 'ProviderAuthenticationError', message: expect.stringMatching(/set the API key/) }),
      );
      expect(server.requests).toHaveLength(0);
    });
  } else {
    it('works without a key, and refuses a vault identifier', async () => {
      server.enqueue({ body: JSON.stringify(kit.scenarios.text.body) });
      await adapter({ apiKey: null }).chat(baseRequest());
      expect(server.requests[0]?.headers.authorization).toBeUndefined();
      await expect(adapter({ apiKey: '%vault(ollama_key)%' }).chat(baseRequest())).rejects.toBeInstanceOf(ProviderAuthenticationError);
    });
  }

  if (kit.inventsIds) {
    it('invents call ids that differ between rounds', async () => {
      server.enqueue({ body: JSON.stringify(kit.scenarios.oneToolCall.body) }, { body: JSON.stringify(kit.scenarios.oneToolCall.body) });
      const first = await adapter().chat(baseRequest());
      const second = await adapter().chat(baseRequest());
      expect(first.toolCalls[0]?.id).toMatch(INVENTED_ID);
      expect(second.toolCalls[0]?.id).toMatch(INVENTED_ID);
      expect(first.toolCalls[0]?.id).not.toBe(second.toolCalls[0]?.id);
    });
  }
});
