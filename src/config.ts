/**
 * The only reader of `process.env`. Every variable is parsed and validated at
 * once, so a misconfigured start lists all of its problems in one message.
 */
import path from 'node:path';
import { parseAllowedHosts } from './shared/outbound-address';

/** Roles as the rate limits name them (RATE_LIMIT_<ROLE>_…). */
export type RateLimitRole = 'ADMIN' | 'EDITOR' | 'VIEWER';

/** Operations a token may run per window, by role; 0 means unlimited. */
export interface RateLimitConfig {
  windowSeconds: number;
  startRun: Record<RateLimitRole, number>;
  writes: Record<RateLimitRole, number>;
}

/**
 * OpenTelemetry trace export, from the standard OTEL_* variables. Null when
 * no endpoint is set (or OTEL_SDK_DISABLED / OTEL_TRACES_EXPORTER=none): then
 * the SDK is not even loaded.
 */
export interface TracingConfig {
  /** The OTLP traces URL (…/v1/traces). */
  endpoint: string;
  protocol: 'http/protobuf' | 'http/json';
  headers: Record<string, string>;
  serviceName: string;
  resourceAttributes: Record<string, string>;
  sampler: { root: 'always_on' | 'always_off' | 'traceidratio'; parentBased: boolean; ratio: number };
  /** OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: messages, tool arguments and results on the spans. */
  captureMessageContent: boolean;
  /**
   * TRACE_QUERIES: which GraphQL queries get a request span. `parent` (the
   * default): those whose client sends a W3C traceparent (it traces the
   * request, so the server's span belongs in its trace); `all`: every query;
   * `none`: none. Mutations, and documents that never resolve an operation,
   * always get one.
   */
  traceQueries: TraceQueries;
  exportTimeoutMs: number;
  /** OTEL_BSP_SCHEDULE_DELAY and OTEL_BSP_MAX_QUEUE_SIZE: how often spans leave, and how many may wait (more are dropped). */
  scheduleDelayMs: number;
  maxQueueSize: number;
}

export type DatabaseConfig =
  | { kind: 'sqlite'; file: string; dataDirectory: string }
  | { kind: 'mysql'; url: string };

export interface AppConfig {
  port: number;
  host: string;
  database: DatabaseConfig;
  adminToken: string | null;
  redisUrl: string | null;
  schemaMode: 'own' | 'shared';
  runMigrations: boolean;
  /** Explicit key from SECRET_KEY; null means "the embedded default keeps one in its data directory". */
  secretKey: string | null;
  logLevel: 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';
  introspection: boolean;
  /** Largest accepted request body in bytes. */
  bodyLimitBytes: number;
  /** Seed the example data set into an empty database (default: only on the embedded SQLite database with its own schema). */
  seedExamples: boolean;
  /** Deepest selection set a query may have. */
  maxQueryDepth: number;
  /** Limits on one GraphQL document, over HTTP and graphql-ws alike (query-limits.ts). */
  queryLimits: {
    /** Aliased fields in a document. */
    maxAliases: number;
    /** Lexical tokens in a document; a longer one is refused while parsing. */
    maxTokens: number;
    /** Estimated cost of an operation: fields, times the rows a list may return. */
    maxCost: number;
    /** Largest answer to one operation, in bytes of JSON. */
    maxResponseBytes: number;
  };
  /** HTTP requests allowed to wait for their turn; beyond that a request gets 503 with Retry-After. */
  maxQueuedRequests: number;
  /** Subscriptions open at once on one graphql-ws connection (MAX_SUBSCRIPTIONS_PER_CONNECTION). */
  maxSubscriptionsPerConnection: number;
  /** Subscriptions open at once for one API token, over all its connections to this instance (MAX_SUBSCRIPTIONS_PER_TOKEN). */
  maxSubscriptionsPerToken: number;
  /** SQLite: longest a single statement may block waiting for another process's write lock. */
  sqliteBusyTimeoutMs: number;
  /** SQLite: how long a write transaction waits (without blocking) for the write lock before a retryable error. */
  sqliteLockWaitMs: number;
  /** Hosts an administrator-configured target (MCP server, webhook) may use although they resolve to a non-public address. */
  webhookAllowedHosts: string[];
  /** How long one MCP request (a tool call, one page of an import) may take. */
  mcpTimeoutMs: number;
  /** How long one webhook attempt may take before it counts as failed (WEBHOOK_TIMEOUT_MS). */
  webhookTimeoutMs: number;
  /** The wait after a webhook's first failed attempt; each later one is three times longer, at most an hour (WEBHOOK_RETRY_BASE_MS). */
  webhookRetryBaseMs: number;
  /** Attempts per webhook delivery before it is marked failed (WEBHOOK_MAX_ATTEMPTS). */
  webhookMaxAttempts: number;
  /** Serve the console (the pages at /, /playground and /runs); UI=false turns them off. */
  ui: boolean;
  /** Where the built console is read from; null: dist/console of this package. */
  consoleDirectory: string | null;
  /** Bytes one provider call may answer (PROVIDER_MAX_RESPONSE_BYTES); beyond it the call fails with a clear error. */
  providerMaxResponseBytes: number;
  /** Seconds after which a run whose instance stopped renewing its lease is taken as orphaned (RUN_LEASE_SECONDS). */
  runLeaseSeconds: number;
  /** How often the tables TYPO3 may write are checked for external changes (ms). */
  promptChangePollMs: number;
  /** Conversations idle longer than this many days are purged, hourly (CONVERSATION_RETENTION_DAYS). */
  conversationRetentionDays: number;
  /** The IANA time zone whose midnight starts a usage day (USAGE_TIMEZONE; default: the process's, as PHP's default zone is TYPO3's). */
  usageTimeZone: string;
  /** Serve GET /metrics without a token (METRICS_PUBLIC); otherwise a token of any role is needed. */
  metricsPublic: boolean;
  /** Per-token budgets of startRun and of other mutations (RATE_LIMIT_*). */
  rateLimits: RateLimitConfig;
  /** OpenTelemetry trace export; null: off. */
  tracing: TracingConfig | null;
  /** Reads a provider key given as `env:NAME` at call time (behaviour.md §1). */
  readEnv: (name: string) => string | undefined;
  /**
   * Which variables an `env:NAME` provider key may name: those starting with
   * PROVIDER_KEY_ENV_PREFIX, and those listed in PROVIDER_KEY_ENV_ALLOW.
   * Any other (SECRET_KEY, DATABASE_URL, …) would let whoever edits a
   * provider send the service's own secrets to an endpoint of their choosing.
   */
  providerKeyEnvAllowed: (name: string) => boolean;
}

/** `env:NAME` provider keys may always name variables with this prefix. */
export const PROVIDER_KEY_ENV_PREFIX = 'PROMPTWIRE_PROVIDER_KEY_';

export class ConfigError extends Error {
  constructor(readonly problems: string[]) {
    super(`Invalid configuration:\n${problems.map((problem) => `  - ${problem}`).join('\n')}`);
    this.name = 'ConfigError';
  }
}

const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const;

type Env = Record<string, string | undefined>;

export function loadConfig(env: Env = process.env): AppConfig {
  const problems: string[] = [];

  const integer = (name: string, fallback: number, min: number, max: number): number => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const value = Number(raw);
    if (!Number.isInteger(value) || value < min || value > max) {
      problems.push(`${name} must be a whole number from ${min} to ${max}, got "${raw}"`);
      return fallback;
    }
    return value;
  };

  const flag = (name: string, fallback: boolean): boolean => {
    const raw = env[name];
    if (raw === undefined || raw === '') return fallback;
    const normalised = raw.trim().toLowerCase();
    if (['1', 'true', 'yes', 'on'].includes(normalised)) return true;
    if (['0', 'false', 'no', 'off'].includes(normalised)) return false;
    problems.push(`${name} must be true or false, got "${raw}"`);
    return fallback;
  };

  const port = integer('PORT', 4000, 0, 65535);
  const host = env.HOST?.trim() || '127.0.0.1';

  const database = parseDatabaseUrl(env.DATABASE_URL?.trim() || 'sqlite:./data/app.sqlite', problems);

  const adminToken = env.ADMIN_TOKEN?.trim() || null;
  if (adminToken !== null && adminToken.length < 16) {
    problems.push('ADMIN_TOKEN must be at least 16 characters long');
  }

  const redisUrl = env.REDIS_URL?.trim() || null;
  if (redisUrl !== null && !/^rediss?:\/\//.test(redisUrl)) {
    problems.push(`REDIS_URL must start with redis:// or rediss://, got "${withoutCredentials(redisUrl)}"`);
  }

  const schemaModeRaw = (env.SCHEMA_MODE?.trim() || 'own').toLowerCase();
  if (schemaModeRaw !== 'own' && schemaModeRaw !== 'shared') {
    problems.push(`SCHEMA_MODE must be "own" or "shared", got "${env.SCHEMA_MODE}"`);
  }
  const schemaMode = schemaModeRaw === 'shared' ? 'shared' : 'own';

  const secretKey = env.SECRET_KEY?.trim() || null;
  if (secretKey !== null && secretKey.length < 16) {
    problems.push('SECRET_KEY must be at least 16 characters long (any passphrase; it is stretched into an AES-256 key)');
  }
  if (secretKey === null && database.kind === 'mysql') {
    problems.push('SECRET_KEY is required with a MySQL DATABASE_URL (provider API keys are encrypted with it)');
  }

  const logLevelRaw = (env.LOG_LEVEL?.trim() || 'info').toLowerCase();
  const logLevel = (LOG_LEVELS as readonly string[]).includes(logLevelRaw) ? (logLevelRaw as AppConfig['logLevel']) : 'info';
  if (logLevel !== logLevelRaw) problems.push(`LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got "${env.LOG_LEVEL}"`);

  const providerKeyEnvAllow = new Set((env.PROVIDER_KEY_ENV_ALLOW ?? '').split(',').map((name) => name.trim()).filter((name) => name !== ''));
  for (const name of providerKeyEnvAllow) {
    if (!/^[A-Za-z_][A-Za-z0-9_]*$/.test(name)) problems.push(`PROVIDER_KEY_ENV_ALLOW must list variable names separated by commas, got "${name}"`);
  }

  const config: AppConfig = {
    port,
    host,
    database,
    adminToken,
    redisUrl,
    schemaMode,
    runMigrations: flag('RUN_MIGRATIONS', true),
    secretKey,
    logLevel,
    introspection: flag('INTROSPECTION', true),
    bodyLimitBytes: integer('BODY_LIMIT_BYTES', 1024 * 1024, 1024, 64 * 1024 * 1024),
    seedExamples: flag('SEED_EXAMPLES', database.kind === 'sqlite' && schemaMode === 'own'),
    maxQueryDepth: integer('MAX_QUERY_DEPTH', 12, 3, 100),
    queryLimits: {
      maxAliases: integer('MAX_ALIASES', 30, 0, 10_000),
      maxTokens: integer('MAX_QUERY_TOKENS', 5000, 100, 1_000_000),
      maxCost: integer('MAX_QUERY_COST', 10_000, 10, 100_000_000),
      maxResponseBytes: integer('MAX_RESPONSE_BYTES', 16 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    },
    maxQueuedRequests: integer('MAX_QUEUED_REQUESTS', 1000, 1, 1_000_000),
    maxSubscriptionsPerConnection: integer('MAX_SUBSCRIPTIONS_PER_CONNECTION', 100, 1, 100_000),
    maxSubscriptionsPerToken: integer('MAX_SUBSCRIPTIONS_PER_TOKEN', 2000, 1, 1_000_000),
    sqliteBusyTimeoutMs: integer('SQLITE_BUSY_TIMEOUT_MS', 100, 0, 60_000),
    sqliteLockWaitMs: integer('SQLITE_LOCK_WAIT_MS', 5000, 0, 600_000),
    webhookAllowedHosts: parseAllowedHosts(env.WEBHOOK_ALLOWED_HOSTS),
    mcpTimeoutMs: integer('MCP_TIMEOUT_MS', 30_000, 100, 600_000),
    webhookTimeoutMs: integer('WEBHOOK_TIMEOUT_MS', 10_000, 100, 60_000),
    webhookRetryBaseMs: integer('WEBHOOK_RETRY_BASE_MS', 1000, 10, 3_600_000),
    webhookMaxAttempts: integer('WEBHOOK_MAX_ATTEMPTS', 12, 1, 50),
    ui: flag('UI', true),
    consoleDirectory: env.CONSOLE_DIRECTORY?.trim() ? path.resolve(env.CONSOLE_DIRECTORY.trim()) : null,
    providerMaxResponseBytes: integer('PROVIDER_MAX_RESPONSE_BYTES', 10 * 1024 * 1024, 1024, 1024 * 1024 * 1024),
    runLeaseSeconds: integer('RUN_LEASE_SECONDS', 15, 3, 600),
    promptChangePollMs: integer('PROMPT_CHANGE_POLL_MS', 2000, 100, 8000),
    conversationRetentionDays: integer('CONVERSATION_RETENTION_DAYS', 30, 1, 36_500),
    usageTimeZone: usageTimeZoneFrom(env.USAGE_TIMEZONE, problems),
    metricsPublic: flag('METRICS_PUBLIC', false),
    rateLimits: rateLimitsFrom(integer),
    tracing: tracingFrom(env, integer, flag, problems),
    readEnv: (name) => env[name],
    providerKeyEnvAllowed: (name) => name.startsWith(PROVIDER_KEY_ENV_PREFIX) || providerKeyEnvAllow.has(name),
  };

  if (problems.length > 0) throw new ConfigError(problems);
  return config;
}

/** USAGE_TIMEZONE must name a zone the runtime knows (`Europe/Berlin`, `UTC`); unset: the process's zone. */
function usageTimeZoneFrom(raw: string | undefined, problems: string[]): string {
  const name = raw?.trim() || Intl.DateTimeFormat().resolvedOptions().timeZone;
  try {
    return new Intl.DateTimeFormat('en-US', { timeZone: name }).resolvedOptions().timeZone;
  } catch {
    problems.push(`USAGE_TIMEZONE must be an IANA time zone such as "Europe/Berlin" or "UTC", got "${raw}"`);
    return 'UTC';
  }
}

const RATE_LIMIT_ROLES: readonly RateLimitRole[] = ['ADMIN', 'EDITOR', 'VIEWER'];

/**
 * RATE_LIMIT_START_RUN and RATE_LIMIT_WRITES set every role's budget per
 * RATE_LIMIT_WINDOW_SECONDS; RATE_LIMIT_<ROLE>_START_RUN and
 * RATE_LIMIT_<ROLE>_WRITES override it for one role. 0 turns a limit off.
 */
function rateLimitsFrom(integer: (name: string, fallback: number, min: number, max: number) => number): RateLimitConfig {
  const startRun = integer('RATE_LIMIT_START_RUN', 120, 0, 1_000_000_000);
  const writes = integer('RATE_LIMIT_WRITES', 600, 0, 1_000_000_000);
  const perRole = (suffix: string, fallback: number) =>
    Object.fromEntries(RATE_LIMIT_ROLES.map((role) => [role, integer(`RATE_LIMIT_${role}_${suffix}`, fallback, 0, 1_000_000_000)])) as Record<RateLimitRole, number>;
  return {
    windowSeconds: integer('RATE_LIMIT_WINDOW_SECONDS', 60, 1, 86_400),
    startRun: perRole('START_RUN', startRun),
    writes: perRole('WRITES', writes),
  };
}

export const TRACE_QUERIES = ['parent', 'all', 'none'] as const;
export type TraceQueries = (typeof TRACE_QUERIES)[number];

const SAMPLERS = ['always_on', 'always_off', 'traceidratio', 'parentbased_always_on', 'parentbased_always_off', 'parentbased_traceidratio'] as const;

/** The OpenTelemetry SDK's environment variables (the subset this service supports). */
function tracingFrom(
  env: Env,
  integer: (name: string, fallback: number, min: number, max: number) => number,
  flag: (name: string, fallback: boolean) => boolean,
  problems: string[],
): TracingConfig | null {
  const value = (name: string) => env[name]?.trim() || undefined;
  if (flag('OTEL_SDK_DISABLED', false)) return null;
  const exporters = (value('OTEL_TRACES_EXPORTER') ?? 'otlp').split(',').map((name) => name.trim().toLowerCase());
  if (exporters.includes('none')) return null;
  if (exporters.some((name) => name !== 'otlp')) problems.push(`OTEL_TRACES_EXPORTER must be "otlp" or "none", got "${value('OTEL_TRACES_EXPORTER')}"`);

  const tracesEndpoint = value('OTEL_EXPORTER_OTLP_TRACES_ENDPOINT');
  const baseEndpoint = value('OTEL_EXPORTER_OTLP_ENDPOINT');
  const endpoint = tracesEndpoint ?? (baseEndpoint ? `${baseEndpoint.replace(/\/+$/, '')}/v1/traces` : null);
  if (endpoint === null) return null;
  if (!/^https?:\/\/[^/]/.test(endpoint)) problems.push(`${tracesEndpoint ? 'OTEL_EXPORTER_OTLP_TRACES_ENDPOINT' : 'OTEL_EXPORTER_OTLP_ENDPOINT'} must be an http:// or https:// URL, got "${withoutCredentials(endpoint)}"`);

  const protocolName = value('OTEL_EXPORTER_OTLP_TRACES_PROTOCOL') ? 'OTEL_EXPORTER_OTLP_TRACES_PROTOCOL' : 'OTEL_EXPORTER_OTLP_PROTOCOL';
  const protocol = value(protocolName) ?? 'http/protobuf';
  if (protocol !== 'http/protobuf' && protocol !== 'http/json') problems.push(`${protocolName} must be http/protobuf or http/json (grpc is not supported), got "${protocol}"`);

  const keyValues = (name: string): Record<string, string> => {
    const raw = value(name);
    const pairs: Record<string, string> = {};
    if (!raw) return pairs;
    for (const item of raw.split(',')) {
      if (item.trim() === '') continue;
      const at = item.indexOf('=');
      // The value may be a secret (an authorization header): never repeat it in a message.
      if (at <= 0) {
        problems.push(`${name} must be key=value pairs separated by commas`);
        return {};
      }
      try {
        pairs[decodeURIComponent(item.slice(0, at).trim())] = decodeURIComponent(item.slice(at + 1).trim());
      } catch {
        problems.push(`${name} must be key=value pairs separated by commas (values percent-encoded)`);
        return {};
      }
    }
    return pairs;
  };
  const headers = { ...keyValues('OTEL_EXPORTER_OTLP_HEADERS'), ...keyValues('OTEL_EXPORTER_OTLP_TRACES_HEADERS') };
  const resourceAttributes = keyValues('OTEL_RESOURCE_ATTRIBUTES');

  const samplerName = (value('OTEL_TRACES_SAMPLER') ?? 'parentbased_always_on').toLowerCase();
  if (!(SAMPLERS as readonly string[]).includes(samplerName)) problems.push(`OTEL_TRACES_SAMPLER must be one of ${SAMPLERS.join(', ')}, got "${samplerName}"`);
  let ratio = 1;
  const ratioRaw = value('OTEL_TRACES_SAMPLER_ARG');
  if (samplerName.endsWith('traceidratio') && ratioRaw !== undefined) {
    ratio = Number(ratioRaw);
    if (!Number.isFinite(ratio) || ratio < 0 || ratio > 1) {
      problems.push(`OTEL_TRACES_SAMPLER_ARG must be a ratio from 0 to 1, got "${ratioRaw}"`);
      ratio = 1;
    }
  }
  const root = samplerName.replace(/^parentbased_/, '');
  const traceQueries = (value('TRACE_QUERIES') ?? 'parent').toLowerCase();
  if (!(TRACE_QUERIES as readonly string[]).includes(traceQueries)) problems.push(`TRACE_QUERIES must be one of ${TRACE_QUERIES.join(', ')}, got "${traceQueries}"`);

  return {
    endpoint,
    protocol: protocol === 'http/json' ? 'http/json' : 'http/protobuf',
    headers,
    serviceName: value('OTEL_SERVICE_NAME') ?? resourceAttributes['service.name'] ?? 'promptwire',
    resourceAttributes,
    sampler: { root: root === 'always_off' || root === 'traceidratio' ? root : 'always_on', parentBased: samplerName.startsWith('parentbased_'), ratio },
    captureMessageContent: flag('OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT', false),
    traceQueries: (TRACE_QUERIES as readonly string[]).includes(traceQueries) ? (traceQueries as TraceQueries) : 'parent',
    exportTimeoutMs: integer(value('OTEL_EXPORTER_OTLP_TRACES_TIMEOUT') ? 'OTEL_EXPORTER_OTLP_TRACES_TIMEOUT' : 'OTEL_EXPORTER_OTLP_TIMEOUT', 10_000, 1, 600_000),
    scheduleDelayMs: integer('OTEL_BSP_SCHEDULE_DELAY', 5_000, 1, 600_000),
    maxQueueSize: integer('OTEL_BSP_MAX_QUEUE_SIZE', 2_048, 1, 1_000_000),
  };
}

function parseDatabaseUrl(url: string, problems: string[]): DatabaseConfig {
  if (url.startsWith('sqlite:')) {
    const file = url.slice('sqlite:'.length).replace(/^\/\/(?=\/)/, '');
    if (file === '') {
      problems.push('DATABASE_URL sqlite: needs a file path, e.g. sqlite:./data/app.sqlite');
      return { kind: 'sqlite', file: './data/app.sqlite', dataDirectory: './data' };
    }
    if (file === ':memory:') return { kind: 'sqlite', file, dataDirectory: path.resolve('data') };
    const resolved = path.resolve(file);
    return { kind: 'sqlite', file: resolved, dataDirectory: path.dirname(resolved) };
  }
  if (url.startsWith('mysql://') || url.startsWith('mariadb://')) {
    try {
      const parsed = new URL(url.replace(/^mariadb:/, 'mysql:'));
      if (parsed.pathname.length <= 1) problems.push('DATABASE_URL must name a database, e.g. mysql://user:pass@host:3306/promptwire');
      return { kind: 'mysql', url: parsed.toString() };
    } catch {
      problems.push('DATABASE_URL is not a valid mysql:// URL');
      return { kind: 'mysql', url };
    }
  }
  problems.push(`DATABASE_URL must start with sqlite: or mysql://, got "${withoutCredentials(url)}"`);
  return { kind: 'sqlite', file: path.resolve('data/app.sqlite'), dataDirectory: path.resolve('data') };
}

/** A URL as it may appear in a message: user and password replaced, since problems are printed. */
function withoutCredentials(url: string): string {
  return url.replace(/\/\/[^@]*@/, '//***@');
}
