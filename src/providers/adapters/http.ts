/**
 * The one place that talks HTTP to providers: timeouts, the caller's
 * cancellation, error mapping and retries with jittered exponential backoff.
 * Every adapter goes through `ProviderHttpClient`; none calls `fetch` itself.
 */
import {
  ProviderCancelledError,
  ProviderConnectionError,
  ProviderError,
  ProviderRateLimitError,
  ProviderResponseError,
  errorFromResponse,
  excerptBody,
} from './errors';

export interface AdapterLogger {
  warn(obj: object, msg: string): void;
}

export interface RetryPolicy {
  /** First backoff step in ms; doubled per retry, jittered to 50–100 %. */
  baseDelayMs: number;
  /** Ceiling of one backoff step. */
  maxDelayMs: number;
  /** A `Retry-After` longer than this is not waited for: the error goes to the caller. */
  maxRetryAfterMs: number;
  /** In [0, 1); injectable so tests can pin the jitter. */
  random: () => number;
  /** Resolves after `ms`, rejects when `signal` aborts; injectable so tests need not wait. */
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export const DEFAULT_RETRY_POLICY: RetryPolicy = {
  baseDelayMs: 500,
  maxDelayMs: 20_000,
  maxRetryAfterMs: 60_000,
  random: Math.random,
  sleep: abortableSleep,
};

/** Stateless when called without `stream: true`, so one instance serves every call. */
const UTF8 = new TextDecoder('utf-8');

/** Used when neither the call options nor the provider row give a usable timeout (behaviour.md §5 default). */
const FALLBACK_TIMEOUT_SECONDS = 120;
/** A timeout is 1 s to an hour, as configurations and providers validate it; anything else is not a usable value. */
export const MAX_TIMEOUT_SECONDS = 3600;
/** The provider row's default `api_timeout`. */
const FALLBACK_IDLE_SECONDS = 30;
/** Default for `PROVIDER_MAX_RESPONSE_BYTES`: what one provider call may answer. */
export const DEFAULT_MAX_RESPONSE_BYTES = 10 * 1024 * 1024;

export interface HttpClientOptions {
  /** The provider row's identifier; prefixes every error message. */
  provider: string;
  /** Only used to redact it from error excerpts. */
  apiKey: string | null;
  maxRetries: number;
  fetch: typeof fetch;
  logger: AdapterLogger;
  retry: RetryPolicy;
  /** Bytes one call may receive; beyond it the call ends with a response error. Memory stays proportional to it. */
  maxResponseBytes: number;
}

/** The two deadlines of one call, in seconds (see `callDeadlines`). */
export interface CallDeadlines {
  /** The whole call: every attempt, every backoff wait, the whole body or stream. */
  totalSeconds: number;
  /** The longest silence: before the answer starts, and between stream frames (keep-alive comments are silence). */
  idleSeconds: number;
}

export interface HttpPost {
  url: string;
  headers: Record<string, string>;
  body: string;
  deadlines: CallDeadlines;
  signal?: AbortSignal;
}

/** A streamed body: its chunks, and `progress()` which the reader calls for every frame that carried data. */
export interface StreamBody {
  chunks: AsyncGenerator<Uint8Array, void, undefined>;
  progress(): void;
}

export class ProviderHttpClient {
  constructor(private readonly options: HttpClientOptions) {}

  /** POSTs and returns the text of a 2xx body, retrying retryable failures. */
  async postForText(post: HttpPost): Promise<string> {
    const deadline = Date.now() + post.deadlines.totalSeconds * 1000;
    return this.withRetries(post, deadline, async () => {
      const guard = new AttemptGuard(post.signal, post.deadlines, deadline);
      try {
        const response = await this.send(post, guard);
        // Reading the body is part of the attempt: a reset half-way through is retried like a refused connection.
        const chunks: Uint8Array[] = [];
        for await (const chunk of readBody(response, guard, this.options.provider, this.options.maxResponseBytes, true)) chunks.push(chunk);
        // One decoder call over the joined bytes is measurably cheaper than Response.text() for large bodies.
        return UTF8.decode(chunks.length === 1 ? chunks[0] : Buffer.concat(chunks));
      } catch (error) {
        throw guard.translate(error, this.options.provider);
      } finally {
        guard.dispose();
      }
    });
  }

  /**
   * POSTs and returns the body as raw chunks once a 2xx status arrived.
   * Retries cover only getting there: once bytes flow, a failure goes to the
   * caller, who may already have forwarded deltas. Leaving the iteration early
   * cancels the body, which releases the socket.
   */
  async postForStream(post: HttpPost): Promise<StreamBody> {
    const deadline = Date.now() + post.deadlines.totalSeconds * 1000;
    return this.withRetries(post, deadline, async () => {
      const guard = new AttemptGuard(post.signal, post.deadlines, deadline);
      try {
        const response = await this.send(post, guard);
        // From here on only frames with data count as progress, not bytes: a stream of keep-alive comments is silent.
        return { chunks: readBody(response, guard, this.options.provider, this.options.maxResponseBytes, false), progress: () => guard.arm() };
      } catch (error) {
        guard.dispose();
        throw guard.translate(error, this.options.provider);
      }
    });
  }

  private async send(post: HttpPost, guard: AttemptGuard): Promise<Response> {
    const response = await this.options.fetch(post.url, {
      method: 'POST',
      headers: post.headers,
      body: post.body,
      signal: guard.signal,
    });
    if (!response.ok) {
      // An error body is only excerpted: read at most a little of it.
      const text = await readLimitedText(response, 64 * 1024).catch(() => '');
      throw errorFromResponse(this.options.provider, response.status, response.headers, text, this.options.apiKey);
    }
    return response;
  }

  private async withRetries<T>(post: HttpPost, deadline: number, attempt: () => Promise<T>): Promise<T> {
    const { provider, maxRetries, logger, retry } = this.options;
    for (let retriesDone = 0; ; retriesDone++) {
      if (post.signal?.aborted === true) throw new ProviderCancelledError({ provider });
      if (Date.now() >= deadline) throw new ProviderConnectionError({ provider }, `timed out after ${post.deadlines.totalSeconds}s`);
      try {
        return await attempt();
      } catch (error) {
        if (!(error instanceof ProviderError) || !error.retryable || retriesDone >= maxRetries) throw error;
        const delayMs = retryDelay(retriesDone, error, retry);
        // No retry that could not even start before the call's deadline.
        if (delayMs === null || Date.now() + delayMs >= deadline) throw error;
        logger.warn(
          { provider, status: error.status, retry: retriesDone + 1, maxRetries, delayMs, error: error.message },
          'provider call failed, retrying',
        );
        try {
          await retry.sleep(delayMs, post.signal);
        } catch (sleepError) {
          throw new ProviderCancelledError({ provider, cause: sleepError });
        }
      }
    }
  }
}

/** The wait before retry number `retriesDone + 1`, or null when the provider asks for longer than we wait. */
export function retryDelay(retriesDone: number, error: ProviderError, policy: RetryPolicy): number | null {
  if (error instanceof ProviderRateLimitError && error.retryAfterMs !== null) {
    if (error.retryAfterMs > policy.maxRetryAfterMs) return null;
    // Honour the provider's wait exactly; a zero means "now", so fall through to the backoff instead.
    if (error.retryAfterMs > 0) return error.retryAfterMs;
  }
  const step = Math.min(policy.maxDelayMs, policy.baseDelayMs * 2 ** retriesDone);
  // "Equal jitter": at least half the step, so a burst of clients spreads out without retrying instantly.
  return Math.round(step / 2 + policy.random() * (step / 2));
}

/** A timeout in seconds when it is a usable one (0 < t ≤ 3600), else null. */
function usableSeconds(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 && value <= MAX_TIMEOUT_SECONDS ? value : null;
}

/** Seconds from the call options, else the provider row, else the documented default. Values outside 0..3600 are not usable. */
export function effectiveTimeoutSeconds(optionTimeout: unknown, providerTimeout: number): number {
  return usableSeconds(optionTimeout) ?? usableSeconds(providerTimeout) ?? FALLBACK_TIMEOUT_SECONDS;
}

/**
 * The deadlines of one provider call: the whole call is bounded by the call
 * options' `timeout` (the configuration's, else the model's default,
 * behaviour.md §5; 120 s without one); silence is bounded by the provider's
 * `api_timeout`, never longer than the whole call.
 */
export function callDeadlines(optionTimeout: unknown, providerTimeout: number): CallDeadlines {
  const totalSeconds = usableSeconds(optionTimeout) ?? FALLBACK_TIMEOUT_SECONDS;
  const idleSeconds = Math.min(totalSeconds, usableSeconds(providerTimeout) ?? FALLBACK_IDLE_SECONDS);
  return { totalSeconds, idleSeconds };
}

export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(signal.reason);
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * One attempt's abort controller: fires when the caller's signal fires (the
 * socket is torn down at once), when the call's overall deadline passes, or
 * when the attempt is silent for longer than the idle deadline. Remembers
 * which of them happened, so the error says so.
 */
class AttemptGuard {
  private readonly controller = new AbortController();
  private idleTimer: NodeJS.Timeout | undefined;
  private readonly totalTimer: NodeJS.Timeout;
  private timedOutAfter: number | null = null;
  private readonly onCallerAbort = (): void => this.controller.abort(this.caller?.reason);

  constructor(
    private readonly caller: AbortSignal | undefined,
    private readonly deadlines: CallDeadlines,
    deadline: number,
  ) {
    if (caller !== undefined) {
      if (caller.aborted) this.controller.abort(caller.reason);
      else caller.addEventListener('abort', this.onCallerAbort, { once: true });
    }
    this.totalTimer = setTimeout(() => this.timeOut(deadlines.totalSeconds), Math.max(0, deadline - Date.now()));
    this.arm();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** (Re)starts the silence timer: the provider made progress. */
  arm(): void {
    this.disarm();
    this.idleTimer = setTimeout(() => this.timeOut(this.deadlines.idleSeconds), this.deadlines.idleSeconds * 1000);
  }

  /** Stops the silence timer while the caller, not the provider, is the one taking time. */
  disarm(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  dispose(): void {
    this.disarm();
    clearTimeout(this.totalTimer);
    this.caller?.removeEventListener('abort', this.onCallerAbort);
  }

  private timeOut(seconds: number): void {
    if (this.controller.signal.aborted) return;
    this.timedOutAfter = seconds;
    this.controller.abort(new Error(`timed out after ${seconds}s`));
  }

  translate(error: unknown, provider: string): ProviderError {
    if (this.caller?.aborted === true) return new ProviderCancelledError({ provider, cause: error });
    if (error instanceof ProviderError) return error;
    if (this.timedOutAfter !== null) {
      return new ProviderConnectionError({ provider, cause: error }, `timed out after ${this.timedOutAfter}s`);
    }
    const code = networkErrorCode(error);
    return new ProviderConnectionError(
      { provider, cause: error, bodyExcerpt: code === null ? excerptBody(String(error), null) : '' },
      code === null ? 'connection failed' : `connection failed (${code})`,
    );
  }
}

/** undici wraps the socket error: `TypeError('fetch failed', { cause: { code: 'ECONNRESET' } })`. */
function networkErrorCode(error: unknown): string | null {
  let current: unknown = error;
  for (let depth = 0; depth < 4 && typeof current === 'object' && current !== null; depth++) {
    const code = (current as { code?: unknown }).code;
    if (typeof code === 'string' && code !== '') return code;
    current = (current as { cause?: unknown }).cause;
  }
  return null;
}

/**
 * The body's chunks, at most `maxBytes` in all: beyond that the read stops
 * and the call ends with a response error (not retried: the same question
 * gets the same long answer). `bytesAreProgress`: every chunk re-arms the
 * silence timer (a plain body); a stream's reader re-arms it per frame instead.
 */
async function* readBody(
  response: Response,
  guard: AttemptGuard,
  provider: string,
  maxBytes: number,
  bytesAreProgress: boolean,
): AsyncGenerator<Uint8Array, void, undefined> {
  const declared = Number(response.headers.get('content-length'));
  if (Number.isFinite(declared) && declared > maxBytes) {
    response.body?.cancel().catch(() => undefined);
    guard.dispose();
    throw tooLarge(provider, maxBytes);
  }
  if (response.body === null) {
    guard.dispose();
    return;
  }
  const reader = response.body.getReader();
  let drained = false;
  let received = 0;
  try {
    for (;;) {
      if (bytesAreProgress) guard.arm();
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (error) {
        throw guard.translate(error, provider);
      }
      if (bytesAreProgress) guard.disarm();
      if (next.done) {
        drained = true;
        return;
      }
      received += next.value.byteLength;
      if (received > maxBytes) throw tooLarge(provider, maxBytes);
      yield next.value;
    }
  } finally {
    guard.dispose();
    if (!drained) reader.cancel().catch(() => undefined);
  }
}

function tooLarge(provider: string, maxBytes: number): ProviderResponseError {
  return new ProviderResponseError({ provider }, `answer larger than ${maxBytes} bytes (PROVIDER_MAX_RESPONSE_BYTES)`);
}

/** At most `maxBytes` of a body as text; the rest is not read. */
async function readLimitedText(response: Response, maxBytes: number): Promise<string> {
  if (response.body === null) return '';
  const reader = response.body.getReader();
  const chunks: Uint8Array[] = [];
  let received = 0;
  try {
    while (received < maxBytes) {
      const next = await reader.read();
      if (next.done) break;
      chunks.push(next.value);
      received += next.value.byteLength;
    }
  } finally {
    reader.cancel().catch(() => undefined);
  }
  return UTF8.decode(Buffer.concat(chunks).subarray(0, maxBytes));
}
