/**
 * The runs feature, built once by the composition root, and its one front
 * door: the rest of the application imports runs from here only (a lint rule
 * in eslint.config.mjs holds every other feature to the same).
 *
 * `createRunsFeature` builds the trace bus (Redis when configured), the run
 * feed on it, the built-in tools, the service that drives runs and the
 * reader that serves them; `start()` takes over what earlier processes left
 * (orphaned runs, approvals past their deadline) and starts the
 * housekeeping; `stop()` stops it and drains this process's runs; `close()`
 * closes the bus once nothing listens any more.
 */
import type { DataSource } from 'typeorm';
import type { AppConfig } from '../config';
import type { PagingCursors } from '../db/keyset';
import type { Logger } from '../logger';
import type { RunObserver } from '../operations/run-observer';
import type { CoreServices } from '../services';
import { LazyPayload } from '../webhooks';
import { createDatabaseSnippetSource } from './database-snippet-source';
import { RunFeedBus } from './run-feed';
import type { RunReader } from './run-reader';
import type { RunEndedHook } from './run-store';
import { RunService, type HistorySource, type RunServiceOptions } from './run.service';
import { createBuiltinToolRegistry } from './tools/builtin-tools';
import type { ExternalToolSource } from './tools/tool-registry';
import type { CallLedgerFactory } from './engine/call-ledger';
import type { ToolSwitchSource } from './tools/tool-switches';
import { InProcessTraceBus, RedisTraceBus, type TraceBus } from './trace-bus';

export { AgentRun, ToolInfo, toAgentRun } from './run.types';
export { isOpenRunStatus } from './run-status';
export { ToolInputError, type ExternalTool, type ExternalToolSource } from './tools/tool-registry';
export type { LoopStep, LlmStep, RequestStep } from './engine/loop-step';
export type { ToolSwitches, ToolSwitchSource } from './tools/tool-switches';
export type { CallFacts, CallLedger, CallLedgerFactory, CallPermit, CallRefusal, LedgerAccount, LedgerCall } from './engine/call-ledger';
export type { RunProvenance } from './run-store';
export type { RunTaskOrigin } from './run-queries';
export type { RunFeedBus } from './run-feed';
export type { RunReader, RunView } from './run-reader';
export type { HistoryReference, HistorySource, RunPreview, RunService, RunServiceOptions, RunStartExtras, StartRunRequest, ToolDecisionRequest } from './run.service';
export type { RunEndedHook } from './run-store';
export type { EndStep } from './engine/loop-step';
export type { StoredStep, TraceBus, BusListener } from './trace-bus';

export interface RunsFeatureDeps {
  dataSource: DataSource;
  /** The services runs are prepared from, and the outbox a finished run's webhooks go to. */
  services: Pick<CoreServices, 'configurations' | 'models' | 'providers' | 'snippets' | 'skills' | 'releases' | 'webhookOutbox'>;
  config: Pick<AppConfig, 'redisUrl' | 'runLeaseSeconds' | 'providerMaxResponseBytes'>;
  cursors: PagingCursors;
  logger: Logger;
  /** Tools beyond the built-ins (MCP servers'). */
  externalTools?: ExternalToolSource;
  /** Metrics and traces of runs. */
  observer?: RunObserver | null;
  /** Also told of every run's END, in its transaction (a conversation stores the reply). */
  onRunEnded?: RunEndedHook;
  /** Reads a conversation turn's history again when its run goes on later. */
  historySource?: HistorySource;
  /** The usage ledger every provider call of a run is checked against and booked in. */
  callLedger?: CallLedgerFactory;
  /** TYPO3's tool on/off switches. */
  toolSwitches?: ToolSwitchSource;
  /** Options over the defaults (tests: adapters, queue sizes, timings). */
  options?: Partial<RunServiceOptions>;
}

export interface RunsFeature {
  /** Starts, decides, cancels and takes over runs. */
  service: RunService;
  /** Reads runs and serves their traces and deltas. */
  reader: RunReader;
  /** Which runs changed, on every instance (runUpdated). */
  feed: RunFeedBus;
  /** The names of the built-in tools (an MCP tool of the same name is skipped). */
  builtinToolNames(): string[];
  /** Open runs by stored status (metrics). */
  countOpen(): Promise<Record<string, number>>;
  /** Takes over orphaned runs, expires overdue approvals, and starts the housekeeping that keeps doing both. */
  start(): Promise<void>;
  /** Stops the housekeeping and ends this process's runs (CANCELLED), waiting for their ENDs to be stored and handed over. */
  stop(): Promise<void>;
  /** Closes the trace bus (after the sockets that listen on it). */
  close(): Promise<void>;
}

export async function createRunsFeature(deps: RunsFeatureDeps): Promise<RunsFeature> {
  const { services, config, logger } = deps;
  const bus = await createTraceBus(config.redisUrl, logger);
  const toolRegistry = createBuiltinToolRegistry(createDatabaseSnippetSource(services.snippets));
  // Runs publish their steps through the feed, so that lists can follow every run's changes.
  const feed = new RunFeedBus(bus);
  const service = new RunService(
    deps.dataSource,
    services.configurations,
    services.models,
    services.providers,
    services.snippets,
    services.skills,
    services.releases,
    toolRegistry,
    feed,
    logger,
    {
      watcherQueueSize: 256,
      cursors: deps.cursors,
      leaseSeconds: config.runLeaseSeconds,
      providerMaxResponseBytes: config.providerMaxResponseBytes,
      externalTools: deps.externalTools,
      observer: deps.observer,
      callLedger: deps.callLedger,
      toolSwitches: deps.toolSwitches,
      onRunEnded: async (manager, loadRun, ended) => {
        const payload = new LazyPayload(async () => {
          const run = await loadRun();
          return run ? { run } : null;
        });
        await services.webhookOutbox.enqueue(manager, 'run.finished', payload);
        await deps.onRunEnded?.(manager, loadRun, ended);
      },
      historySource: deps.historySource,
      ...deps.options,
    },
  );
  return {
    service,
    reader: service.reader,
    feed,
    builtinToolNames: () => toolRegistry.list().map((tool) => tool.name),
    countOpen: () => service.store.countOpen(),
    async start() {
      await service.recoverInterrupted();
      await service.expireApprovals();
      service.startHousekeeping();
    },
    async stop() {
      service.stopHousekeeping();
      await service.drain(true);
    },
    close: () => bus.close(),
  };
}

async function createTraceBus(redisUrl: string | null, logger: Logger): Promise<TraceBus> {
  if (!redisUrl) return new InProcessTraceBus();
  const bus = new RedisTraceBus(redisUrl, logger);
  try {
    await bus.ready();
  } catch (error) {
    await bus.close().catch(() => undefined);
    throw error;
  }
  return bus;
}
