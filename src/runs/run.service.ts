/**
 * Drives agent runs in the server: starts them (prepared by RunPreparer),
 * records their steps (persist, then publish), decides their approvals,
 * cancels them, and takes over the runs of instances that died. Reading runs
 * and serving their traces is RunReader's.
 */
import crypto from 'node:crypto';
import type { Caller } from '../auth/roles';
import type { ConfigurationService } from '../configurations/configuration.service';
import type { PagingCursors } from '../db/keyset';
import type { Logger } from '../logger';
import type { ChatAdapter } from '../providers/adapters/types';
import type { ModelService } from '../providers/model.service';
import type { ProviderService } from '../providers/provider.service';
import { BadUserInputError, ConflictError, NotFoundError } from '../shared/errors';
import type { ReleaseService } from '../releases/release.service';
import type { SkillService } from '../skills/skill.service';
import type { SnippetService } from '../snippets/snippet.service';
import type { AgentRunEntity } from './agent-run.entity';
import { INTERNAL_ERROR_MESSAGE, RunTakenOver, clampMaxRounds, driveRun, type AgentLoopInput, type StepExtras } from './engine/agent-loop';
import { approvalTimeoutStep, isOpenRunState, rebuildProgress, type RunProgress } from './engine/run-machine';
import { storedSpellings } from './run-status';
import { unixNow } from '../shared/time';
import type { ApprovalStep, EndStep, RequestedToolCall, RunDelta, RunStep } from './engine/run-step';
import { RunReader, type RunView } from './run-reader';
import { RunPreparer, type PreparedRun, type StartRunRequest, type StoredRunRequest } from './run-preparer';
import { LeaseClock, leaseIsStale } from './lease-clock';
import { LeaseLostError, RunStore, type RunEndedHook, type RunProvenance } from './run-store';
import type { ExternalToolSource, ToolInfo, ToolRegistry } from './tools/tool-registry';
import { preciseNow, type RunObservation, type RunObserver } from '../operations/run-observer';
import type { StoredStep, TraceBus } from './trace-bus';

export type { StartRunRequest } from './run-preparer';
export type { RunPageRequest, RunView } from './run-reader';

/** One decision of `resolveToolApproval`. */
export interface ToolDecisionRequest {
  toolCallId: string;
  approve: boolean;
  reason?: string | null;
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
  /** Writes and reads the cursors of runsConnection. */
  cursors: PagingCursors;
}

interface ActiveRun {
  uid: number;
  controller: AbortController;
  dryRun: boolean;
  done: Promise<void>;
}

const DEFAULT_LEASE_SECONDS = 15;
const DEFAULT_STORE_RETRY_DELAYS_MS: readonly number[] = [100, 500, 2_000];
/** How often cancelRun looks whether the owner of a run ended it, or died. */
const REMOTE_CANCEL_POLL_MS = 150;
/** How long cancelRun waits for a run's END before it answers that the run's driver will store it. */
const CANCEL_ANSWER_MS = 1_500;

/** The END a run gets when its real END cannot be stored (too large, values out of range): small and always storable. */
export const UNSTORABLE_RESULT_MESSAGE = 'The run ended, but its result could not be stored.';

export class RunService {
  readonly store: RunStore;
  /** Reads runs and serves their traces (this service tells it which runs it drives). */
  readonly reader: RunReader;
  private readonly preparer: RunPreparer;
  readonly instanceId = crypto.randomUUID();
  private readonly active = new Map<string, ActiveRun>();
  /** How long this instance may count on the leases of the runs it drives (lets a TOOL step's write overlap the next call). */
  private readonly leases: LeaseClock;
  private heartbeatTimer: NodeJS.Timeout | null = null;

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
    this.store = new RunStore(dataSource, options.onRunEnded ?? null);
    this.preparer = new RunPreparer(configurations, models, providers, snippets, skills, releases, tools, logger, options);
    this.leases = new LeaseClock(options.leaseSeconds ?? DEFAULT_LEASE_SECONDS);
    this.reader = new RunReader(this.store, bus, { has: (uuid) => this.active.has(uuid), dryRun: (uuid) => this.active.get(uuid)?.dryRun }, options);
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
   * Validates everything, stores the run as QUEUED with its request, and starts driving it without waiting.
   * `origin.trace` is the starting request's trace span (opaque), for the run's trace.
   */
  async start(input: StartRunRequest, caller: Caller, origin: { trace?: unknown } = {}): Promise<RunView> {
    // Which release a run sends is decided here, from its label; never taken from a caller.
    const request: StartRunRequest = { ...input, releaseId: null };
    this.preparer.checkRequest(request, caller);
    const prepared = await this.preparer.prepare(request, true);
    const release = prepared.release;
    const stored: StoredRunRequest = { request: { ...normalisedRequest(request), ...(release ? { label: release.label, releaseId: release.id } : {}) }, startedBy: caller.name };
    const provenance: RunProvenance = release
      ? { releaseId: release.id, label: release.label, snippets: release.snippets }
      : { releaseId: null, label: null, snippets: await this.releases.composedVersions(prepared.composedSnippets) };
    const leaseAt = Date.now();
    const row = await this.store.createRun(
      { uuid: crypto.randomUUID(), configurationUid: prepared.configuration.uid, configurationIdentifier: prepared.configuration.identifier },
      this.instanceId,
      JSON.stringify(stored),
      provenance,
    );
    this.leases.taken(row.uid, leaseAt);
    this.drive(row, prepared, null, origin.trace ?? null);
    this.logger.info({ runId: row.uuid, configuration: prepared.configuration.identifier, release: release?.id, dryRun: prepared.dryRun, by: caller.name }, 'run started');
    return { row, dryRun: prepared.dryRun, finalContent: null, error: null, pendingToolCalls: [] };
  }

  /**
   * Drives a run in this process until it ends or waits for a person:
   * `resume` null starts it; otherwise it goes on from those stored steps.
   */
  private drive(row: AgentRunEntity, prepared: PreparedRun, resume: { steps: StoredStep[]; afterCrash: boolean } | null, requestTrace: unknown = null): void {
    const controller = new AbortController();
    // cancelRun may arrive at another instance; it asks over the bus.
    const stopListening = this.bus.onCancelRequest(row.uuid, () => controller.abort());
    const observation = this.options.observer?.runStarted({
      runId: row.uuid,
      configuration: prepared.configuration.identifier,
      providerType: prepared.providerType,
      model: prepared.dryRun ? null : prepared.loopInput.callOptions.model || null,
      dryRun: prepared.dryRun,
      requestTrace,
    });
    const input: AgentLoopInput = {
      ...prepared.loopInput,
      signal: controller.signal,
      ...(resume ? { resume: { steps: resume.steps as unknown as RunStep[], afterCrash: resume.afterCrash } } : {}),
    };
    const lastSequence = resume ? (resume.steps[resume.steps.length - 1]?.sequence ?? 0) : 0;
    const done = this.execute(row, input, lastSequence, observation).finally(() => {
      this.leases.released(row.uid);
      stopListening();
      this.active.delete(row.uuid);
    });
    this.active.set(row.uuid, { uid: row.uid, controller, dryRun: prepared.dryRun, done });
  }

  private async execute(row: AgentRunEntity, input: AgentLoopInput, lastSequence: number, observation?: RunObservation): Promise<void> {
    // Let startRun answer before the first step is written.
    await new Promise((resolve) => setImmediate(resolve));
    let sequence = lastSequence;
    const recordStep = async (step: RunStep, extras?: StepExtras): Promise<void> => {
      // Persist, then publish: a watcher that arrives late reads what it missed from the table.
      // The sequence number advances only once the step is stored, so a failed write leaves no gap.
      const handedOverAt = observation ? preciseNow() : 0;
      const stored = await this.storeStep(row, sequence + 1, step, extras);
      sequence = stored.sequence;
      this.bus.publish(row.uuid, { type: 'step', step: stored });
      // The step as stored: the loop's own, or the small FAILED END that replaced one that could not be stored.
      observation?.step(stored as unknown as RunStep, handedOverAt);
    };
    try {
      if (input.resume === undefined) await this.withStoreRetries(row, 'mark the run running', () => this.store.markRunning(row.uid));
      const outcome = await driveRun(input, {
        recordStep,
        mayOverlapToolCall: () => this.leases.mayOverlap(row.uid),
        onDelta: (delta: RunDelta) => this.bus.publish(row.uuid, { type: 'delta', delta }),
        logger: { warn: (obj, msg) => this.logger.warn({ runId: row.uuid, ...obj }, msg), error: (obj, msg) => this.logger.error({ runId: row.uuid, ...obj }, msg) },
      });
      if (outcome.status === 'WAITING_FOR_APPROVAL') {
        this.logger.info({ runId: row.uuid, pending: outcome.pendingToolCalls.map((call) => call.name) }, 'run waits for approval');
      } else if (outcome.status === 'TAKEN_OVER') {
        this.logger.warn({ runId: row.uuid }, 'another instance took the run over (this one had stopped renewing its lease); stopped driving it');
      } else {
        this.logger.info({ runId: row.uuid, status: outcome.status, reason: outcome.terminationReason, tokens: outcome.totalTokens }, 'run finished');
      }
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
   * Decides every pending call of a waiting run at once, stores the
   * decisions as an APPROVAL step and drives the run on in this process.
   */
  async resolveToolApproval(uuid: string, decisions: readonly ToolDecisionRequest[], caller: Caller): Promise<RunView> {
    const row = await this.store.findRun(uuid);
    if (!row) throw new NotFoundError(`No run with id "${uuid}"`, 'runId');
    if (row.status !== 'WAITING_FOR_APPROVAL') throw new ConflictError(`The run is ${row.status}, not waiting for approval`, 'runId');
    const steps = await this.store.stepsAfter(row.uid, 0);
    const stored = await this.storedRequest(row);
    if (!stored) throw new ConflictError('The run cannot go on: what it was started with is not stored', 'runId');
    const progress = rebuildProgress(steps as unknown as RunStep[], { maxRounds: clampMaxRounds(stored.request.maxRounds) });
    const pending = pendingCallsOf(progress);
    if (pending.length === 0) throw new ConflictError('The run has no pending tool calls', 'runId');
    const byId = new Map<string, ToolDecisionRequest>();
    for (const decision of decisions) {
      if (!pending.some((call) => call.id === decision.toolCallId)) throw new BadUserInputError(`No pending tool call "${decision.toolCallId}" in this run`, 'decisions');
      if (byId.has(decision.toolCallId)) throw new BadUserInputError(`Tool call "${decision.toolCallId}" is decided twice`, 'decisions');
      if (decision.reason != null && decision.reason.length > 1000) throw new BadUserInputError('A reason is at most 1000 characters', 'decisions');
      byId.set(decision.toolCallId, decision);
    }
    const undecided = pending.filter((call) => !byId.has(call.id));
    if (undecided.length > 0) throw new BadUserInputError(`Every pending call must be decided at once; missing: ${undecided.map((call) => call.id).join(', ')}`, 'decisions');

    const step: ApprovalStep = {
      kind: 'approval',
      round: progress.round,
      durationMs: 0,
      decisions: pending.map((call) => {
        const decision = byId.get(call.id)!;
        return { toolCallId: call.id, approved: decision.approve, reason: decision.reason ?? null, decidedBy: caller.name };
      }),
    };
    const last = steps[steps.length - 1]?.sequence ?? 0;
    const leaseAt = Date.now();
    const decided = await this.store.resumeWithDecisions(row.uid, last + 1, step, this.instanceId);
    if (decided) this.leases.taken(row.uid, leaseAt);
    if (!decided) throw new ConflictError('The run is no longer waiting for approval (decided or cancelled meanwhile)', 'runId');
    this.bus.publish(row.uuid, { type: 'step', step: decided });
    this.logger.info({ runId: row.uuid, by: caller.name, approved: step.decisions!.filter((d) => d.approved).length, denied: step.decisions!.filter((d) => !d.approved).length }, 'tool calls decided');
    const current = (await this.store.findRun(uuid)) ?? row;
    await this.goOn(current, stored, [...steps, decided], false);
    return this.reader.view(current);
  }

  /**
   * Waiting runs whose approval timeout has passed (on this instance or any
   * other, before or after a restart) get an APPROVAL step refusing every
   * pending call as not approved, and go on in this instance. Race-free with
   * a person deciding and with other instances' housekeeping: the step is
   * stored only while the run still waits on that same deadline, so exactly
   * one of them takes the run back up. Returns how many runs timed out here.
   */
  async expireApprovals(): Promise<number> {
    const now = unixNow();
    let handled = 0;
    for (const row of await this.store.expiredApprovals(now)) {
      if (this.active.has(row.uuid)) continue;
      const stored = await this.storedRequest(row);
      const steps = await this.store.stepsAfter(row.uid, 0);
      const last = steps[steps.length - 1]?.sequence ?? 0;
      const progress = stored ? rebuildProgress(steps as unknown as RunStep[], { maxRounds: clampMaxRounds(stored.request.maxRounds) }) : null;
      const pending = progress ? pendingCallsOf(progress) : [];
      if (!stored || !progress || pending.length === 0) {
        // Nothing to go on from: it ends as a run that cannot be resumed does.
        await this.closeOutsideLoop(row, last, 'FAILED', 'interrupted', 'The run waited for approval, but cannot go on: what it was started with is not stored.', storedSpellings('WAITING_FOR_APPROVAL'));
        continue;
      }
      const step = approvalTimeoutStep(pending, progress.round, stored.request.approvalTimeoutSeconds ?? null);
      const leaseAt = Date.now();
      const decided = await this.store.resumeWithDecisions(row.uid, last + 1, step, this.instanceId, now);
      if (!decided) continue;
      this.leases.taken(row.uid, leaseAt);
      this.bus.publish(row.uuid, { type: 'step', step: decided });
      this.logger.info({ runId: row.uuid, pending: pending.length }, 'approval timed out; the pending calls are refused');
      handled += 1;
      const current = (await this.store.findRun(row.uuid)) ?? row;
      await this.goOn(current, stored, [...steps, decided], false);
    }
    return handled;
  }

  /** Prepares a run again from its stored request and drives it on from `steps`; a run that cannot be prepared any more ends FAILED. */
  private async goOn(row: AgentRunEntity, stored: StoredRunRequest, steps: StoredStep[], afterCrash: boolean): Promise<void> {
    let prepared: PreparedRun;
    try {
      prepared = await this.preparer.prepare(stored.request, false);
    } catch (error) {
      const message = error instanceof Error && 'extensions' in error ? error.message : INTERNAL_ERROR_MESSAGE;
      this.logger.warn({ runId: row.uuid, errorClass: className(error) }, 'a run could not be prepared to go on');
      await this.closeOutsideLoop(row, steps[steps.length - 1]?.sequence ?? 0, 'FAILED', 'error', message);
      return;
    }
    this.drive(row, prepared, { steps, afterCrash });
  }

  private async storedRequest(row: AgentRunEntity): Promise<StoredRunRequest | null> {
    const text = await this.store.findRequest(row.uid);
    if (text === null) return null;
    try {
      return JSON.parse(text) as StoredRunRequest;
    } catch {
      return null;
    }
  }

  /**
   * Stores one step, retrying while the database refuses. An END that cannot
   * be stored as it is (an answer over the database's packet limit, values a
   * column cannot hold) is replaced by a small FAILED END, so every run ends.
   * When even that fails, the run's lease is no longer renewed and
   * housekeeping closes the run once the database answers again.
   */
  private async storeStep(row: AgentRunEntity, sequence: number, step: RunStep, extras?: StepExtras): Promise<StoredStep> {
    try {
      return await this.withStoreRetries(row, `store step ${sequence}`, () => this.appendStepOnce(row.uid, sequence, step, extras));
    } catch (error) {
      // Another instance holds the run now: this one stops, writing nothing more (no fallback END either).
      if (error instanceof LeaseLostError) throw new RunTakenOver();
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
  private async appendStepOnce(runUid: number, sequence: number, step: RunStep, extras?: StepExtras): Promise<StoredStep> {
    try {
      // Written only while this instance holds the run's lease (see RunStore.insertAsOwner).
      return await this.store.appendStep(runUid, sequence, step, extras, this.instanceId);
    } catch (error) {
      // The step at this sequence, if any, is the new owner's: never take it for ours.
      if (error instanceof LeaseLostError) throw error;
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
        if (error instanceof LeaseLostError) throw error;
        // Only the error's class and code: a driver error's text may quote the parameters (the whole answer).
        this.logger.warn({ runId: row.uuid, attempt: tried + 1, errorClass: className(error), code: errorCode(error) }, `could not ${what}`);
        const delay = delays[tried];
        if (delay === undefined) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }

  /**
   * Ends an open run CANCELLED with an END step, answering within about
   * `CANCEL_ANSWER_MS`. A run driven here is aborted and its loop stores the
   * END. A run driven by another live instance is asked over the bus to stop,
   * and its END awaited. A run nobody drives any more is claimed (as a
   * takeover claims it) and closed here at once: no lease, a stale one, or
   * one whose holder heard no cancel request (it died; without Redis, it was
   * an earlier process of this service). A waiting run is closed here. When
   * the run's driver has not stored the END in time, the answer is a
   * CONFLICT saying that it will: the cancel is also stored with the run's
   * request, so an instance that takes the run over later ends it CANCELLED.
   */
  async cancel(uuid: string): Promise<RunView> {
    const row = await this.store.findRun(uuid);
    if (!row) throw new NotFoundError(`No run with id "${uuid}"`, 'id');
    if (isOpenRunState(row.status)) await this.stopRun(row);
    return this.reader.view((await this.store.findRun(uuid)) ?? row);
  }

  private async stopRun(row: AgentRunEntity): Promise<void> {
    const deadline = Date.now() + CANCEL_ANSWER_MS;
    let ended = false;
    const unsubscribe = this.bus.subscribe(row.uuid, (message) => {
      if (message.type === 'step' && message.step.kind === 'end') ended = true;
    });
    let recorded = false;
    /** The lease holder that heard none of the cancel requests asked so far, and how many. */
    let silent = null as { holder: string; asks: number } | null;
    try {
      for (;;) {
        const local = this.active.get(row.uuid);
        if (local) {
          local.controller.abort();
          if (!recorded) recorded = await this.recordCancelRequest(row);
          if (await settlesBefore(local.done, deadline)) return;
          throw new ConflictError(
            'The run was stopped, but its END is not stored yet (the database is slow to take it); it ends CANCELLED as soon as it is. Query the run or watch runTrace for its END.',
            'id',
          );
        }
        if (ended) return;
        const current = await this.store.findRun(row.uuid);
        if (!current || !isOpenRunState(current.status)) return;
        if (current.status === 'WAITING_FOR_APPROVAL') {
          // Nobody drives a waiting run: close it here, unless a decision or the timeout takes it back up meanwhile.
          if (await this.closeWaiting(current)) return;
        } else {
          if (!recorded) recorded = await this.recordCancelRequest(current);
          const lease = await this.store.leaseOf(current.uid);
          if (lease === null || leaseIsStale(lease.heartbeatAt, unixNow(), this.leaseSeconds)) {
            if (await this.cancelAsNewOwner(current, null)) return;
          } else if (lease.instanceId !== this.instanceId) {
            // (A lease of this instance without a loop here: the run is being taken up here; the next pass aborts it.)
            const heard = await this.bus.requestCancel(row.uuid);
            silent = heard === 0 ? { holder: lease.instanceId, asks: silent?.holder === lease.instanceId ? silent.asks + 1 : 1 } : null;
            // Asked twice, a little apart, so that a driver whose subscription is still being made is not taken for gone.
            if (silent !== null && silent.asks >= 2 && (await this.cancelAsNewOwner(current, lease.instanceId))) return;
          }
        }
        if (Date.now() >= deadline) {
          throw new ConflictError(
            'The run is driven by another instance, which was asked to stop it but has not stored its END yet (it is busy or paused). The run ends CANCELLED: by that instance as soon as it goes on, or, should that instance stop first, by the instance that takes the run over. Query the run or watch runTrace for its END.',
            'id',
          );
        }
        await new Promise((resolve) => setTimeout(resolve, REMOTE_CANCEL_POLL_MS));
      }
    } finally {
      unsubscribe();
    }
  }

  /** Stores the cancel with the run's request, for an instance that takes the run up later; false when the run has no stored request. */
  private async recordCancelRequest(row: AgentRunEntity): Promise<boolean> {
    const stored = await this.storedRequest(row);
    if (!stored) return false;
    if (stored.cancelRequested !== true) await this.store.replaceRequest(row.uid, JSON.stringify({ ...stored, cancelRequested: true } satisfies StoredRunRequest));
    return true;
  }

  /**
   * Claims a run nobody drives (no lease, a stale one, or one held by
   * `goneHolder`, which heard no cancel request) and closes it CANCELLED
   * here; false when another instance claimed it first or it ended meanwhile.
   */
  private async cancelAsNewOwner(row: AgentRunEntity, goneHolder: string | null): Promise<boolean> {
    if (!(await this.store.claimOrphan(row.uid, this.instanceId, this.leaseSeconds, { goneHolder, requeue: false }))) return false;
    const closed = await this.closeOrphan(row, 'CANCELLED', 'cancelled', null);
    if (closed) this.logger.warn({ runId: row.uuid, goneHolder }, 'cancelled a run whose instance is gone: took it over and ended it here');
    return closed;
  }

  private get leaseSeconds(): number {
    return this.options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  }

  /** Renews this instance's leases and closes runs whose owner died, until `stop()`. */
  startHousekeeping(): void {
    if (this.heartbeatTimer) return;
    this.heartbeatTimer = setInterval(() => {
      const uids = [...this.active.values()].map((run) => run.uid);
      const heartbeatAt = Date.now();
      const work = this.store
        .heartbeat(this.instanceId, uids)
        .then((renewed) => {
          // Fewer renewed than asked: some run was taken over; which one is unknown here, so none counts as safe for now.
          if (renewed === uids.length) this.leases.renewed(uids, heartbeatAt);
        })
        .then(() => this.recoverInterrupted())
        .then(() => this.expireApprovals())
        .then(() => this.scheduleTakeoverCheck());
      work.catch((error: unknown) => this.logger.warn({ errorClass: className(error), code: errorCode(error) }, 'run housekeeping failed; will retry'));
    }, this.housekeepingIntervalMs);
    this.heartbeatTimer.unref();
  }

  stopHousekeeping(): void {
    if (this.heartbeatTimer) clearInterval(this.heartbeatTimer);
    this.heartbeatTimer = null;
    if (this.takeoverTimer) clearTimeout(this.takeoverTimer);
    this.takeoverTimer = null;
  }

  private get housekeepingIntervalMs(): number {
    return Math.max(250, (this.leaseSeconds * 1000) / 3);
  }

  private takeoverTimer: NodeJS.Timeout | null = null;

  /**
   * Looks for orphans again the moment the oldest lease another instance
   * holds would go stale, when that comes before the next housekeeping
   * pass: a run whose instance died is taken over about one lease period
   * after its last heartbeat, not up to a third of a lease later.
   */
  private async scheduleTakeoverCheck(): Promise<void> {
    if (!this.heartbeatTimer) return;
    const oldest = await this.store.oldestForeignHeartbeat(this.instanceId);
    if (oldest === null) return;
    // Stale once unixNow() - leaseSeconds > heartbeat_at (RunStore.claimOrphan): at the start of that second.
    const delay = (oldest + this.leaseSeconds + 1) * 1000 + 5 - Date.now();
    if (delay >= this.housekeepingIntervalMs || !this.heartbeatTimer) return;
    if (this.takeoverTimer) clearTimeout(this.takeoverTimer);
    this.takeoverTimer = setTimeout(() => {
      this.takeoverTimer = null;
      this.recoverInterrupted().catch((error: unknown) => this.logger.warn({ errorClass: className(error), code: errorCode(error) }, 'run takeover check failed; will retry'));
    }, Math.max(0, delay));
    this.takeoverTimer.unref();
  }

  /** Waits for every run of this process to finish (graceful shutdown, tests). */
  async drain(cancel: boolean): Promise<void> {
    const uuids = new Set(this.active.keys());
    const runs = [...this.active.values()];
    if (cancel) for (const run of runs) run.controller.abort();
    await Promise.allSettled(runs.map((run) => run.done));
    // The watchers of these runs have their END now; let them hand it over before the sockets close (bounded).
    const deadline = Date.now() + 2_000;
    while (this.reader.watchesAny(uuids) && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    await new Promise((resolve) => setImmediate(resolve));
  }

  /**
   * Runs left RUNNING or QUEUED by an instance that died — no lease, or a
   * lease its owner stopped renewing — are claimed by this instance and go
   * on from their last stored step (a provider call in flight is made
   * again; a tool call that may have been running ends the run
   * `interrupted` unless the tool is idempotent). A run whose request is
   * not stored (written by an older version or another program) cannot go
   * on: it is FAILED, reason `interrupted`, with an END step. Returns how
   * many runs were taken over or closed.
   */
  async recoverInterrupted(): Promise<number> {
    const rows = await this.store.orphanedRuns(this.leaseSeconds);
    let handled = 0;
    for (const row of rows) {
      if (this.active.has(row.uuid)) continue;
      const stored = await this.storedRequest(row);
      if (stored === null) {
        if (await this.closeOrphan(row, 'FAILED', 'interrupted', 'The server stopped while this run was in progress.')) {
          handled += 1;
          this.logger.warn({ runId: row.uuid }, 'marked an interrupted run as failed');
        }
        continue;
      }
      if (stored.cancelRequested === true) {
        // Its instance was asked to cancel it and stopped before it could: it ends as asked, not goes on.
        if (await this.cancelAsNewOwner(row, null)) handled += 1;
        continue;
      }
      const leaseAt = Date.now();
      if (!(await this.store.claimOrphan(row.uid, this.instanceId, this.leaseSeconds))) continue;
      this.leases.taken(row.uid, leaseAt);
      const current = await this.store.findRun(row.uuid);
      if (!current || (current.status !== 'QUEUED' && current.status !== 'RUNNING')) continue;
      if (current.status === 'QUEUED') await this.store.markRunning(current.uid);
      handled += 1;
      this.logger.warn({ runId: row.uuid }, 'took over a run whose instance stopped');
      await this.goOn(current, stored, await this.store.stepsAfter(current.uid, 0), true);
    }
    return handled;
  }

  /** Closes an open run that no loop executes, after its last stored step. */
  private async closeOrphan(row: AgentRunEntity, status: 'FAILED' | 'CANCELLED', reason: string, error: string | null): Promise<boolean> {
    return this.closeOutsideLoop(row, await this.store.lastSequence(row.uid), status, reason, error);
  }

  /** Cancels a run that waits for approval; false when it no longer waits (a decision or the timeout took it back up). */
  private async closeWaiting(row: AgentRunEntity): Promise<boolean> {
    return this.closeOutsideLoop(row, await this.store.lastSequence(row.uid), 'CANCELLED', 'cancelled', null, storedSpellings('WAITING_FOR_APPROVAL'));
  }

  private closeAsFailed(row: AgentRunEntity, lastSequence: number, reason: string, error: string): Promise<boolean> {
    return this.closeOutsideLoop(row, lastSequence, 'FAILED', reason, error);
  }

  private async closeOutsideLoop(
    row: AgentRunEntity,
    lastSequence: number,
    status: 'FAILED' | 'CANCELLED',
    reason: string,
    error: string | null,
    onlyIn?: readonly string[],
  ): Promise<boolean> {
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
    const stored = await this.store.closeIfOpen(row.uid, lastSequence + 1, end, onlyIn);
    if (stored) this.bus.publish(row.uuid, { type: 'step', step: stored });
    if (stored) this.options.observer?.runClosed(status);
    return stored !== null;
  }
}

/** The calls of the turn a run waits on; [] when it waits on none. */
function pendingCallsOf(progress: RunProgress): RequestedToolCall[] {
  return progress.openTurn?.approval?.decisions === null ? progress.openTurn.approval.pending : [];
}

/** The request as stored: only what a run needs to be prepared again. */
function normalisedRequest(request: StartRunRequest): StartRunRequest {
  const copy: StartRunRequest = { configuration: request.configuration, prompt: request.prompt };
  for (const key of ['tools', 'forcedSnippets', 'forcedSkills', 'systemPrompt', 'maxRounds', 'maxTokens', 'temperature', 'captureRaw', 'dryRun', 'stream', 'approvalRequired', 'approvalTimeoutSeconds', 'maxTotalTokens', 'maxCost', 'label', 'releaseId'] as const) {
    if (request[key] !== undefined && request[key] !== null) (copy as unknown as Record<string, unknown>)[key] = request[key];
  }
  return copy;
}

/** Whether `promise` settles before the time `deadline` (ms since the epoch); a rejection counts as settled. */
async function settlesBefore(promise: Promise<unknown>, deadline: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), Math.max(0, deadline - Date.now()))));
  try {
    return await Promise.race([promise.then(() => true, () => true), late]);
  } finally {
    clearTimeout(timer);
  }
}

function className(error: unknown): string {
  return error instanceof Error ? error.constructor.name || error.name : typeof error;
}

function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
