/**
 * What the four wire families share: credentials, the HTTP exchange (through
 * `ProviderHttpClient`), body parsing, stream framing, raw capture and the
 * final `done` event. A family adapter only says how to build its request and
 * how to read its answer, whole or frame by frame.
 */
import { z } from 'zod/v4';

import { plainJsonText } from '../../shared/php-json';
import { usableApiKey } from './credentials';
import { ProviderConnectionError, ProviderError, ProviderResponseError, redactSecretsInJson } from './errors';
import {
  type AdapterLogger,
  type HttpPost,
  ProviderHttpClient,
  type RetryPolicy,
  callDeadlines,
} from './http';
import { NdjsonFramingError, decodeNdjsonLines } from './ndjson';
import { SseFramingError, decodeSse } from './sse';
import type {
  AdapterType,
  ChatAdapter,
  ChatRequest,
  ChatResult,
  ProviderSettings,
  StreamEvent,
} from './types';
import { type WireContext, parseJsonText } from './wire';

export interface AdapterDependencies {
  fetch: typeof fetch;
  logger: AdapterLogger;
  retry: RetryPolicy;
  newToolCallId: () => string;
  /** Bytes one call may receive. */
  maxResponseBytes: number;
}

export interface WireRequest {
  url: string;
  headers: Record<string, string>;
  body: Record<string, unknown>;
}

/** A result as a family decodes it; warnings and raw are added here. */
export type DecodedResult = Omit<ChatResult, 'warnings' | 'raw'>;

export type StreamDelta = Extract<StreamEvent, { type: 'content' | 'thinking' }>;

/** Reads one stream frame at a time and assembles the final result. */
export interface StreamDecoder {
  /** One decoded frame (an SSE event's JSON data, or an NDJSON line); returns the deltas it carries. */
  accept(frame: unknown, eventName: string | undefined): StreamDelta[];
  /** True once the provider's terminal frame arrived; nothing after it is read. */
  readonly complete: boolean;
  /**
   * The result; throws when the stream ended before the provider finished it.
   * `sawEndSentinel`: the framing's own end marker arrived (OpenAI's `[DONE]`).
   */
  finish(sawEndSentinel: boolean): DecodedResult;
}

/** `settings.options.customHeaders`, e.g. for a gateway in front of the provider. */
const customHeadersSchema = z.record(z.string(), z.string());

export abstract class HttpChatAdapter implements ChatAdapter {
  abstract readonly adapterType: AdapterType;
  protected abstract readonly framing: 'sse' | 'ndjson';
  protected abstract readonly requiresApiKey: boolean;

  private readonly http: ProviderHttpClient;

  constructor(
    protected readonly settings: ProviderSettings,
    protected readonly deps: AdapterDependencies,
  ) {
    this.http = new ProviderHttpClient({
      provider: settings.identifier,
      apiKey: settings.apiKey,
      maxRetries: Math.max(0, Math.floor(settings.maxRetries)),
      fetch: deps.fetch,
      logger: deps.logger,
      retry: deps.retry,
      maxResponseBytes: deps.maxResponseBytes,
    });
  }

  protected abstract buildRequest(
    request: ChatRequest,
    stream: boolean,
    warnings: string[],
    apiKey: string | null,
  ): WireRequest;

  protected abstract decodeResponse(body: unknown, context: WireContext): DecodedResult;

  protected abstract createStreamDecoder(context: WireContext): StreamDecoder;

  /** A frame that ends the stream without being JSON (OpenAI's `[DONE]`). */
  protected isEndSentinel(_data: string): boolean {
    return false;
  }

  async chat(request: ChatRequest): Promise<ChatResult> {
    const { post, warnings, context } = this.prepare(request, false);
    const text = await this.http.postForText(post);
    const body = parseJsonText(text, context, 'response body');
    const decoded = this.decodeResponse(body, context);
    return withExtras(decoded, warnings, request.options.captureRaw === true, body, context.apiKey);
  }

  /**
   * Deltas as they arrive, then one `done` whose result is what `chat` gives
   * for the same answer. With raw capture, `raw` is the list of decoded frames.
   */
  async *stream(request: ChatRequest): AsyncGenerator<StreamEvent, void, undefined> {
    const { post, warnings, context } = this.prepare(request, true);
    const { chunks, progress } = await this.http.postForStream(post);
    const decoder = this.createStreamDecoder(context);
    const captured: unknown[] | null = request.options.captureRaw === true ? [] : null;
    let sawEndSentinel = false;
    try {
      for await (const frame of this.frames(chunks)) {
        progress();
        if (this.isEndSentinel(frame.data)) {
          sawEndSentinel = true;
          break;
        }
        const parsed = parseJsonText(frame.data, context, 'stream frame');
        captured?.push(parsed);
        yield* decoder.accept(parsed, frame.event);
        if (decoder.complete) break;
      }
    } catch (error) {
      throw this.streamFailure(error);
    } finally {
      // Stops reading and releases the socket when the loop ended early or failed.
      await chunks.return(undefined);
    }
    yield { type: 'done', result: withExtras(decoder.finish(sawEndSentinel), warnings, captured !== null, captured, context.apiKey) };
  }

  private async *frames(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<{ data: string; event: string | undefined }> {
    if (this.framing === 'sse') {
      for await (const event of decodeSse(chunks)) yield { data: event.data, event: event.event };
    } else {
      for await (const line of decodeNdjsonLines(chunks)) yield { data: line, event: undefined };
    }
  }

  private streamFailure(error: unknown): unknown {
    if (error instanceof ProviderError) return error;
    if (error instanceof SseFramingError || error instanceof NdjsonFramingError) {
      return new ProviderResponseError({ provider: this.settings.identifier, cause: error }, error.message);
    }
    return error;
  }

  private prepare(request: ChatRequest, stream: boolean): { post: HttpPost; warnings: string[]; context: WireContext } {
    const apiKey = usableApiKey(this.settings, this.requiresApiKey);
    const warnings: string[] = [];
    const wire = this.buildRequest(request, stream, warnings, apiKey);
    const post: HttpPost = {
      url: wire.url,
      headers: { ...this.customHeaders(), ...wire.headers },
      // Exact digits for an option integer beyond 2^53 (a bigint, see plainValueOf).
      body: plainJsonText(wire.body),
      deadlines: callDeadlines(request.options.timeout, this.settings.apiTimeout),
      ...(request.signal === undefined ? {} : { signal: request.signal }),
    };
    const context: WireContext = {
      provider: this.settings.identifier,
      apiKey,
      logger: this.deps.logger,
      newToolCallId: this.deps.newToolCallId,
    };
    return { post, warnings, context };
  }

  /** Lower-cased, so the adapter's own headers (auth, content type) replace them instead of being sent twice. */
  private customHeaders(): Record<string, string> {
    const configured = this.settings.options.customHeaders;
    // Checked before parsing: a failed safeParse builds an error object, which is not free on every call.
    if (configured === undefined || configured === null) return {};
    const parsed = customHeadersSchema.safeParse(configured);
    if (!parsed.success) return {};
    return Object.fromEntries(Object.entries(parsed.data).map(([name, value]) => [name.toLowerCase(), value]));
  }
}

/** Raw capture keeps the provider's body, minus any credential it echoed (the key is known here, so masked exactly). */
function withExtras(decoded: DecodedResult, warnings: string[], captureRaw: boolean, raw: unknown, apiKey: string | null): ChatResult {
  const result: ChatResult = { ...decoded, warnings };
  if (captureRaw) result.raw = redactSecretsInJson(raw, apiKey);
  return result;
}

/**
 * The body ended before the provider said the answer was finished: a cut
 * connection, not a complete answer, so it must not pass as one.
 */
export function incompleteStream(context: WireContext, detail: string): ProviderError {
  return new ProviderConnectionError({ provider: context.provider }, `stream ended early (${detail})`);
}
