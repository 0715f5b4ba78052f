/**
 * The composition root: createApp(config) opens the database, migrates,
 * builds every bus and service once, seeds, starts the background work, and
 * returns them with one close() — the only shutdown path, used both when a
 * start fails half-way and when a running server stops. The transport
 * (server.ts) takes the built app and never constructs a service itself.
 */
import crypto from 'node:crypto';
import Redis from 'ioredis';
import { InProcessRevocationBus, RedisRevocationBus, type RevocationBus } from './auth/revocation-bus';
import type { AppConfig } from './config';
import { createDataSource } from './db/data-source';
import { PagingCursors } from './db/keyset';
import { checkSharedSchema } from './db/shared-schema';
import type { SqliteCheckpointer } from './db/sqlite-checkpointer';
import { createLogger, type Logger } from './logger';
import { createConversationsFeature, type ConversationsFeature } from './conversations';
import { createMcpFeature, type McpFeature } from './mcp';
import { createOperations, type Operations } from './operations/operations';
import { PromptChangeDetector, RedisDetectorLease } from './prompt-history/change-detector';
import { InProcessPromptEventBus, type PromptEventBus, RedisPromptEventBus } from './prompt-history/prompt-event-bus';
import { createRunsFeature, type RunsFeature, type RunServiceOptions } from './runs';
import { seedExamples } from './seed';
import { createCoreServices, type CoreServices, type Services } from './services';
import { createTasksFeature } from './tasks';
import { loadOrCreateKeyFile, SecretBox } from './shared/secret-box';
import { createUsageFeature } from './usage';

export interface AppOptions {
  logger?: Logger;
  /** Called for every SQL statement (tests count queries with it). */
  onQuery?: (sql: string) => void;
  runs?: Partial<RunServiceOptions>;
  /** Milliseconds since the epoch for the usage ledger (tests fix the day a call is booked on). */
  usageNow?: () => number;
  /** Receives the generated bootstrap administrator token (printed once by main.ts). */
  onBootstrapToken?: (token: string) => void;
}

export interface App {
  config: AppConfig;
  logger: Logger;
  services: Services;
  /** Metrics, tracing, rate limits: the transport mounts their hooks. */
  operations: Operations;
  /**
   * Stops the app, in one order: background work and runs first (their
   * deliveries reach the outbox), then `closeTransport` (requests finish,
   * sockets close), then the buses, Redis, MCP, operations and the database.
   * Idempotent: every later call returns the first call's promise.
   */
  close(closeTransport?: () => Promise<void>): Promise<void>;
}

/** What is built so far; close() releases whatever of it exists. */
interface Parts {
  promptEvents: PromptEventBus | null;
  revocations: RevocationBus | null;
  leaseClient: Redis | null;
  detector: PromptChangeDetector | null;
  operations: Operations | null;
  core: CoreServices | null;
  mcp: McpFeature | null;
  runs: RunsFeature | null;
  conversations: ConversationsFeature | null;
  /** SQLite files: the WAL checkpoint worker, stopped before the database closes. */
  checkpointer: SqliteCheckpointer | null;
}

export async function createApp(config: AppConfig, options: AppOptions = {}): Promise<App> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const { dataSource, dialect, checkpointer } = await createDataSource({
    database: config.database,
    schemaMode: config.schemaMode,
    sqliteBusyTimeoutMs: config.sqliteBusyTimeoutMs,
    sqliteLockWaitMs: config.sqliteLockWaitMs,
    onQuery: options.onQuery,
    sqliteCheckpoints: { logger },
  });
  const parts: Parts = { promptEvents: null, revocations: null, leaseClient: null, detector: null, operations: null, core: null, mcp: null, runs: null, conversations: null, checkpointer };

  let closing: Promise<void> | null = null;
  const close = (closeTransport?: () => Promise<void>): Promise<void> =>
    (closing ??= (async () => {
      await parts.detector?.stop();
      parts.conversations?.stop();
      await parts.runs?.stop();
      // After the runs: their END's deliveries are in the outbox; an attempt cut short is due again at once.
      await parts.core?.webhookDispatcher.stop();
      if (closeTransport) {
        logger.debug('runs drained; closing the transport');
        await closeTransport();
      }
      await parts.runs?.close();
      await parts.promptEvents?.close();
      await parts.revocations?.close();
      parts.leaseClient?.disconnect();
      await parts.mcp?.service.close();
      await parts.operations?.close();
      logger.debug('closing the database');
      await parts.checkpointer?.stop();
      await dataSource.destroy();
    })());

  try {
    if (config.schemaMode === 'shared') await checkSharedSchema(dataSource);
    if (config.runMigrations) {
      const applied = await dataSource.runMigrations({ transaction: 'each' });
      if (applied.length > 0) logger.info({ migrations: applied.map((m) => m.name) }, 'applied migrations');
    }

    const secretKey = config.secretKey ?? (config.database.kind === 'sqlite' ? loadOrCreateKeyFile(config.database.dataDirectory) : null);
    if (!secretKey) throw new Error('SECRET_KEY is required');
    if (config.redisUrl) {
      const redisPromptEvents = new RedisPromptEventBus(config.redisUrl, databaseKey(config), logger);
      parts.promptEvents = redisPromptEvents;
      await redisPromptEvents.ready();
      const redisRevocations = new RedisRevocationBus(config.redisUrl, databaseKey(config), logger);
      parts.revocations = redisRevocations;
      await redisRevocations.ready();
    } else {
      parts.promptEvents = new InProcessPromptEventBus();
      parts.revocations = new InProcessRevocationBus();
    }
    const secrets = new SecretBox(secretKey);
    // Cursors are signed with a key of their own from the same secret: valid after a restart and on every instance.
    const cursors = new PagingCursors(secretKey);
    const core = createCoreServices(dataSource, dialect, config, secrets, logger, parts.promptEvents, parts.revocations, cursors);
    parts.core = core;
    if (config.redisUrl) parts.leaseClient = new Redis(config.redisUrl, { maxRetriesPerRequest: 3 });
    const lease = parts.leaseClient ? new RedisDetectorLease(parts.leaseClient, databaseKey(config), Math.max(10_000, config.promptChangePollMs * 3)) : null;
    const detector = new PromptChangeDetector(dataSource, core.history, core.identifiers, logger, config.promptChangePollMs, lease);
    parts.detector = detector;
    const operations = createOperations(config, logger, { databaseKey: databaseKey(config) });
    parts.operations = operations;
    // MCP skips tools named like a built-in one; runs offer MCP's tools: each asks the other lazily.
    const mcp = createMcpFeature(dataSource, core.identifiers, config, secrets, logger, () => parts.runs?.builtinToolNames() ?? []);
    parts.mcp = mcp;
    const usage = createUsageFeature({ dataSource, dialect, config, logger, configurations: core.configurations, now: options.usageNow });
    // Each turn of a conversation is a run; runs ask conversations for a turn's history and tell them of its END.
    const conversations = createConversationsFeature({
      dataSource,
      dialect,
      configurations: core.configurations,
      runs: () => parts.runs!.service,
      bus: () => parts.runs!.feed,
      cursors,
      logger,
      retentionDays: config.conversationRetentionDays,
    });
    parts.conversations = conversations;
    const runs = await createRunsFeature({
      dataSource,
      services: core,
      config,
      cursors,
      logger,
      externalTools: mcp.toolSource,
      observer: operations.runObserver,
      callLedger: usage.ledger,
      toolSwitches: usage.toolSwitches,
      onRunEnded: conversations.onRunEnded,
      historySource: (reference) => conversations.service.history(reference),
      options: options.runs,
    });
    parts.runs = runs;
    const tasks = createTasksFeature({ dataSource, identifiers: core.identifiers, configurations: core.configurations, runs: runs.service, reader: runs.reader, history: core.history });
    const services: Services = { ...core, runs: runs.service, runReader: runs.reader, runFeed: runs.feed, mcp: mcp.service, tasks, usage: usage.service, conversations: conversations.service };
    operations.metrics.countOpenRunsWith(runs.countOpen);

    const generated = await core.tokens.bootstrap(config.adminToken);
    if (generated) options.onBootstrapToken?.(generated);
    if (config.seedExamples && (await seedExamples(services))) logger.info('seeded the example data set into the empty database');
    await runs.start();
    conversations.start();
    detector.start();
    core.webhookDispatcher.start();

    return { config, logger, services, operations, close };
  } catch (error) {
    await closeAfterFailedStart(close, logger);
    throw error;
  }
}

/** A start that failed releases what it built; the start's own error is the one reported. */
export async function closeAfterFailedStart(close: () => Promise<void>, logger: Logger): Promise<void> {
  await close().catch((closeError: unknown) => logger.warn({ err: closeError }, 'closing after a failed start failed too'));
}

/** Names the database for Redis channels and locks: instances on one database share them, others never do. */
export function databaseKey(config: AppConfig): string {
  const identity = config.database.kind === 'sqlite' ? config.database.file : config.database.url.replace(/\/\/[^@]*@/, '//');
  return crypto.createHash('sha256').update(identity).digest('hex').slice(0, 16);
}
