/**
 * The runs feature's service, what resolvers and the composition root use:
 * starts runs (prepared by RunPreparer) and hands the rest to its parts —
 * RunDriver drives runs in this process, RunApprovals takes decisions and
 * timeouts, RunSupervisor cancels, keeps leases, takes over and drains.
 * Reading runs and serving their traces is RunReader's.
 */
import crypto from 'node:crypto';
import type { EntityManager } from 'typeorm';
import type { CallLedgerFactory } from './engine/call-ledger';
import { isToolSwitchedOn, NO_SWITCHES, type ToolSwitchSource } from './tools/tool-switches';
import type { Caller } from '../auth/roles';
import type { ConfigurationService } from '../configurations/configuration.service';
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import type { PagingCursors } from '../db/keyset';
import type { Logger } from '../logger';
import type { RunObserver } from '../operations/run-observer';
import type { CallOptions, ChatAdapter, ChatMessage } from '../providers/adapters/types';
import { assembleRunMessages } from '../prompt/run-messages';
import { buildSkillBlock } from '../prompt/skill-block';
import type { ModelService } from '../providers/model.service';
import type { ProviderService } from '../providers/provider.service';
import type { ReleaseService } from '../releases/release.service';
import type { SkillService } from '../skills/skill.service';
import type { SnippetService } from '../snippets/snippet.service';
import { firstCallFit } from './engine/first-fit';
import { RunApprovals } from './run-approvals';
import { RunDriver } from './run-driver';
import { historyInput, RunPreparer, type HistoryReference, type HistorySource, type StartRunRequest, type StoredRunRequest } from './run-preparer';
import { RunReader, type RunView } from './run-reader';
import { RunStore, type RunEndedHook, type RunProvenance } from './run-store';
import { RunSupervisor } from './run-supervisor';
import type { ExternalToolSource, ToolInfo, ToolRegistry } from './tools/tool-registry';
import type { TraceBus } from './trace-bus';

export type { ToolDecisionRequest } from './engine/approval-decision';
export { UNSTORABLE_RESULT_MESSAGE } from './run-driver';
export type { HistoryReference, HistorySource, StartRunRequest } from './run-preparer';
export type { RunPageRequest, RunView } from './run-reader';

/** What a caller that builds on runs (a conversation turn) adds to a start. */
export interface RunStartExtras {
  /** The new run's id (uuid v4), chosen by the caller; default a fresh one. */
  runId?: string;
  /**
   * Writes what belongs to the new run in the transaction that stores it;
   * throwing stores nothing. `firstFit`: the context fit of the run's first
   * model call (how many turns it drops; `measured` false when the
   * transcript goes out unmeasured).
   */
  onCreated?: (manager: EntityManager, run: { uid: number; uuid: string }, firstFit: { droppedTurns: number; measured: boolean }) => Promise<void>;
  /** The configuration `input.configuration` names, as the caller has just read it: not read a second time. */
  configuration?: ConfigurationEntity;
  /**
   * A conversation turn's history and where it is stored, still being read
   * (with the turn's checks): the run's own reads go on meanwhile, and the
   * run is stored once it has both. A rejection stores nothing and is what
   * `start` throws (unless the run's own preparation failed first).
   */
  turn?: Promise<{ history: ChatMessage[]; conversation: HistoryReference }>;
}

/** What a run would send first (`RunService.preview`). */
export interface RunPreview {
  configuration: string;
  release: { id: number; label: string } | null;
  /** The effective system prompt (message 0 when not empty). */
  systemPrompt: string;
  /** The first request's messages, before context fitting. */
  messages: ChatMessage[];
  callOptions: CallOptions;
  /** Identifiers of the skills in the skill block, in block order. */
  appliedSkills: string[];
}

export interface RunServiceOptions {
  /** How many steps a live watcher may fall behind before it is told to resubscribe. */
  watcherQueueSize: number;
  /**
   * Seconds after which a run whose owner stopped renewing its lease counts as
   * orphaned. The owner renews every third of it.
   */
  leaseSeconds?: number;
  /**
   * A watcher that heard nothing for this long reads the table (its bus
   * messages may have been lost, e.g. with a dropped Redis connection).
   */
  watcherRecheckMs?: number;
  /** Bytes one provider call may answer. */
  providerMaxResponseBytes?: number;
  /** Waits between attempts to store a step; one more attempt than entries. */
  storeRetryDelaysMs?: readonly number[];
  /** Builds the adapter for a provider; tests swap in scripted ones. */
  adapterFactory?: (settings: ReturnType<ProviderService['settingsFor']>) => ChatAdapter;
  /** Tools beyond the built-ins (MCP servers'), read for each run whose allow-list names one. */
  externalTools?: ExternalToolSource;
  /** Metrics and traces: sees each stored step. Never awaited; its failures never touch a run. */
  observer?: RunObserver | null;
  /** Writes what a finished run raises (webhook deliveries) in the transaction of its END. */
  onRunEnded?: RunEndedHook;
  /** Checks every provider call against the usage budgets and books it (src/usage); absent: nothing is metered. */
  callLedger?: CallLedgerFactory;
  /** TYPO3's tool on/off switches (src/usage); absent: every tool is on. */
  toolSwitches?: ToolSwitchSource;
  /** Writes and reads the cursors of runsConnection. */
  cursors: PagingCursors;
  /** Reads a conversation turn's history again when its run goes on later. */
  historySource?: HistorySource;
}

export class RunService {
  readonly store: RunStore;
  /** Reads runs and serves their traces (the driver tells it which runs it drives). */
  readonly reader: RunReader;
  private readonly preparer: RunPreparer;
  private readonly driver: RunDriver;
  /** Decisions on runs waiting for approval, and their timeouts (run-approvals.ts). */
  readonly approvals: RunApprovals;
  private readonly supervisor: RunSupervisor;

  constructor(
    dataSource: ConstructorParameters<typeof RunStore>[0],
    configurations: ConfigurationService,
    models: ModelService,
    providers: ProviderService,
    snippets: SnippetService,
    skills: SkillService,
    private readonly releases: ReleaseService,
    private readonly tools: ToolRegistry,
    private readonly bus: TraceBus,
    private readonly logger: Logger,
    private readonly options: RunServiceOptions,
  ) {
    this.store = new RunStore(dataSource, options.onRunEnded ?? null, options.historySource ?? null);
    this.preparer = new RunPreparer(configurations, models, providers, snippets, skills, releases, tools, logger, options);
    this.driver = new RunDriver(this.store, this.preparer, bus, logger, options);
    const driver = this.driver;
    this.reader = new RunReader(this.store, bus, { has: (uuid) => driver.local(uuid) !== undefined, dryRun: (uuid) => driver.local(uuid)?.dryRun }, options);
    this.approvals = new RunApprovals(this.store, this.driver, logger);
    this.supervisor = new RunSupervisor(this.store, this.driver, this.approvals, bus, this.reader, logger);
  }

  /** This process's id in run leases. */
  get instanceId(): string {
    return this.driver.instanceId;
  }

  get toolRegistry(): ToolRegistry {
    return this.tools;
  }

  /**
   * Every tool a run can name: the built-ins, then the external ones whose
   * names no built-in has; a tool TYPO3's switches turn off is left out.
   */
  async listTools(): Promise<ToolInfo[]> {
    const [external, switches] = await Promise.all([this.options.externalTools ? this.options.externalTools.list() : [], this.options.toolSwitches?.read() ?? NO_SWITCHES]);
    return [...this.tools.list(), ...external.filter((tool) => !this.tools.has(tool.name))].filter((tool) => isToolSwitchedOn(tool, switches));
  }

  /**
   * Validates everything, stores the run as QUEUED with its request, and starts driving it without waiting.
   * `origin.trace` is the starting request's trace span (opaque), for the run's trace; `origin.taskUid`
   * the task the run executes (its usage is booked to it; a task run's `input.task` says it too).
   */
  async start(input: StartRunRequest, caller: Caller, origin: { trace?: unknown; taskUid?: number } = {}, extra: RunStartExtras = {}): Promise<RunView> {
    // Which release a run sends is decided here, from its label; never taken from a caller.
    const request: StartRunRequest = { ...input, releaseId: null };
    this.preparer.checkRequest(request, caller);
    const booking = { beUser: caller.beUser, source: caller.source, taskUid: origin.taskUid ?? input.task?.uid ?? 0 };
    const [prepared, turn] = await Promise.all([this.preparer.prepare(request, true, booking, extra.configuration ?? null), extra.turn ?? null]);
    if (turn) prepared.loopInput = { ...prepared.loopInput, ...historyInput(turn.history, turn.conversation) };
    const release = prepared.release;
    const task = request.task ?? null;
    const stored: StoredRunRequest = {
      request: { ...normalisedRequest(turn ? { ...request, conversation: turn.conversation } : request), ...(release ? { label: release.label, releaseId: release.id } : {}) },
      startedBy: caller.name,
      ...booking,
    };
    const provenance: RunProvenance = release
      ? { releaseId: release.id, label: release.label, snippets: release.snippets, task }
      : { releaseId: null, label: null, snippets: await this.releases.composedVersions(prepared.composedSnippets), task };
    const leaseAt = Date.now();
    const onCreated = extra.onCreated;
    const first = onCreated ? firstCallFit(prepared.loopInput) : null;
    if (first) prepared.loopInput = { ...prepared.loopInput, assembled: first.assembled };
    const firstFit = first?.fit ?? null;
    const row = await this.store.createRun(
      { uuid: extra.runId ?? crypto.randomUUID(), configurationUid: prepared.configuration.uid, configurationIdentifier: prepared.configuration.identifier, beUser: caller.beUser },
      this.driver.instanceId,
      JSON.stringify(stored),
      provenance,
      onCreated && firstFit ? (manager, run) => onCreated(manager, run, { droppedTurns: firstFit.report.droppedTurns, measured: firstFit.deferred === null }) : undefined,
    );
    this.driver.leases.taken(row.uid, leaseAt);
    this.driver.drive(row, prepared, null, origin.trace ?? null);
    this.logger.info({ runId: row.uuid, configuration: prepared.configuration.identifier, release: release?.id, dryRun: prepared.dryRun, by: caller.name }, 'run started');
    const appliedSkills = buildSkillBlock(prepared.loopInput.configurationSkills ?? [], prepared.loopInput.forcedSkills ?? []).included;
    return { row, dryRun: prepared.dryRun, finalContent: null, error: null, pendingToolCalls: [], appliedSkills };
  }

  /**
   * What a run of the request would send first, without storing or calling
   * anything: validated and prepared exactly as `start` does it.
   */
  async preview(input: StartRunRequest, caller: Caller): Promise<RunPreview> {
    const request: StartRunRequest = { ...input, releaseId: null };
    this.preparer.checkRequest(request, caller);
    const prepared = await this.preparer.prepare(request, true);
    const assembled = assembleRunMessages(prepared.loopInput);
    return {
      configuration: prepared.configuration.identifier,
      release: prepared.release ? { id: prepared.release.id, label: prepared.release.label } : null,
      systemPrompt: prepared.loopInput.systemPrompt,
      messages: assembled.messages,
      callOptions: prepared.loopInput.callOptions,
      appliedSkills: assembled.skills.included,
    };
  }

  /** Refuses the pending calls of runs whose approval timeout passed, and drives them on here; how many. */
  expireApprovals(): Promise<number> {
    return this.approvals.expire();
  }

  /** Ends an open run CANCELLED (run-supervisor.ts). */
  cancel(uuid: string): Promise<RunView> {
    return this.supervisor.cancel(uuid);
  }

  /** Takes over or closes the runs of instances that stopped; how many. */
  recoverInterrupted(): Promise<number> {
    return this.supervisor.recoverInterrupted();
  }

  /** Renews this instance's leases, takes over orphans and expires approvals, until `stopHousekeeping()`. */
  startHousekeeping(): void {
    this.supervisor.startHousekeeping();
  }

  stopHousekeeping(): void {
    this.supervisor.stopHousekeeping();
  }

  /** Waits for every run of this process to finish (graceful shutdown, tests); `cancel` ends them CANCELLED. */
  drain(cancel: boolean): Promise<void> {
    return this.supervisor.drain(cancel);
  }
}

/** The request as stored: only what a run needs to be prepared again. */
function normalisedRequest(request: StartRunRequest): StartRunRequest {
  const copy: StartRunRequest = { configuration: request.configuration, prompt: request.prompt };
  // A conversation's history is not copied: the reference reads it again.
  for (const key of ['tools', 'forcedSnippets', 'forcedSkills', 'systemPrompt', 'maxRounds', 'maxTokens', 'temperature', 'captureRaw', 'dryRun', 'stream', 'approvalRequired', 'approvalTimeoutSeconds', 'maxTotalTokens', 'maxCost', 'label', 'releaseId', 'responseFormat', 'outputSchema', 'task', 'conversation', 'sendOverBudget'] as const) {
    copyGiven(copy, request, key);
  }
  return copy;
}

/** Copies `from[key]` to `to` when it is given (neither undefined nor null). */
function copyGiven<K extends keyof StartRunRequest>(to: StartRunRequest, from: StartRunRequest, key: K): void {
  const value = from[key];
  if (value !== undefined && value !== null) to[key] = value;
}
