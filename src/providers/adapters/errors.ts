/**
 * The error vocabulary of the provider adapters (behaviour.md §9).
 *
 * Every failure of a provider call reaches the caller as one of these classes.
 * The message is safe to log and to show to an administrator: it names the
 * provider row, the HTTP status and a short excerpt of the provider's answer
 * with secrets redacted. The API key never appears in a message, even when a
 * provider echoes it back.
 */

/** Longest provider-body excerpt kept on an error, in characters. */
export const BODY_EXCERPT_LIMIT = 200;

export type ProviderErrorKind = 'authentication' | 'rate_limited' | 'request' | 'connection' | 'cancelled' | 'response';

export interface ProviderErrorInit {
  /** The provider row's identifier, e.g. `openai-main`. */
  provider: string;
  status?: number | null;
  /** Already redacted and shortened; see `excerptBody`. */
  bodyExcerpt?: string;
  cause?: unknown;
}

export abstract class ProviderError extends Error {
  abstract readonly kind: ProviderErrorKind;
  /** Whether trying the same request again may succeed. */
  abstract readonly retryable: boolean;
  readonly provider: string;
  readonly status: number | null;
  readonly bodyExcerpt: string;

  protected constructor(init: ProviderErrorInit, summary: string) {
    const status = init.status ?? null;
    const excerpt = init.bodyExcerpt ?? '';
    const head = status === null ? `${init.provider}: ${summary}` : `${init.provider}: HTTP ${status} ${summary}`;
    super(excerpt === '' ? head : `${head}: ${excerpt}`, init.cause === undefined ? undefined : { cause: init.cause });
    this.name = new.target.name;
    this.provider = init.provider;
    this.status = status;
    this.bodyExcerpt = excerpt;
  }
}

/** 401/403, or no usable API key configured. Never retried. */
export class ProviderAuthenticationError extends ProviderError {
  readonly kind = 'authentication' as const;
  readonly retryable = false;

  constructor(init: ProviderErrorInit, summary = 'authentication failed') {
    super(init, summary);
  }
}

/** 429. Retried (honouring `retryAfterMs`) unless the provider says the quota is spent. */
export class ProviderRateLimitError extends ProviderError {
  readonly kind = 'rate_limited' as const;
  readonly retryable: boolean;
  /** From `Retry-After` (seconds or HTTP date), `retry-after-ms`, or Gemini's `RetryInfo`; null when absent. */
  readonly retryAfterMs: number | null;

  constructor(init: ProviderErrorInit & { retryAfterMs?: number | null; quotaExhausted?: boolean }) {
    super(init, init.quotaExhausted === true ? 'quota exhausted' : 'rate limited');
    this.retryAfterMs = init.retryAfterMs ?? null;
    // An exhausted quota (OpenAI `insufficient_quota`) does not recover by waiting a few seconds.
    this.retryable = init.quotaExhausted !== true;
  }
}

/** Any other 4xx, or a request the adapter cannot build (missing endpoint, unknown adapter type). */
export class ProviderRequestError extends ProviderError {
  readonly kind = 'request' as const;
  readonly retryable = false;

  constructor(init: ProviderErrorInit, summary = 'request rejected') {
    super(init, summary);
  }
}

/** 5xx, connection refused or reset, timeout. Retried. */
export class ProviderConnectionError extends ProviderError {
  readonly kind = 'connection' as const;
  readonly retryable: boolean;

  constructor(init: ProviderErrorInit, summary = 'connection failed', retryable = true) {
    super(init, summary);
    this.retryable = retryable;
  }
}

/** The caller's AbortSignal fired. Never retried. */
export class ProviderCancelledError extends ProviderError {
  readonly kind = 'cancelled' as const;
  readonly retryable = false;

  constructor(init: ProviderErrorInit) {
    super(init, 'cancelled');
  }
}

/**
 * A 2xx answer whose body is not what the provider documents (not JSON, a
 * broken stream frame, an error event inside a stream). Not retried: a
 * provider that answers garbage once usually answers it again.
 */
export class ProviderResponseError extends ProviderError {
  readonly kind = 'response' as const;
  readonly retryable = false;

  constructor(init: ProviderErrorInit, summary = 'invalid response') {
    super(init, summary);
  }
}

const REDACTED = '[redacted]';

/**
 * Shapes of well-known API keys and bearer tokens. A provider may echo a key
 * that is not the configured one (a proxy's, a rotated one); masking the
 * patterns as well as the exact key keeps those out of logs too.
 */
const SECRET_PATTERNS: RegExp[] = [
  /\bsk-[A-Za-z0-9_-]{8,}/g,
  /\bAIza[0-9A-Za-z_-]{20,}/g,
  /\bgsk_[A-Za-z0-9]{16,}/g,
  /\bxai-[A-Za-z0-9]{16,}/g,
  /\b(Bearer\s+)[A-Za-z0-9._~+/=-]{8,}/gi,
];

/** Removes the API key (also URL-encoded) and anything shaped like one. */
export function redactSecrets(text: string, apiKey: string | null): string {
  let out = text;
  if (apiKey !== null && apiKey.length >= 4) {
    out = out.split(apiKey).join(REDACTED);
    const encoded = encodeURIComponent(apiKey);
    if (encoded !== apiKey) out = out.split(encoded).join(REDACTED);
  }
  for (const pattern of SECRET_PATTERNS) {
    out = out.replace(pattern, (match: string, bearer?: string) =>
      typeof bearer === 'string' && /^Bearer/i.test(match) ? `${bearer}${REDACTED}` : REDACTED,
    );
  }
  return out;
}

/**
 * Names of fields that carry a credential whatever their value looks like:
 * request headers a provider or proxy may echo (`Authorization`, `x-api-key`,
 * `api-key`, `x-goog-api-key`) and key fields of a body.
 */
const SECRET_FIELD = /^(?:proxy-)?authorization$|^(?:x-(?:goog-)?)?api[-_]?key$|^(?:access|refresh|id)?[-_]?token$|^(?:client[-_])?secret$|^password$/i;

/**
 * A JSON value (a captured provider body) with secrets removed by the same
 * rule as text: credential-named fields are masked whole, and every string
 * goes through `redactSecrets`. Keys keep their names; nothing else changes.
 */
export function redactSecretsInJson(value: unknown, apiKey: string | null): unknown {
  if (typeof value === 'string') return redactSecrets(value, apiKey);
  if (Array.isArray(value)) return value.map((item) => redactSecretsInJson(item, apiKey));
  if (typeof value !== 'object' || value === null) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) {
    out[key] = SECRET_FIELD.test(key) && item !== null && item !== '' ? REDACTED : redactSecretsInJson(item, apiKey);
  }
  return out;
}

/**
 * A short, single-line, redacted excerpt of a provider body: the provider's
 * own error message when the body is a documented error object, else the
 * start of the text. Cut on a code-point boundary.
 */
export function excerptBody(body: string, apiKey: string | null, limit = BODY_EXCERPT_LIMIT): string {
  const message = errorMessageOf(body) ?? body;
  const singleLine = redactSecrets(message, apiKey).replace(/\s+/g, ' ').trim();
  const chars = Array.from(singleLine);
  return chars.length <= limit ? singleLine : `${chars.slice(0, limit - 1).join('')}…`;
}

/**
 * The message of the error bodies the four wire families document:
 * OpenAI / Gemini `{error: {message}}`, Anthropic `{type: "error", error: {type, message}}`,
 * Ollama `{error: "..."}`.
 */
function errorMessageOf(body: string): string | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return null;
  }
  if (!isRecord(parsed)) return null;
  const error = parsed.error;
  if (typeof error === 'string') return error;
  if (isRecord(error) && typeof error.message === 'string') {
    const type = typeof error.type === 'string' ? error.type : typeof error.status === 'string' ? error.status : null;
    return type === null ? error.message : `${type}: ${error.message}`;
  }
  if (typeof parsed.message === 'string') return parsed.message;
  return null;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * `Retry-After` as milliseconds: delta-seconds (fractions allowed, as some
 * proxies send them) or an HTTP date. Null when absent or unreadable; a date
 * in the past gives 0.
 */
export function parseRetryAfter(value: string | null, now: number = Date.now()): number | null {
  if (value === null) return null;
  const trimmed = value.trim();
  if (trimmed === '') return null;
  if (/^\d+(\.\d+)?$/.test(trimmed)) return Math.round(Number(trimmed) * 1000);
  const date = Date.parse(trimmed);
  if (Number.isNaN(date)) return null;
  return Math.max(0, date - now);
}

/** Gemini puts the wait into the body: `error.details[{ "@type": "...RetryInfo", retryDelay: "32s" }]`. */
export function retryDelayFromBody(body: string): number | null {
  let parsed: unknown;
  try {
    parsed = JSON.parse(body);
  } catch {
    return null;
  }
  if (!isRecord(parsed) || !isRecord(parsed.error) || !Array.isArray(parsed.error.details)) return null;
  for (const detail of parsed.error.details) {
    if (isRecord(detail) && typeof detail.retryDelay === 'string') {
      const match = /^(\d+(?:\.\d+)?)s$/.exec(detail.retryDelay.trim());
      if (match !== null) return Math.round(Number(match[1]) * 1000);
    }
  }
  return null;
}

/** OpenAI answers 429 `insufficient_quota` when the account has no credit; waiting does not help. */
function isQuotaExhausted(body: string): boolean {
  return /"(code|type)"\s*:\s*"insufficient_quota"/.test(body);
}

/** Maps a non-2xx HTTP answer to its error class (behaviour.md §9). */
export function errorFromResponse(
  provider: string,
  status: number,
  headers: Headers,
  body: string,
  apiKey: string | null,
): ProviderError {
  const init = { provider, status, bodyExcerpt: excerptBody(body, apiKey) };
  if (status === 401 || status === 403) return new ProviderAuthenticationError(init);
  if (status === 429) {
    const retryAfterMs =
      retryAfterMsHeader(headers) ?? parseRetryAfter(headers.get('retry-after')) ?? retryDelayFromBody(body);
    return new ProviderRateLimitError({ ...init, retryAfterMs, quotaExhausted: isQuotaExhausted(body) });
  }
  if (status >= 400 && status < 500) return new ProviderRequestError(init);
  return new ProviderConnectionError(init, 'server error');
}

/** OpenAI also sends the wait in milliseconds, which is more precise than `Retry-After`. */
function retryAfterMsHeader(headers: Headers): number | null {
  const value = headers.get('retry-after-ms');
  if (value === null || !/^\d+(\.\d+)?$/.test(value.trim())) return null;
  return Math.round(Number(value.trim()));
}
