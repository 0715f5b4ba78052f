/**
 * Starts agent runs in the server, records their steps (persist, then
 * publish), and serves their traces to watchers: replay from the table,
 * then live, without gap or duplicate.
 */
import crypto from 'node:crypto';
import { Role, roleAtLeast, type Caller } from '../auth/roles';
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import { callOptionsOf, effectiveSystemPromptOf, type ConfigurationService } from '../configurations/configuration.service';
import { checkPage } from '../db/record-rules';
import type { Logger } from '../logger';
import { createChatAdapter } from '../providers/adapters/registry';
import type { CallOptions, ChatAdapter } from '../providers/adapters/types';
import type { ModelEntity } from '../providers/model.entity';
import type { ModelService } from '../providers/model.service';
import type { ProviderService } from '../providers/provider.service';
import { BadUserInputError, ForbiddenError, NotFoundError, SubscriberLaggedError } from '../shared/errors';
import type { SkillService } from '../skills/skill.service';
import type { SkillEntity } from '../skills/skill.entity';
import { ActiveSnippetIndex } from '../snippets/snippet.service';
import type { SnippetService } from '../snippets/snippet.service';
import type { AgentRunEntity } from './agent-run.entity';
import { INTERNAL_ERROR_MESSAGE, runAgentLoop, type AgentLoopInput } from './engine/agent-loop';
import type { EndStep, RunDelta, RunStep } from './engine/run-step';
import type { SkillInput } from './engine/skill-block';
import { BoundedQueue } from './bounded-queue';
import { RunStore, type RunEndedHook } from './run-store';
import type { ExternalToolSource, ToolInfo, ToolRegistry } from './tools/tool-registry';
import { preciseNow, type RunObservation, type RunObserver } from '../operations/run-observer';
import type { StoredStep, TraceBus } from './trace-bus';

export interface StartRunRequest {
  configuration: string;
  prompt: string;
  tools?: string[] | null;
  forcedSnippets?: string[] | null;
  forcedSkills?: string[] | null;
  systemPrompt?: string | null;
  maxRounds?: number | null;
  maxTokens?: number | null;
  temperature?: number | null;
  captureRaw?: boolean | null;
  dryRun?: boolean | null;
  /** Stream model output and publish deltas to `runDeltas` watchers. */
  stream?: boolean | null;
}

/** A run as the API shows it: the row, plus what lives in its END step. */
export interface RunView {
  row: AgentRunEntity;
  dryRun: boolean;
  finalContent: string | null;
  error: string | null;
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
}

interface ActiveRun {
  uid: number;
  controller: AbortController;
  dryRun: boolean;
  done: Promise<void>;
}

const DEFAULT_LEASE_SECONDS = 15;
const DEFAULT_WATCHER_RECHECK_MS = 5_000;
const DEFAULT_STORE_RETRY_DELAYS_MS: readonly number[] = [100, 500, 2_000];
/** How often cancelRun looks whether the owner of a run ended it, or died. */
const REMOTE_CANCEL_POLL_MS = 250;

/** The END a run gets when its real END cannot be stored (too large, values out of range): small and always storable. */
export const UNSTORABLE_RESULT_MESSAGE = 'The run ended, but its result could not be stored.';

export class RunService {
  readonly store: RunStore;
  readonly instanceId = crypto.randomUUID();
  private readonly active = new Map<string, ActiveRun>();
  private heartbeatTimer: NodeJS.Timeout | null = null;

  constructor(
    dataSource: ConstructorParameters<typeof RunStore>[0],
    private readonly configurations: ConfigurationService,
    private readonly models: ModelService,
    private readonly providers: ProviderService,
    private readonly snippets: SnippetService,
    private readonly skills: SkillService,
    private readonly tools: ToolRegistry,
    private readonly bus: TraceBus,
    private readonly logger: Logger,
    private readonly options: RunServiceOptions,
  ) {
    this.store = new RunStore(dataSource, options.onRunEnded ?? null);
  }

  get toolRegistry(): ToolRegistry {
    return this.tools;
  }

  /** Every tool a run can name: the built-ins, then the external ones whose names no built-in has. */
  async listTools(): Promise<ToolInfo[]> {
    const builtin = this.tools.list();
    const external = this.options.externalTools ? await this.options.externalTools.list() : [];
    return [...builtin, ...external.filter((tool) => !this.tools.has(tool.name))];
  }

  /**
   * Validates everything, stores the run as QUEUED, and starts the loop without waiting for it.
   * `origin.trace` is the starting request's trace span (opaque), for the run's trace.
   */
  async start(request: StartRunRequest, caller: Caller, origin: { trace?: unknown } = {}): Promise<RunView> {
    const captureRaw = request.captureRaw === true;
    if (captureRaw && !roleAtLeast(caller.role, Role.ADMIN)) {
      throw new ForbiddenError('Raw capture keeps provider responses verbatim; only an ADMIN may ask for it', 'captureRaw');
    }
    const prompt = request.prompt ?? '';
    if (prompt.trim() === '') throw new BadUserInputError('prompt is required', 'prompt');
    if (Buffer.byteLength(prompt, 'utf8') > 1_000_000) throw new BadUserInputError('prompt must be at most 1 MB', 'prompt');
    if (request.maxTokens != null && (!Number.isInteger(request.maxTokens) || request.maxTokens < 0)) {
      throw new BadUserInputError('maxTokens must be a whole number ≥ 0', 'maxTokens');
    }
    if (request.temperature != null && (!Number.isFinite(request.temperature) || request.temperature < 0 || request.temperature > 2)) {
      throw new BadUserInputError('temperature must be between 0 and 2', 'temperature');
    }
    if (request.maxRounds != null && !Number.isInteger(request.maxRounds)) throw new BadUserInputError('maxRounds must be a whole number (it is clamped to 1..20)', 'maxRounds');
    // External tools are only read (and only reach their servers) for a run that names one.
    const tools = request.tools?.some((name) => !this.tools.has(name)) && this.options.externalTools ? this.tools.withExternal(await this.options.externalTools.toolsForRun()) : this.tools;
    if (request.tools) {
      const unknown = tools.unknownNames(request.tools);
      if (unknown.length > 0) {
        throw new BadUserInputError(`Unknown tool(s): ${unknown.join(', ')}. The tools query lists what exists.`, 'tools');
      }
    }

    const configuration = await this.configurations.findByIdentifier(request.configuration ?? '');
    if (!configuration) throw new NotFoundError(`No configuration with identifier "${request.configuration}"`, 'configuration');
    const forcedSnippets = request.forcedSnippets?.length ? await this.snippets.findManyByIdentifiers(request.forcedSnippets) : [];
    const forcedSkills: SkillEntity[] = [];
    for (const identifier of request.forcedSkills ?? []) {
      const skill = await this.skills.findByIdentifier(identifier);
      if (!skill) throw new NotFoundError(`No skill with identifier "${identifier}"`, 'forcedSkills');
      forcedSkills.push(skill);
    }
    const dryRun = request.dryRun === true;
    const model = configuration.modelUid ? (await this.models.findByUids([configuration.modelUid]))[0] ?? null : null;
    if (!model && !dryRun) throw new BadUserInputError(`Configuration "${configuration.identifier}" has no model; set one with updateConfiguration`, 'configuration');
    const provider = model ? (await this.providers.findByUids([model.providerUid]))[0] ?? null : null;
    if (model && !provider && !dryRun) throw new BadUserInputError(`The model "${model.identifier}" has no provider; fix it with updateModel`, 'configuration');
    if (provider && !provider.isActive && !dryRun) throw new BadUserInputError(`The provider "${provider.identifier}" is inactive`, 'configuration');

    const [activeSnippets, skillMap, prices] = await Promise.all([
      this.snippets.allActive().then((rows) => new ActiveSnippetIndex(rows)),
      this.configurations.skillsByConfiguration([configuration.uid]),
      model ? this.models.pricesFor(model) : Promise.resolve(null),
    ]);

    const overrides: Record<string, unknown> = {};
    if (request.maxTokens != null) overrides.max_tokens = request.maxTokens;
    if (request.temperature != null) overrides.temperature = request.temperature;
    const callOptions = callOptionsFor(configuration, model, activeSnippets, overrides);

    const row = await this.store.createRun({ uuid: crypto.randomUUID(), configurationUid: configuration.uid, configurationIdentifier: configuration.identifier }, this.instanceId);
    const controller = new AbortController();
    const settings = provider ? this.providers.settingsFor(provider) : null;
    const adapter: ChatAdapter = settings ? (this.options.adapterFactory ?? ((s) => createChatAdapter(s, { logger: this.logger, ...(this.options.providerMaxResponseBytes ? { maxResponseBytes: this.options.providerMaxResponseBytes } : {}) })))(settings) : unusableAdapter;

    const loopInput: AgentLoopInput = {
      adapter,
      model: { contextLength: model?.contextLength ?? 0, maxOutputTokens: model?.maxOutputTokens ?? 0, prices: prices && (prices.costInput > 0 || prices.costOutput > 0 || prices.costCacheRead != null || prices.costCacheWrite != null || prices.costReasoning != null) ? prices : null },
      callOptions,
      systemPrompt: effectiveSystemPromptOf(configuration, activeSnippets, request.systemPrompt),
      forcedSnippets: forcedSnippets.map((s) => ({ identifier: s.identifier, name: s.name, snippet: s.snippet })),
      configurationSkills: (skillMap.get(configuration.uid) ?? []).map(toSkillInput),
      forcedSkills: forcedSkills.map(toSkillInput),
      prompt,
      tools: { registry: tools, allowList: request.tools ?? undefined },
      maxRounds: request.maxRounds ?? undefined,
      captureRaw,
      dryRun,
      signal: controller.signal,
      // Streaming is the default: watchers see output as it is written.
      stream: request.stream !== false,
    };

    // cancelRun may arrive at another instance; it asks over the bus.
    const stopListening = this.bus.subscribe(row.uuid, (message) => {
      if (message.type === 'cancel') controller.abort();
    });
    const observation = this.options.observer?.runStarted({
      runId: row.uuid,
      configuration: configuration.identifier,
      providerType: provider && !dryRun ? provider.adapterType : null,
      model: dryRun ? null : callOptions.model || null,
      dryRun,
      requestTrace: origin.trace ?? null,
    });
    const done = this.execute(row, loopInput, observation).finally(() => {
      stopListening();
      this.active.delete(row.uuid);
    });
    this.active.set(row.uuid, { uid: row.uid, controller, dryRun, done });
    this.logger.info({ runId: row.uuid, configuration: configuration.identifier, dryRun, by: caller.name }, 'run started');
    return { row, dryRun, finalContent: null, error: null };
  }

  private async execute(row: AgentRunEntity, input: AgentLoopInput, observation?: RunObservation): Promise<void> {
    // Let startRun answer before the first step is written.
    await new Promise((resolve) => setImmediate(resolve));
    let sequence = 0;
    const recordStep = async (step: RunStep): Promise<void> => {
      // Persist, then publish: a watcher that arrives late reads what it missed from the table.
      // The sequence number advances only once the step is stored, so a failed write leaves no gap.
      const handedOverAt = observation ? preciseNow() : 0;
      const stored = await this.storeStep(row, sequence + 1, step);
      sequence = stored.sequence;
      this.bus.publish(row.uuid, { type: 'step', step: stored });
      // The step as stored: the loop's own, or the small FAILED END that replaced one that could not be stored.
      observation?.step(stored as unknown as RunStep, handedOverAt);
    };
    try {
      await this.withStoreRetries(row, 'mark the run running', () => this.store.markRunning(row.uid));
      const outcome = await runAgentLoop(input, {
        recordStep,
        onDelta: (delta: RunDelta) => this.bus.publish(row.uuid, { type: 'delta', delta }),
        logger: { warn: (obj, msg) => this.logger.warn({ runId: row.uuid, ...obj }, msg), error: (obj, msg) => this.logger.error({ runId: row.uuid, ...obj }, msg) },
      });
      this.logger.info({ runId: row.uuid, status: outcome.status, reason: outcome.terminationReason, tokens: outcome.totalTokens }, 'run finished');
    } catch (error) {
      // The loop records its own END; this is only reached when marking the run failed.
      this.logger.error({ err: error, runId: row.uuid }, 'run failed outside the loop');
      await this.closeAsFailed(row, sequence, 'error', INTERNAL_ERROR_MESSAGE).catch((closeError: unknown) =>
        this.logger.error({ err: closeError, runId: row.uuid }, 'could not close a failed run'),
      );
    } finally {
      observation?.finish();
    }
  }

  /**
   * Stores one step, retrying while the database refuses. An END that cannot
   * be stored as it is (an answer over the database's packet limit, values a
   * column cannot hold) is replaced by a small FAILED END, so every run ends.
   * When even that fails, the run's lease is no longer renewed and
   * housekeeping closes the run once the database answers again.
   */
  private async storeStep(row: AgentRunEntity, sequence: number, step: RunStep): Promise<StoredStep> {
    try {
      return await this.withStoreRetries(row, `store step ${sequence}`, () => this.appendStepOnce(row.uid, sequence, step));
    } catch (error) {
      if (step.kind !== 'end') throw error;
      const fallback: EndStep = {
        ...step,
        status: 'FAILED',
        terminationReason: 'error',
        finalContent: null,
        error: UNSTORABLE_RESULT_MESSAGE,
        errorClass: 'UnstorableResult',
      };
      return this.withStoreRetries(row, `store the fallback END ${sequence}`, () => this.appendStepOnce(row.uid, sequence, fallback));
    }
  }

  /** One attempt; a retry after a write whose answer was lost finds the step stored and does not write it twice. */
  private async appendStepOnce(runUid: number, sequence: number, step: RunStep): Promise<StoredStep> {
    try {
      return await this.store.appendStep(runUid, sequence, step);
    } catch (error) {
      const stored = await this.store.stepsAfter(runUid, sequence - 1).catch(() => []);
      const same = stored.find((candidate) => candidate.sequence === sequence && candidate.kind === step.kind);
      if (same) return same;
      throw error;
    }
  }

  private async withStoreRetries<T>(row: AgentRunEntity, what: string, attempt: () => Promise<T>): Promise<T> {
    const delays = this.options.storeRetryDelaysMs ?? DEFAULT_STORE_RETRY_DELAYS_MS;
    for (let tried = 0; ; tried += 1) {
      try {
        return await attempt();
      } catch (error) {
        // Only the error's class and code: a driver error's text may quote the parameters (the whole answer).
        this.logger.warn({ runId: row.uuid, attempt: tried + 1, errorClass: className(error), code: errorCode(error) }, `could not ${what}`);
        const delay = delays[tried];
        if (delay === undefined) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /**
   * Aborts the in-flight provider call or tool; the loop then ends the run
   * CANCELLED with an END step. A run executed by another instance is asked
   * to stop over the bus; a run nobody executes any more (its owner died) is
   * closed here at once.
   */
  async cancel(uuid: string): Promise<RunView> {
    const row = await this.store.findRun(uuid);
    if (!row) throw new NotFoundError(`No run with id "${uuid}"`, 'id');
    const active = this.active.get(uuid);
    if (active) {
      active.controller.abort();
      await active.done;
    } else if (row.status === 'QUEUED' || row.status === 'RUNNING') {
      await this.cancelElsewhere(row);
    }
    return this.view((await this.store.findRun(uuid)) ?? row);
  }

  async get(uuid: string): Promise<RunView | null> {
    const row = await this.store.findRun(uuid);
    return row ? this.view(row) : null;
  }

  async list(limit: number, offset: number): Promise<RunView[]> {
    checkPage({ limit, offset });
    const rows = await this.store.listRuns(limit, offset);
    const ends = await this.store.endStepsOf(rows.map((r) => r.uid));
    return rows.map((row) => this.viewWith(row, ends.get(row.uid) ?? null));
  }

  /** Stored steps after `afterSequence`; all of them, or one page of `limit` (validated like every page). */
  async steps(runUid: number, afterSequence: number, limit: number | null = null): Promise<StoredStep[]> {
    if (limit !== null) checkPage({ limit, offset: 0 });
    return this.store.stepsAfter(runUid, afterSequence, limit);
  }

  /**
   * Asks the instance running `row` to abort it and waits for its END. Closes
   * the run itself when no live instance holds it: at once for an orphan,
   * or as soon as the owner's lease goes stale.
   */
  private async cancelElsewhere(row: AgentRunEntity): Promise<void> {
    let ended = false;
    const unsubscribe = this.bus.subscribe(row.uuid, (message) => {
      if (message.type === 'step' && message.step.kind === 'end') ended = true;
    });
    try {
      this.bus.publish(row.uuid, { type: 'cancel' });
      const deadline = Date.now() + (this.leaseSeconds + 2) * 1000;
      for (;;) {
        if (ended) return;
        const current = await this.store.findRun(row.uuid);
        if (!current || (current.status !== 'QUEUED' && current.status !== 'RUNNING')) return;
        if (!(await this.store.hasLiveLease(row.uid, this.leaseSeconds)) || Date.now() > deadline) {
          await this.closeOrphan(current, 'CANCELLED', 'cancelled', null);
          return;
        }
        await new Promise((resolve) => setTimeout(resolve, REMOTE_CANCEL_POLL_MS));
      }
    } finally {
      unsubscribe();
    }
  }

  private get leaseSeconds(): number {
    return this.options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  }

  /** Renews this instance's leases and closes runs whose owner died, until `stop()`. */
  startHousekeeping(): void {
    if (this.heartbeatTimer) return;
    this.heartbeatTimer = setInterval(() => {
      const uids = [...this.active.values()].map((run) => run.uid);
      const work = this.store.heartbeat(this.instanceId, uids).then(() => this.recoverInterrupted());
      work.catch((error: unknown) => this.logger.warn({ errorClass: className(error), code: errorCode(error) }, 'run housekeeping failed; will retry'));
    }, Math.max(250, (this.leaseSeconds * 1000) / 3));
    this.heartbeatTimer.unref();
  }

  stopHousekeeping(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
  }

  /** Waits for every run of this process to finish (graceful shutdown, tests). */
  async drain(cancel: boolean): Promise<void> {
    const uuids = new Set(this.active.keys());
    const runs = [...this.active.values()];
    if (cancel) for (const run of runs) run.controller.abort();
    await Promise.allSettled(runs.map((run) => run.done));
    // The watchers of these runs have their END now; let them hand it over before the sockets close (bounded).
    const deadline = Date.now() + 2_000;
    while ([...this.quietWatchers].some((watcher) => uuids.has(watcher.uuid)) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await new Promise((resolve) => setImmediate(resolve));
  }

  /**
   * A run left RUNNING or QUEUED by a process that died — no lease, or a lease
   * its owner stopped renewing — is FAILED, reason `interrupted`, with an END step.
   */
  async recoverInterrupted(): Promise<number> {
    const rows = await this.store.orphanedRuns(this.leaseSeconds);
    let closed = 0;
    for (const row of rows) {
      if (this.active.has(row.uuid)) continue;
      if (await this.closeOrphan(row, 'FAILED', 'interrupted', 'The server stopped while this run was in progress.')) {
        closed += 1;
        this.logger.warn({ runId: row.uuid }, 'marked an interrupted run as failed');
      }
    }
    return closed;
  }

  /**
   * The trace of a run: stored steps after `afterSequence`, then live ones.
   * The live listener is attached before the table is read, so nothing falls
   * between the two; sequence numbers drop duplicates and reveal gaps, which
   * are filled from the table.
   */
  async openTrace(uuid: string, afterSequence: number): Promise<AsyncIterableIterator<StoredStep | SubscriberLaggedError>> {
    const row = await this.store.findRun(uuid);
    if (!row) throw new NotFoundError(`No run with id "${uuid}"`, 'runId');
    const queue = new BoundedQueue<StoredStep | typeof RECHECK>(this.options.watcherQueueSize);
    return releasing(this.trace(row, afterSequence, queue), queue);
  }

  /** Bus listeners (trace and delta watchers) of a run in this process. */
  watcherCount(uuid: string): number {
    return this.bus.listenerCount(uuid);
  }

  /**
   * Live watchers that heard nothing for a while are told to read the table:
   * one timer for all of them. A watcher counts as quiet from its last bus
   * message; the bus announces its own reconnects as well.
   */
  private readonly quietWatchers = new Set<TraceWatcher>();
  private quietTimer: NodeJS.Timeout | null = null;

  private watchQuiet(watcher: TraceWatcher): () => void {
    this.quietWatchers.add(watcher);
    const recheckMs = this.options.watcherRecheckMs ?? DEFAULT_WATCHER_RECHECK_MS;
    if (!this.quietTimer) {
      this.quietTimer = setInterval(() => {
        const now = Date.now();
        for (const quiet of this.quietWatchers) {
          if (now - quiet.heardAt >= recheckMs) {
            quiet.heardAt = now;
            quiet.wake();
          }
        }
      }, Math.max(50, recheckMs / 2));
      this.quietTimer.unref();
    }
    return () => {
      this.quietWatchers.delete(watcher);
      if (this.quietWatchers.size === 0 && this.quietTimer) {
        clearInterval(this.quietTimer);
        this.quietTimer = null;
      }
    };
  }

  private async *trace(row: AgentRunEntity, afterSequence: number, queue: BoundedQueue<StoredStep | typeof RECHECK>): AsyncGenerator<StoredStep | SubscriberLaggedError> {
    const uuid = row.uuid;
    const watcher: TraceWatcher = { uuid, heardAt: Date.now(), wake: () => queue.push(RECHECK) };
    const unsubscribe = this.bus.subscribe(uuid, (message) => {
      if (message.type === 'step') {
        watcher.heardAt = Date.now();
        queue.push(message.step);
      } else if (message.type === 'reconnected') {
        // Whatever was published while the bus was away is only in the table now.
        queue.push(RECHECK);
      }
    });
    const stopWatchingQuiet = this.watchQuiet(watcher);
    let last = Math.max(0, afterSequence);
    try {
      for (const step of await this.store.stepsAfter(row.uid, last)) {
        yield step;
        last = step.sequence;
        if (step.kind === 'end') return;
      }
      // A client resuming at or after END has nothing left to receive. The row was
      // read before the listener was attached, and END shares the status update's
      // transaction, so a finished status here means END is already stored.
      if (!isOpen(row.status)) return;
      for (;;) {
        const next = await queue.next();
        if (next.done) {
          if (queue.hasOverflowed) yield lagged(last);
          return;
        }
        const item = next.value;
        if (item === RECHECK) {
          // Fill from the table: messages may have been lost on the way.
          for (const missed of await this.store.stepsAfter(row.uid, last)) {
            yield missed;
            last = missed.sequence;
            if (missed.kind === 'end') return;
          }
          // Nothing stored after `last`, and the run is over: its END is at or before `last`.
          const current = await this.store.findRun(uuid);
          if (!current || !isOpen(current.status)) return;
          continue;
        }
        const step = item;
        if (step.sequence <= last) {
          // The END of a run whose trace was asked from beyond its last sequence: nothing more will come.
          if (step.kind === 'end') return;
          continue;
        }
        if (step.sequence > last + 1) {
          for (const missed of await this.store.stepsAfter(row.uid, last)) {
            if (missed.sequence >= step.sequence) break;
            yield missed;
            last = missed.sequence;
          }
        }
        yield step;
        last = step.sequence;
        if (step.kind === 'end') return;
      }
    } finally {
      stopWatchingQuiet();
      unsubscribe();
      queue.close();
    }
  }

  /** Live content/thinking deltas of a running run; not stored, so there is nothing to replay. Ends with the run. */
  async openDeltas(uuid: string): Promise<AsyncIterableIterator<RunDelta | SubscriberLaggedError>> {
    const row = await this.store.findRun(uuid);
    if (!row) throw new NotFoundError(`No run with id "${uuid}"`, 'runId');
    const queue = new BoundedQueue<RunDelta | null>(this.options.watcherQueueSize * 16);
    return releasing(this.deltas(row, queue), queue);
  }

  private async *deltas(row: AgentRunEntity, queue: BoundedQueue<RunDelta | null>): AsyncGenerator<RunDelta | SubscriberLaggedError> {
    const uuid = row.uuid;
    if (!this.active.has(uuid) && row.status !== 'QUEUED' && row.status !== 'RUNNING') return;
    const unsubscribe = this.bus.subscribe(uuid, (message) => {
      if (message.type === 'delta') queue.push(message.delta);
      else if (message.type === 'step' && message.step.kind === 'end') queue.push(null);
    });
    try {
      // The run may have ended between the first read and the listener: look again now that nothing can be missed.
      const current = await this.store.findRun(uuid);
      if (current && current.status !== 'QUEUED' && current.status !== 'RUNNING') return;
      for (;;) {
        const next = await queue.next();
        if (next.done) {
          if (queue.hasOverflowed) yield new SubscriberLaggedError('You fell behind the live output; the stored steps (run.steps or runTrace) hold every finished call.');
          return;
        }
        if (next.value === null) return;
        yield next.value;
      }
    } finally {
      unsubscribe();
      queue.close();
    }
  }

  view(row: AgentRunEntity): Promise<RunView> {
    return this.store.endStepsOf([row.uid]).then((ends) => this.viewWith(row, ends.get(row.uid) ?? null));
  }

  private viewWith(row: AgentRunEntity, end: StoredStep | null): RunView {
    const active = this.active.get(row.uuid);
    return {
      row,
      dryRun: active?.dryRun ?? end?.dryRun === true,
      finalContent: typeof end?.finalContent === 'string' ? end.finalContent : null,
      error: typeof end?.error === 'string' ? end.error : null,
    };
  }

  /** Closes an open run that no loop executes, after its last stored step. */
  private async closeOrphan(row: AgentRunEntity, status: 'FAILED' | 'CANCELLED', reason: string, error: string | null): Promise<boolean> {
    return this.closeOutsideLoop(row, await this.store.lastSequence(row.uid), status, reason, error);
  }

  private closeAsFailed(row: AgentRunEntity, lastSequence: number, reason: string, error: string): Promise<boolean> {
    return this.closeOutsideLoop(row, lastSequence, 'FAILED', reason, error);
  }

  private async closeOutsideLoop(row: AgentRunEntity, lastSequence: number, status: 'FAILED' | 'CANCELLED', reason: string, error: string | null): Promise<boolean> {
    const end = {
      kind: 'end',
      round: 0,
      durationMs: 0,
      status,
      // `interrupted` and `error` end runs outside the loop, so the loop's own reason type does not list them.
      terminationReason: reason,
      iterations: row.iterations,
      truncated: row.truncated,
      finalContent: null,
      promptTokens: row.totalPromptTokens,
      completionTokens: row.totalCompletionTokens,
      totalTokens: row.totalTokens,
      estimatedCost: row.estimatedCost,
      error,
      errorClass: reason === 'interrupted' ? 'Interrupted' : reason === 'cancelled' ? null : 'InternalError',
      dryRun: false,
    } as unknown as EndStep;
    const stored = await this.store.closeIfOpen(row.uid, lastSequence + 1, end);
    if (stored) this.bus.publish(row.uuid, { type: 'step', step: stored });
    if (stored) this.options.observer?.runClosed(status);
    return stored !== null;
  }
}

/**
 * A watcher's generator whose return() takes effect at once. An async
 * generator waiting inside its body (here: for the next step) handles return()
 * only after that wait ends, so a client that left while its run was idle kept
 * its bus listener until the next step. Closing the queue ends the wait first.
 */
function releasing<T>(generator: AsyncGenerator<T>, queue: { close(): void }): AsyncIterableIterator<T> {
  const iterator: AsyncIterableIterator<T> = {
    next: () => generator.next(),
    return: (value?: unknown) => {
      queue.close();
      return generator.return(value as T);
    },
    throw: (error?: unknown) => {
      queue.close();
      return generator.throw(error);
    },
    [Symbol.asyncIterator]: () => iterator,
  };
  return iterator;
}

interface TraceWatcher {
  uuid: string;
  /** When it last heard from the bus. */
  heardAt: number;
  wake(): void;
}

/** A watcher's signal to read the table instead of waiting for the bus. */
const RECHECK = Symbol('recheck');

function isOpen(status: string): boolean {
  return status === 'QUEUED' || status === 'RUNNING';
}

function lagged(lastSequence: number): SubscriberLaggedError {
  return new SubscriberLaggedError(
    `You fell too far behind the live trace; resubscribe with afterSequence: ${lastSequence} to continue without a gap.`,
    'afterSequence',
  );
}

function toSkillInput(skill: SkillEntity): SkillInput {
  return { identifier: skill.identifier, name: skill.name, body: skill.body, bodyChecksum: skill.bodyChecksum, enabled: skill.enabled, orphaned: skill.orphaned };
}

/** behaviour.md §5 without the system prompt, which the loop sends as message 0. */
function callOptionsFor(
  configuration: ConfigurationEntity,
  model: ModelEntity | null,
  activeSnippets: ActiveSnippetIndex,
  overrides: Record<string, unknown>,
): CallOptions {
  const { system_prompt: _systemPrompt, ...options } = callOptionsOf(configuration, model, activeSnippets, overrides);
  return { ...options, model: typeof options.model === 'string' ? options.model : (model?.modelId ?? '') };
}

/** Used only for a dry run of a configuration without a model: the loop never calls it. */
const unusableAdapter: ChatAdapter = {
  adapterType: 'custom',
  chat: () => Promise.reject(new Error('no model configured')),
  // eslint-disable-next-line require-yield
  stream: async function* () {
    throw new Error('no model configured');
  },
};

function className(error: unknown): string {
  return error instanceof Error ? error.constructor.name || error.name : typeof error;
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
