/**
 * Watches over runs beyond one loop: cancels them (here, on another live
 * instance, or for an instance that died), renews this instance's leases,
 * takes over the runs of instances that stopped, and drains this process's
 * runs on shutdown. Every run that ends outside its loop ends through
 * `closeRun`, the one close path.
 */
import type { Logger } from '../logger';
import type { RunObserver } from '../operations/run-observer';
import { ConflictError, NotFoundError } from '../shared/errors';
import { unixNow } from '../shared/time';
import type { AgentRunEntity } from './agent-run.entity';
import { isOpenRunState } from './engine/run-machine';
import type { EndStep, TerminationReason } from './engine/loop-step';
import { leaseIsStale } from './lease-clock';
import type { RunApprovals } from './run-approvals';
import { className, errorCode, type RunDriver } from './run-driver';
import type { StoredRunRequest } from './run-preparer';
import type { RunReader, RunView } from './run-reader';
import type { RunStore } from './run-store';
import { storedSpellings } from './run-status';
import type { TraceBus } from './trace-bus';

/** How often cancelRun looks whether the owner of a run ended it, or died. */
const REMOTE_CANCEL_POLL_MS = 150;
/** How long cancelRun waits for a run's END before it answers that the run's driver will store it. */
const CANCEL_ANSWER_MS = 1_500;

/** How a run that no loop drives ends. */
export type RunEndStatus = 'FAILED' | 'CANCELLED';

/**
 * Ends an open run that no loop drives with an END step after `lastSequence`
 * (only while its stored status is one of `onlyIn`, when given), publishes
 * it and counts it; false when the run was no longer open (or no longer in
 * `onlyIn`).
 */
export async function closeRun(
  ctx: { store: RunStore; bus: TraceBus; observer?: RunObserver | null },
  row: AgentRunEntity,
  lastSequence: number,
  status: RunEndStatus,
  reason: TerminationReason,
  error: string | null,
  onlyIn?: readonly string[],
): Promise<boolean> {
  const end: EndStep = {
    kind: 'end',
    round: 0,
    durationMs: 0,
    status,
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
  };
  const stored = await ctx.store.closeIfOpen(row.uid, lastSequence + 1, end, onlyIn);
  if (stored) ctx.bus.publish(row.uuid, { type: 'step', step: stored });
  if (stored) ctx.observer?.runClosed(status);
  return stored !== null;
}

export class RunSupervisor {
  private heartbeatTimer: NodeJS.Timeout | null = null;
  private takeoverTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly store: RunStore,
    private readonly driver: RunDriver,
    private readonly approvals: RunApprovals,
    private readonly bus: TraceBus,
    private readonly reader: RunReader,
    private readonly logger: Logger,
  ) {}

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
        const local = this.driver.local(row.uuid);
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
          if (lease === null || leaseIsStale(lease.heartbeatAt, unixNow(), this.driver.leaseSeconds)) {
            if (await this.cancelAsNewOwner(current, null)) return;
          } else if (lease.instanceId !== this.driver.instanceId) {
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
    const stored = await this.store.storedRequest(row.uid);
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
    if (!(await this.store.claimOrphan(row.uid, this.driver.instanceId, this.driver.leaseSeconds, { goneHolder, requeue: false }))) return false;
    const closed = await this.closeOrphan(row, 'CANCELLED', 'cancelled', null);
    if (closed) this.logger.warn({ runId: row.uuid, goneHolder }, 'cancelled a run whose instance is gone: took it over and ended it here');
    return closed;
  }

  /** Renews this instance's leases and closes runs whose owner died, until `stop()`. */
  startHousekeeping(): void {
    if (this.heartbeatTimer) return;
    this.heartbeatTimer = setInterval(() => {
      const uids = [...this.driver.running().values()].map((run) => run.uid);
      const heartbeatAt = Date.now();
      const work = this.store
        .heartbeat(this.driver.instanceId, uids)
        .then((renewed) => {
          // Fewer renewed than asked: some run was taken over; which one is unknown here, so none counts as safe for now.
          if (renewed === uids.length) this.driver.leases.renewed(uids, heartbeatAt);
        })
        .then(() => this.recoverInterrupted())
        .then(() => this.approvals.expire())
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
    return Math.max(250, (this.driver.leaseSeconds * 1000) / 3);
  }

  /**
   * Looks for orphans again the moment the oldest lease another instance
   * holds would go stale, when that comes before the next housekeeping
   * pass: a run whose instance died is taken over about one lease period
   * after its last heartbeat, not up to a third of a lease later.
   */
  private async scheduleTakeoverCheck(): Promise<void> {
    if (!this.heartbeatTimer) return;
    const oldest = await this.store.oldestForeignHeartbeat(this.driver.instanceId);
    if (oldest === null) return;
    // Stale once unixNow() - leaseSeconds > heartbeat_at (RunStore.claimOrphan): at the start of that second.
    const delay = (oldest + this.driver.leaseSeconds + 1) * 1000 + 5 - Date.now();
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
    const uuids = new Set(this.driver.running().keys());
    const runs = [...this.driver.running().values()];
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
    const rows = await this.store.orphanedRuns(this.driver.leaseSeconds);
    let handled = 0;
    for (const row of rows) {
      if (this.driver.local(row.uuid)) continue;
      const stored = await this.store.storedRequest(row.uid);
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
      if (!(await this.store.claimOrphan(row.uid, this.driver.instanceId, this.driver.leaseSeconds))) continue;
      this.driver.leases.taken(row.uid, leaseAt);
      const current = await this.store.findRun(row.uuid);
      if (!current || (current.status !== 'QUEUED' && current.status !== 'RUNNING')) continue;
      if (current.status === 'QUEUED') await this.store.markRunning(current.uid);
      handled += 1;
      this.logger.warn({ runId: row.uuid }, 'took over a run whose instance stopped');
      await this.driver.resume(current, stored, await this.store.stepsAfter(current.uid, 0), { afterCrash: true });
    }
    return handled;
  }

  /** Closes an open run that no loop executes, after its last stored step. */
  private async closeOrphan(row: AgentRunEntity, status: RunEndStatus, reason: TerminationReason, error: string | null): Promise<boolean> {
    return this.driver.close(row, await this.store.lastSequence(row.uid), status, reason, error);
  }

  /** Cancels a run that waits for approval; false when it no longer waits (a decision or the timeout took it back up). */
  private async closeWaiting(row: AgentRunEntity): Promise<boolean> {
    return this.driver.close(row, await this.store.lastSequence(row.uid), 'CANCELLED', 'cancelled', null, storedSpellings('WAITING_FOR_APPROVAL'));
  }
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
