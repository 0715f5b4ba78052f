/** Error mapping, redaction, Retry-After and backoff (behaviour.md §9). */
import {
  BODY_EXCERPT_LIMIT,
  ProviderAuthenticationError,
  ProviderConnectionError,
  ProviderRateLimitError,
  ProviderRequestError,
  errorFromResponse,
  excerptBody,
  parseRetryAfter,
  redactSecrets,
  redactSecretsInJson,
} from '../../src/providers/adapters/errors';
import { type RetryPolicy, callDeadlines, effectiveTimeoutSeconds, retryDelay } from '../../src/providers/adapters/http';

const KEY = 'sk-live-abcdefghijklmnop1234';

describe('errorFromResponse', () => {
  const map = (status: number, body = '{}', headers: Record<string, string> = {}) =>
    errorFromResponse('openai-main', status, new Headers(headers), body, KEY);

  it.each([
    [401, ProviderAuthenticationError],
    [403, ProviderAuthenticationError],
    [429, ProviderRateLimitError],
    [400, ProviderRequestError],
    [404, ProviderRequestError],
    [422, ProviderRequestError],
    [500, ProviderConnectionError],
    [502, ProviderConnectionError],
    [529, ProviderConnectionError],
  ])('HTTP %i → %p', (status, type) => {
    expect(map(status)).toBeInstanceOf(type);
  });

  it('says which provider, which status and what the provider said', () => {
    const error = map(429, JSON.stringify({ error: { message: 'Rate limit reached for gpt-4o', type: 'requests' } }), { 'retry-after': '3' });
    expect(error.message).toBe('openai-main: HTTP 429 rate limited: requests: Rate limit reached for gpt-4o');
    expect(error.retryable).toBe(true);
    expect((error as ProviderRateLimitError).retryAfterMs).toBe(3000);
  });

  it('reads Retry-After as an HTTP date, retry-after-ms, or Gemini RetryInfo', () => {
    const inFive = new Date(Date.now() + 5000).toUTCString();
    expect((map(429, '{}', { 'retry-after': inFive }) as ProviderRateLimitError).retryAfterMs).toBeGreaterThan(3000);
    expect((map(429, '{}', { 'retry-after-ms': '1500', 'retry-after': '2' }) as ProviderRateLimitError).retryAfterMs).toBe(1500);
    const gemini = JSON.stringify({
      error: { code: 429, status: 'RESOURCE_EXHAUSTED', message: 'Quota', details: [{ '@type': 'type.googleapis.com/google.rpc.RetryInfo', retryDelay: '32s' }] },
    });
    expect((map(429, gemini) as ProviderRateLimitError).retryAfterMs).toBe(32_000);
  });

  it('does not retry an exhausted quota', () => {
    const error = map(429, JSON.stringify({ error: { message: 'You exceeded your current quota', type: 'insufficient_quota', code: 'insufficient_quota' } }));
    expect(error.retryable).toBe(false);
    expect(error.message).toContain('quota exhausted');
  });

  it('5xx is retryable, 4xx is not', () => {
    expect(map(503).retryable).toBe(true);
    expect(map(400).retryable).toBe(false);
    expect(map(401).retryable).toBe(false);
  });
});

describe('redaction', () => {
  it('never shows the key, even echoed, URL-encoded or as a bearer token', () => {
    const body = `bad key ${KEY} / ${encodeURIComponent(KEY)} / Authorization: Bearer abc.def-ghi_jkl / AIzaSyA1234567890abcdefghijklmnop / gsk_abcdefghijklmnopqrstu`;
    const out = redactSecrets(body, KEY);
    expect(out).not.toContain(KEY);
    expect(out).not.toContain('abc.def-ghi_jkl');
    expect(out).not.toContain('AIzaSyA1234567890');
    expect(out).not.toContain('gsk_abcdefghij');
    expect(out).toContain('Bearer [redacted]');
  });

  it('removes the configured key even when it looks like no known key', () => {
    const key = 'Zx81Lm0Pw7Rt4Yv6Xa93';
    expect(redactSecrets(`invalid key: ${key}`, key)).toBe('invalid key: [redacted]');
    expect(excerptBody(JSON.stringify({ error: { message: `key ${key} revoked` } }), key)).toBe('key [redacted] revoked');
  });

  it('masks a JSON body by the same rule: credential-named fields whole, every string by the text rule', () => {
    const body = {
      headers: { Authorization: 'Basic dXNlcjpwYXNz', 'X-Api-Key': 'plain-value', 'x-goog-api-key': 'g', 'content-type': 'application/json' },
      api_key: 'k',
      list: [`uses ${KEY}`, 3, null, { token: 't', tokens: 12 }],
      usage: { prompt_tokens: 5 },
    };
    expect(redactSecretsInJson(body, KEY)).toEqual({
      headers: { Authorization: '[redacted]', 'X-Api-Key': '[redacted]', 'x-goog-api-key': '[redacted]', 'content-type': 'application/json' },
      api_key: '[redacted]',
      list: ['uses [redacted]', 3, null, { token: '[redacted]', tokens: 12 }],
      usage: { prompt_tokens: 5 },
    });
  });

  it('keeps excerpts short and on one line', () => {
    const long = `line one\n\nline two ${'x'.repeat(1000)}`;
    const excerpt = excerptBody(long, null);
    expect(Array.from(excerpt)).toHaveLength(BODY_EXCERPT_LIMIT);
    expect(excerpt).not.toContain('\n');
    expect(excerpt.startsWith('line one line two')).toBe(true);
    expect(excerpt.endsWith('…')).toBe(true);
  });

  it('cuts on a character boundary', () => {
    const excerpt = excerptBody('👋'.repeat(300), null);
    expect(excerpt).toBe(`${'👋'.repeat(BODY_EXCERPT_LIMIT - 1)}…`);
  });

  it('uses the provider message of each documented error shape', () => {
    expect(excerptBody('{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}', null)).toBe('overloaded_error: Overloaded');
    expect(excerptBody('{"error":{"code":400,"message":"API key not valid","status":"INVALID_ARGUMENT"}}', null)).toBe('INVALID_ARGUMENT: API key not valid');
    expect(excerptBody('{"error":"model \\"llama9\\" not found"}', null)).toBe('model "llama9" not found');
  });
});

describe('parseRetryAfter', () => {
  const now = Date.parse('2025-06-01T10:00:00Z');
  it.each([
    ['2', 2000],
    ['0', 0],
    ['1.5', 1500],
    ['Sun, 01 Jun 2025 10:00:07 GMT', 7000],
    ['Sun, 01 Jun 2025 09:59:00 GMT', 0],
    ['soon', null],
    ['', null],
  ])('%p → %p', (value, expected) => {
    expect(parseRetryAfter(value, now)).toBe(expected);
  });
});

describe('retryDelay', () => {
  const policy = (random: number): RetryPolicy => ({
    baseDelayMs: 100,
    maxDelayMs: 1000,
    maxRetryAfterMs: 60_000,
    random: () => random,
    sleep: async () => undefined,
  });
  const serverError = new ProviderConnectionError({ provider: 'p', status: 500 });

  it('doubles per retry, jittered between half and the whole step, capped', () => {
    expect(retryDelay(0, serverError, policy(0))).toBe(50);
    expect(retryDelay(0, serverError, policy(0.999999))).toBe(100);
    expect(retryDelay(2, serverError, policy(0))).toBe(200);
    expect(retryDelay(10, serverError, policy(0.999999))).toBe(1000);
  });

  it('waits exactly what Retry-After asks, and gives up when it asks too much', () => {
    expect(retryDelay(0, new ProviderRateLimitError({ provider: 'p', status: 429, retryAfterMs: 4000 }), policy(0.5))).toBe(4000);
    expect(retryDelay(0, new ProviderRateLimitError({ provider: 'p', status: 429, retryAfterMs: 120_000 }), policy(0.5))).toBeNull();
    expect(retryDelay(1, new ProviderRateLimitError({ provider: 'p', status: 429, retryAfterMs: null }), policy(0))).toBe(100);
  });
});

describe('effectiveTimeoutSeconds', () => {
  it('prefers the call option, then the provider, then 120 s', () => {
    expect(effectiveTimeoutSeconds(5, 30)).toBe(5);
    expect(effectiveTimeoutSeconds(undefined, 30)).toBe(30);
    expect(effectiveTimeoutSeconds(0, 0)).toBe(120);
    expect(effectiveTimeoutSeconds('7', 30)).toBe(30);
  });
});

describe('callDeadlines', () => {
  it('bounds the whole call by the call option and silence by the provider\'s apiTimeout', () => {
    expect(callDeadlines(120, 30)).toEqual({ totalSeconds: 120, idleSeconds: 30 });
    expect(callDeadlines(10, 30)).toEqual({ totalSeconds: 10, idleSeconds: 10 });
    expect(callDeadlines(undefined, 45)).toEqual({ totalSeconds: 120, idleSeconds: 45 });
  });

  it('ignores a timeout outside 0..3600 s instead of timing out at once', () => {
    expect(callDeadlines(10_000_000, 30)).toEqual({ totalSeconds: 120, idleSeconds: 30 });
    expect(callDeadlines(-5, 0)).toEqual({ totalSeconds: 120, idleSeconds: 30 });
    expect(effectiveTimeoutSeconds(10_000_000, 30)).toBe(30);
  });
});
