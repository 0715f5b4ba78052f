import path from 'node:path';
import { ConfigError, loadConfig } from './config';

function problemsOf(env: Record<string, string>): string[] {
  try {
    loadConfig(env);
  } catch (error) {
    if (error instanceof ConfigError) return error.problems;
    throw error;
  }
  throw new Error('loadConfig accepted the environment');
}

describe('loadConfig', () => {
  it('traces are off without an OTLP endpoint, and read the standard OTEL_* variables with one', () => {
    expect(loadConfig({}).tracing).toBeNull();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_SDK_DISABLED: 'true' }).tracing).toBeNull();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318', OTEL_TRACES_EXPORTER: 'none' }).tracing).toBeNull();
    expect(loadConfig({ OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318/' }).tracing).toEqual({
      endpoint: 'http://collector:4318/v1/traces',
      protocol: 'http/protobuf',
      headers: {},
      serviceName: 'promptwire',
      resourceAttributes: {},
      sampler: { root: 'always_on', parentBased: true, ratio: 1 },
      captureMessageContent: false,
      traceQueries: 'parent',
      exportTimeoutMs: 10_000,
      scheduleDelayMs: 5_000,
      maxQueueSize: 2_048,
    });
    expect(
      loadConfig({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://collector:4318',
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: 'https://traces.example/otlp/v1/traces',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'http/json',
        OTEL_EXPORTER_OTLP_HEADERS: 'authorization=Basic%20abc,x-scope=a',
        OTEL_EXPORTER_OTLP_TRACES_HEADERS: 'x-scope=b',
        OTEL_RESOURCE_ATTRIBUTES: 'service.name=from-resource,deployment.environment=test',
        OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
        OTEL_TRACES_SAMPLER_ARG: '0.25',
        OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
        TRACE_QUERIES: 'ALL',
      }).tracing,
    ).toMatchObject({
      endpoint: 'https://traces.example/otlp/v1/traces',
      protocol: 'http/json',
      headers: { authorization: 'Basic abc', 'x-scope': 'b' },
      serviceName: 'from-resource',
      resourceAttributes: { 'deployment.environment': 'test' },
      sampler: { root: 'traceidratio', parentBased: true, ratio: 0.25 },
      captureMessageContent: true,
      traceQueries: 'all',
    });
    const problems = problemsOf({
      OTEL_EXPORTER_OTLP_ENDPOINT: 'collector:4318',
      OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      OTEL_EXPORTER_OTLP_HEADERS: 'authorization',
      OTEL_TRACES_SAMPLER: 'jaeger_remote',
      TRACE_QUERIES: 'some',
    });
    expect(problems).toEqual([
      expect.stringContaining('OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL'),
      expect.stringContaining('OTEL_EXPORTER_OTLP_PROTOCOL must be http/protobuf or http/json'),
      expect.stringContaining('OTEL_EXPORTER_OTLP_HEADERS must be key=value pairs'),
      expect.stringContaining('OTEL_TRACES_SAMPLER must be one of'),
      expect.stringContaining('TRACE_QUERIES must be one of parent, all, none, got "some"'),
    ]);
  });

  it('rate limits default to api.md (120 startRun, 600 writes per token per minute) and can be set per role', () => {
    expect(loadConfig({}).rateLimits).toEqual({
      windowSeconds: 60,
      startRun: { ADMIN: 120, EDITOR: 120, VIEWER: 120 },
      writes: { ADMIN: 600, EDITOR: 600, VIEWER: 600 },
    });
    expect(loadConfig({ RATE_LIMIT_START_RUN: '10', RATE_LIMIT_ADMIN_START_RUN: '0', RATE_LIMIT_EDITOR_WRITES: '50', RATE_LIMIT_WINDOW_SECONDS: '30' }).rateLimits).toEqual({
      windowSeconds: 30,
      startRun: { ADMIN: 0, EDITOR: 10, VIEWER: 10 },
      writes: { ADMIN: 600, EDITOR: 50, VIEWER: 600 },
    });
    expect(problemsOf({ RATE_LIMIT_WRITES: '-1', RATE_LIMIT_VIEWER_START_RUN: 'many' })).toEqual([
      expect.stringContaining('RATE_LIMIT_WRITES must be a whole number'),
      expect.stringContaining('RATE_LIMIT_VIEWER_START_RUN must be a whole number'),
    ]);
  });

  it('defaults match api.md', () => {
    const config = loadConfig({});
    expect(config.port).toBe(4000);
    expect(config.host).toBe('127.0.0.1');
    expect(config.database).toEqual({ kind: 'sqlite', file: path.resolve('./data/app.sqlite'), dataDirectory: path.resolve('./data') });
    expect(config.adminToken).toBeNull();
    expect(config.redisUrl).toBeNull();
    expect(config.schemaMode).toBe('own');
    expect(config.runMigrations).toBe(true);
    expect(config.secretKey).toBeNull();
    expect(config.logLevel).toBe('info');
    expect(config.introspection).toBe(true);
    expect(config.maxQueuedRequests).toBe(1000);
    expect(config.providerMaxResponseBytes).toBe(10 * 1024 * 1024);
    expect(config.runLeaseSeconds).toBe(15);
    expect(config.queryLimits).toEqual({ maxAliases: 30, maxTokens: 5000, maxCost: 10_000, maxResponseBytes: 16 * 1024 * 1024 });
  });

  it('refuses a provider answer cap or a run lease out of range', () => {
    expect(() => loadConfig({ PROVIDER_MAX_RESPONSE_BYTES: '10', RUN_LEASE_SECONDS: '1' })).toThrow(/PROVIDER_MAX_RESPONSE_BYTES[\s\S]*RUN_LEASE_SECONDS/);
    expect(loadConfig({ PROVIDER_MAX_RESPONSE_BYTES: '2048', RUN_LEASE_SECONDS: '30' })).toMatchObject({ providerMaxResponseBytes: 2048, runLeaseSeconds: 30 });
  });

  it('USAGE_TIMEZONE names the zone of usage days: the process\'s by default, an unknown zone refused', () => {
    expect(loadConfig({}).usageTimeZone).toBe(Intl.DateTimeFormat().resolvedOptions().timeZone);
    expect(loadConfig({ USAGE_TIMEZONE: 'Europe/Berlin' }).usageTimeZone).toBe('Europe/Berlin');
    expect(problemsOf({ USAGE_TIMEZONE: 'Mars/Olympus' })).toEqual([expect.stringMatching(/^USAGE_TIMEZONE must be an IANA time zone/)]);
  });

  it('reads the query limits and refuses values out of range', () => {
    const config = loadConfig({ MAX_ALIASES: '5', MAX_QUERY_TOKENS: '800', MAX_QUERY_COST: '2000', MAX_RESPONSE_BYTES: '65536' });
    expect(config.queryLimits).toEqual({ maxAliases: 5, maxTokens: 800, maxCost: 2000, maxResponseBytes: 65536 });
    expect(problemsOf({ MAX_QUERY_COST: '0', MAX_RESPONSE_BYTES: 'lots' })).toEqual([expect.stringMatching(/^MAX_QUERY_COST/), expect.stringMatching(/^MAX_RESPONSE_BYTES/)]);
  });

  it('reads nothing but the environment it is given', () => {
    const saved = process.env.PORT;
    process.env.PORT = '5555';
    try {
      expect(loadConfig({}).port).toBe(4000);
    } finally {
      if (saved === undefined) delete process.env.PORT;
      else process.env.PORT = saved;
    }
  });

  it('empty values mean "use the default"', () => {
    const config = loadConfig({ PORT: '', HOST: '', DATABASE_URL: '', SCHEMA_MODE: '', RUN_MIGRATIONS: '', LOG_LEVEL: '' });
    expect(config.port).toBe(4000);
    expect(config.host).toBe('127.0.0.1');
    expect(config.database.kind).toBe('sqlite');
    expect(config.schemaMode).toBe('own');
    expect(config.runMigrations).toBe(true);
    expect(config.logLevel).toBe('info');
  });

  it('lists every problem at once', () => {
    const thrown = (() => {
      try {
        loadConfig({ PORT: 'eighty', SCHEMA_MODE: 'mine', LOG_LEVEL: 'loud', DATABASE_URL: 'postgres://db/app' });
      } catch (error) {
        return error;
      }
      return null;
    })();
    expect(thrown).toBeInstanceOf(ConfigError);
    const problems = (thrown as ConfigError).problems;
    expect(problems).toHaveLength(4);
    expect(problems).toEqual(
      expect.arrayContaining([
        expect.stringMatching(/^PORT .*"eighty"/),
        expect.stringMatching(/^SCHEMA_MODE .*"mine"/),
        expect.stringMatching(/^LOG_LEVEL .*"loud"/),
        expect.stringMatching(/^DATABASE_URL .*postgres/),
      ]),
    );
    // The message names every problem too: main.ts prints it as it is.
    for (const name of ['PORT', 'SCHEMA_MODE', 'LOG_LEVEL', 'DATABASE_URL']) expect((thrown as ConfigError).message).toContain(name);
  });

  it.each([
    ['PORT', '-1'],
    ['PORT', '65536'],
    ['PORT', '80.5'],
    ['RUN_MIGRATIONS', 'sometimes'],
    ['INTROSPECTION', 'maybe'],
    ['BODY_LIMIT_BYTES', '10'],
    ['MAX_QUERY_DEPTH', '1'],
    ['MAX_QUEUED_REQUESTS', '0'],
    ['MAX_QUEUED_REQUESTS', 'many'],
    ['ADMIN_TOKEN', 'short'],
    ['SECRET_KEY', 'short'],
    ['REDIS_URL', 'localhost:6379'],
    ['DATABASE_URL', 'sqlite:'],
    ['DATABASE_URL', 'mysql://user:pass@db:3306/'],
  ])('refuses %s=%s, naming the variable', (name, value) => {
    expect(problemsOf({ SECRET_KEY: 'a-long-enough-secret-key', [name]: value })).toEqual([expect.stringContaining(name)]);
  });

  it('refuses a MySQL DATABASE_URL without SECRET_KEY', () => {
    expect(problemsOf({ DATABASE_URL: 'mysql://user:pass@db:3306/promptwire' })).toEqual([expect.stringMatching(/^SECRET_KEY .*MySQL/)]);
  });

  it('accepts a MySQL DATABASE_URL with SECRET_KEY', () => {
    const config = loadConfig({ DATABASE_URL: 'mysql://user:pass@db:3306/promptwire', SECRET_KEY: 'a-long-enough-secret-key' });
    expect(config.database).toEqual({ kind: 'mysql', url: 'mysql://user:pass@db:3306/promptwire' });
    expect(config.secretKey).toBe('a-long-enough-secret-key');
  });

  it('never repeats a database password in a problem', () => {
    const problems = problemsOf({ DATABASE_URL: 'postgres://user:hunter2-password@db/app' });
    expect(problems.join('\n')).not.toContain('hunter2-password');
  });

  it('never repeats a Redis password in a problem', () => {
    const problems = problemsOf({ REDIS_URL: 'http://:hunter2-password@cache:6379' });
    expect(problems).toEqual([expect.stringContaining('REDIS_URL')]);
    expect(problems.join('\n')).not.toContain('hunter2-password');
  });

  it('never repeats a too-short secret in a problem', () => {
    const problems = problemsOf({ ADMIN_TOKEN: 'shh-secret', SECRET_KEY: 'tiny-key' });
    expect(problems).toHaveLength(2);
    expect(problems.join('\n')).not.toMatch(/shh-secret|tiny-key/);
  });

  it('reads the documented values', () => {
    const config = loadConfig({
      PORT: '8080',
      HOST: '0.0.0.0',
      DATABASE_URL: 'sqlite:/var/lib/promptwire/app.sqlite',
      ADMIN_TOKEN: 'an-admin-token-of-some-length',
      REDIS_URL: 'redis://cache:6379',
      SCHEMA_MODE: 'shared',
      RUN_MIGRATIONS: 'false',
      SECRET_KEY: 'a-long-enough-secret-key',
      LOG_LEVEL: 'debug',
    });
    expect(config).toMatchObject({
      port: 8080,
      host: '0.0.0.0',
      database: { kind: 'sqlite', file: '/var/lib/promptwire/app.sqlite', dataDirectory: '/var/lib/promptwire' },
      adminToken: 'an-admin-token-of-some-length',
      redisUrl: 'redis://cache:6379',
      schemaMode: 'shared',
      runMigrations: false,
      secretKey: 'a-long-enough-secret-key',
      logLevel: 'debug',
    });
  });
});
