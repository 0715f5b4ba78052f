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

export interface HttpClientOptions {
  /** The provider row's identifier; prefixes every error message. */
  provider: string;
  /** Only used to redact it from error excerpts. */
  apiKey: string | null;
  maxRetries: number;
  fetch: typeof fetch;
  logger: AdapterLogger;
  retry: RetryPolicy;
}

export interface HttpPost {
  url: string;
  headers: Record<string, string>;
  body: string;
  /** Seconds. For a plain call: the whole exchange including the body. For a stream: the longest silence. */
  timeoutSeconds: number;
  signal?: AbortSignal;
}

export class ProviderHttpClient {
  constructor(private readonly options: HttpClientOptions) {}

  /** POSTs and returns the text of a 2xx body, retrying retryable failures. */
  async postForText(post: HttpPost): Promise<string> {
    return this.withRetries(post, async () => {
      const guard = new AttemptGuard(post.signal, post.timeoutSeconds);
      try {
        const response = await this.send(post, guard);
        // Reading the body is part of the attempt: a reset half-way through is retried like a refused connection.
        // arrayBuffer + one decoder call is measurably cheaper than Response.text() for large bodies.
        return UTF8.decode(await response.arrayBuffer());
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
  async postForStream(post: HttpPost): Promise<AsyncGenerator<Uint8Array, void, undefined>> {
    return this.withRetries(post, async () => {
      const guard = new AttemptGuard(post.signal, post.timeoutSeconds);
      try {
        const response = await this.send(post, guard);
        return readBody(response, guard, this.options.provider);
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
      const text = await response.text().catch(() => '');
      throw errorFromResponse(this.options.provider, response.status, response.headers, text, this.options.apiKey);
    }
    return response;
  }

  private async withRetries<T>(post: HttpPost, attempt: () => Promise<T>): Promise<T> {
    const { provider, maxRetries, logger, retry } = this.options;
    for (let retriesDone = 0; ; retriesDone++) {
      if (post.signal?.aborted === true) throw new ProviderCancelledError({ provider });
      try {
        return await attempt();
      } catch (error) {
        if (!(error instanceof ProviderError) || !error.retryable || retriesDone >= maxRetries) throw error;
        const delayMs = retryDelay(retriesDone, error, retry);
        if (delayMs === null) throw error;
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

/** Seconds from the call options, else the provider row, else the documented default. */
export function effectiveTimeoutSeconds(optionTimeout: unknown, providerTimeout: number): number {
  if (typeof optionTimeout === 'number' && Number.isFinite(optionTimeout) && optionTimeout > 0) return optionTimeout;
  if (Number.isFinite(providerTimeout) && providerTimeout > 0) return providerTimeout;
  return FALLBACK_TIMEOUT_SECONDS;
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
 * socket is torn down at once) or when the attempt is silent for longer than
 * the timeout. Remembers which of the two happened, so the error says so.
 */
class AttemptGuard {
  private readonly controller = new AbortController();
  private timer: NodeJS.Timeout | undefined;
  private timedOut = false;
  private readonly onCallerAbort = (): void => this.controller.abort(this.caller?.reason);

  constructor(
    private readonly caller: AbortSignal | undefined,
    private readonly timeoutSeconds: number,
  ) {
    if (caller !== undefined) {
      if (caller.aborted) this.controller.abort(caller.reason);
      else caller.addEventListener('abort', this.onCallerAbort, { once: true });
    }
    this.arm();
  }

  get signal(): AbortSignal {
    return this.controller.signal;
  }

  /** (Re)starts the silence timer. */
  arm(): void {
    this.disarm();
    this.timer = setTimeout(() => {
      this.timedOut = true;
      this.controller.abort(new Error(`timed out after ${this.timeoutSeconds}s`));
    }, this.timeoutSeconds * 1000);
  }

  /** Stops the timer while the caller, not the provider, is the one taking time. */
  disarm(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
  }

  dispose(): void {
    this.disarm();
    this.caller?.removeEventListener('abort', this.onCallerAbort);
  }

  translate(error: unknown, provider: string): ProviderError {
    if (this.caller?.aborted === true) return new ProviderCancelledError({ provider, cause: error });
    if (error instanceof ProviderError) return error;
    if (this.timedOut) {
      return new ProviderConnectionError({ provider, cause: error }, `timed out after ${this.timeoutSeconds}s`);
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

async function* readBody(
  response: Response,
  guard: AttemptGuard,
  provider: string,
): AsyncGenerator<Uint8Array, void, undefined> {
  if (response.body === null) {
    guard.dispose();
    return;
  }
  const reader = response.body.getReader();
  let drained = false;
  try {
    for (;;) {
      guard.arm();
      let next: Awaited<ReturnType<typeof reader.read>>;
      try {
        next = await reader.read();
      } catch (error) {
        throw guard.translate(error, provider);
      }
      guard.disarm();
      if (next.done) {
        drained = true;
        return;
      }
      yield next.value;
    }
  } finally {
    guard.dispose();
    if (!drained) reader.cancel().catch(() => undefined);
  }
}
