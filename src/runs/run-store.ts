/**
 * The run tables: `tx_nrllm_agentrun` and `tx_nrllm_agentrun_event`.
 * A step is written with its sequence number before anyone is told about it.
 * The reads are RunQueries' (run-queries.ts); this class adds the writes.
 */
import type { DataSource, EntityManager, QueryRunner } from 'typeorm';
import { writeWithValues } from '../db/large-values';
import { ParameterWrites } from '../db/parameter-writes';
import { unixNow } from '../shared/time';
import { AgentRunEventEntity } from './agent-run-event.entity';
import { AgentRunEntity } from './agent-run.entity';
import { RunLeaseEntity } from './run-lease.entity';
import { RunProvenanceEntity } from './run-provenance.entity';
import { RunRequestEntity } from './run-request.entity';
import { RunApprovalDeadlineEntity } from './run-approval-deadline.entity';
import type { ApprovalStep, EndStep, LoopStep, RequestStep } from './engine/loop-step';
import { withoutHistory } from './engine/history-sent';
import type { StoredStep } from './trace-bus';
import { asLoopSteps, RUN_OWNER_MARK, RunQueries, type RunProvenance } from './run-queries';
import type { HistorySource, StoredRunRequest } from './run-preparer';
import { storedCost, storedInt } from './engine/usage-limits';
import { OPEN_STORED_STATUSES, storedSpellings } from './run-status';

export { asLoopStep, asLoopSteps, RUN_KEY_KINDS, RUN_LIST, RUN_OWNER_MARK, RunQueries, toStoredStep, type RunListFilter, type RunProvenance } from './run-queries';

const OPEN = [...OPEN_STORED_STATUSES];

/** See RunStore.waitingRun. */
export interface WaitingRun {
  row: AgentRunEntity;
  request: StoredRunRequest | null;
  steps: StoredStep[];
  loopSteps: LoopStep[];
}

export interface EndedRun {
  id: string;
  configuration: string;
  status: string;
  terminationReason: string;
  iterations: number;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  estimatedCost: number | null;
  error: string | null;
  dryRun: boolean;
  finishedAt: string;
  /** The task identifier of a task run; null otherwise. */
  task: string | null;
}

/**
 * Told of a run's END inside the transaction that stores it, so what it
 * writes commits with the END or not at all; `loadRun` reads the finished
 * run (call it only when needed); `ended` is the END as stored.
 */
export type RunEndedHook = (manager: EntityManager, loadRun: () => Promise<EndedRun | null>, ended: { runUid: number; end: EndStep }) => Promise<void>;

/** Writes what belongs to a new run inside the transaction that stores it (a conversation's user message); throwing stores nothing. */
export type RunCreatedHook = (manager: EntityManager, run: { uid: number; uuid: string }) => Promise<void>;

export class RunStore extends RunQueries {
  /** A run's own writes, their values as parameters (parameter-writes says why). */
  private readonly writes: ParameterWrites;

  constructor(
    dataSource: DataSource,
    private readonly onRunEnded: RunEndedHook | null = null,
    historySource: HistorySource | null = null,
  ) {
    super(dataSource, historySource);
    this.writes = new ParameterWrites(dataSource);
  }

  private async runEnded(manager: EntityManager, runUid: number, end: EndStep): Promise<void> {
    if (!this.onRunEnded) return;
    // The row is read only if the hook asks for it (a webhook listens for finished runs).
    await this.onRunEnded(manager, async () => {
      const row = await manager.getRepository(AgentRunEntity).findOne({ where: { uid: runUid } });
      if (!row) return null;
      const provenance = await manager.getRepository(RunProvenanceEntity).findOne({ where: { runUid } });
      return {
        task: provenance?.taskIdentifier ?? null,
        id: row.uuid,
        configuration: row.configurationIdentifier,
        status: end.status,
        terminationReason: end.terminationReason,
        iterations: end.iterations,
        promptTokens: end.promptTokens,
        completionTokens: end.completionTokens,
        totalTokens: end.totalTokens,
        estimatedCost: end.estimatedCost,
        error: end.error,
        dryRun: end.dryRun,
        finishedAt: new Date(row.finishedAt * 1000).toISOString(),
      };
    }, { runUid, end });
  }

  /**
   * Stores a new QUEUED run. With `leaseHolder` its lease is written in the same
   * transaction, so no other instance can see the run without an owner and
   * declare it interrupted.
   */
  async createRun(
    run: { uuid: string; configurationUid: number; configurationIdentifier: string; beUser?: number },
    leaseHolder?: string,
    request?: string,
    provenance?: RunProvenance,
    onCreated?: RunCreatedHook,
  ): Promise<AgentRunEntity> {
    const now = unixNow();
    return this.dataSource.transaction(async (manager) => {
      // Every column written (its default where the run has none yet): the row is known without reading it back.
      const values: Omit<AgentRunEntity, 'uid'> = {
        ...run,
        beUser: run.beUser ?? 0,
        pid: 0,
        status: 'QUEUED',
        claimedBy: RUN_OWNER_MARK,
        iterations: 0,
        truncated: false,
        totalPromptTokens: 0,
        totalCompletionTokens: 0,
        totalTokens: 0,
        estimatedCost: 0,
        terminationReason: '',
        errorClass: '',
        suspendedState: null,
        queuedRequest: null,
        leaseExpires: 0,
        requeueCount: 0,
        pendingEffect: '',
        startedAt: 0,
        finishedAt: 0,
        tstamp: now,
        crdate: now,
      };
      const uid = await this.writes.insert(manager, AgentRunEntity, values);
      const row = Object.assign(new AgentRunEntity(), { uid, ...values });
      if (leaseHolder) await this.writes.insert(manager, RunLeaseEntity, { runUid: row.uid, instanceId: leaseHolder, heartbeatAt: now });
      if (request !== undefined) await this.writes.insert(manager, RunRequestEntity, { runUid: row.uid, request, requeueCount: 0 });
      if (provenance) {
        await this.writes.insert(manager, RunProvenanceEntity, { runUid: row.uid, releaseId: provenance.releaseId, label: provenance.label, snippets: JSON.stringify(provenance.snippets), ...taskColumnsOf(provenance.task) });
      }
      if (onCreated) await onCreated(manager, { uid: row.uid, uuid: row.uuid });
      return row;
    });
  }

  async markRunning(uid: number): Promise<void> {
    const now = unixNow();
    await this.writes.update(null, AgentRunEntity, { uid }, { status: 'RUNNING', startedAt: now, tstamp: now });
  }

  /**
   * Stores one step. The END step also closes the run row, in the same
   * transaction, so a reader never sees an END without the final status.
   * `suspendedState`: with the APPROVAL step that makes the run wait, what
   * TYPO3 reads from `suspended_state` (see `engine/suspended-state.ts`).
   */
  async appendStep(runUid: number, sequence: number, step: LoopStep, extras: { suspendedState?: string } = {}, owner: string | null = null): Promise<StoredStep> {
    const { kind, round, durationMs, ...payload } = step;
    const event = { run: runUid, sequence, kind, round, durationMs: Math.round(durationMs * 100) / 100, payload: JSON.stringify(storedPayloadOf(payload)), crdate: unixNow() };
    // Written as parameters (parameter-writes), never read back; an owner's insert goes through its lease (insertAsOwner).
    const insert = (manager: EntityManager | null) =>
      owner === null
        ? this.writes.insert(manager, AgentRunEventEntity, event)
        : this.insertAsOwner(manager, event, owner);
    if (kind === 'approval' && (step as ApprovalStep).pendingToolCalls) {
      // The run waits for a person, holding nothing: status, step and deadline together, and no lease.
      const deadlineAt = (step as ApprovalStep).deadlineAt;
      await this.dataSource.transaction(async (manager) => {
        await insert(manager);
        await this.writes.update(manager, AgentRunEntity, { uid: runUid }, { status: 'WAITING_FOR_APPROVAL', suspendedState: extras.suspendedState ?? '', tstamp: unixNow() });
        await this.writes.delete(manager, RunLeaseEntity, { runUid });
        await this.writes.delete(manager, RunApprovalDeadlineEntity, { runUid });
        if (typeof deadlineAt === 'number') await this.writes.insert(manager, RunApprovalDeadlineEntity, { runUid, deadlineAt });
      });
    } else if (kind !== 'end') {
      await insert(null);
    } else {
      await this.dataSource.transaction(async (manager) => {
        await insert(manager);
        await this.writes.update(manager, AgentRunEntity, { uid: runUid }, runRowFromEnd(step));
        await this.writes.delete(manager, RunLeaseEntity, { runUid });
        await this.writes.delete(manager, RunApprovalDeadlineEntity, { runUid });
        await this.runEnded(manager, runUid, step);
      });
    }
    return { ...payload, sequence, kind, round, durationMs: event.durationMs };
  }

  /** The statement of insertAsOwner, written once (it depends only on the dialect's quoting). */
  private insertAsOwnerSql: string | undefined;

  private buildInsertAsOwnerSql(): string {
    const q = (name: string) => this.dataSource.driver.escape(name);
    return (
      `INSERT INTO ${q('tx_nrllm_agentrun_event')} (${[q('run'), q('sequence'), q('kind'), q('round'), q('duration_ms'), q('payload'), q('crdate')].join(', ')}) ` +
      `SELECT ?, ?, ?, ?, ?, ?, ? FROM ${q('promptwire_run_lease')} WHERE ${q('run_uid')} = ? AND ${q('instance_id')} = ?`
    );
  }

  /**
   * Inserts a step only while `owner` holds the run's lease, in one
   * statement (INSERT … SELECT from the lease row): the fence that keeps an
   * instance whose lease was taken over (it paused past the lease, lost the
   * database for a while) from writing into the new owner's trace. On MySQL
   * the statement reads the lease row with a shared lock, so a claim waits
   * for it and the two cannot interleave. Throws `LeaseLostError` when the
   * lease is someone else's, or gone.
   */
  private async insertAsOwner(manager: EntityManager | null, event: { run: number; sequence: number; kind: string; round: number; durationMs: number; payload: string; crdate: number }, owner: string): Promise<void> {
    const sql = (this.insertAsOwnerSql ??= this.buildInsertAsOwnerSql());
    const parameters = [event.run, event.sequence, event.kind, event.round, event.durationMs, event.payload, event.crdate, event.run, owner];
    const runner: QueryRunner = manager?.queryRunner ?? this.dataSource.createQueryRunner();
    let affected: number;
    try {
      // A long history's REQUEST, a long answer: the payload goes out as bytes (large-values).
      affected = await writeWithValues(runner, sql, parameters);
    } finally {
      if (!manager?.queryRunner) await runner.release();
    }
    if (!affected) throw new LeaseLostError();
  }

  /**
   * Closes a run from outside its loop (interrupted, internal error, a
   * waiting run cancelled). The status changes only if the run is still in
   * one of `statuses` (default: open), so two instances can never both write
   * an END, and a waiting run that someone resumed meanwhile is not closed
   * under its new driver; returns whether this call closed it.
   */
  async closeIfOpen(runUid: number, sequence: number, end: EndStep, statuses: readonly string[] = OPEN): Promise<StoredStep | null> {
    const { kind, round, durationMs, ...payload } = end;
    return this.dataSource.transaction(async (manager) => {
      const result = await manager
        .createQueryBuilder()
        .update(AgentRunEntity)
        .set(runRowFromEnd(end))
        .where('uid = :runUid AND status IN (:...statuses)', { runUid, statuses: [...statuses] })
        .execute();
      if (!result.affected) return null;
      await this.writes.insert(manager, AgentRunEventEntity, { run: runUid, sequence, kind, round, durationMs, payload: JSON.stringify(payload), crdate: unixNow() });
      await this.writes.delete(manager, RunLeaseEntity, { runUid });
      await this.writes.delete(manager, RunApprovalDeadlineEntity, { runUid });
      await this.runEnded(manager, runUid, end);
      return { ...payload, sequence, kind, round, durationMs };
    });
  }

  /**
   * Stores the decisions on a waiting run's calls and takes the run back up,
   * in one transaction: only a run still WAITING_FOR_APPROVAL changes (two
   * people deciding at once, or a person and the timeout: the second gets
   * null), and the deciding instance holds its lease from then on.
   * `expiredBy` (unix seconds): the timeout's decisions, stored only if the
   * run's deadline has passed by then (a wait that ended and began again
   * meanwhile has a new deadline, or none).
   */
  async resumeWithDecisions(runUid: number, sequence: number, step: ApprovalStep, instanceId: string, expiredBy: number | null = null): Promise<StoredStep | null> {
    const { kind, round, durationMs, ...payload } = step;
    return this.dataSource.transaction(async (manager): Promise<StoredStep | null> => {
      const now = unixNow();
      // Every path that ends a wait locks the run row first, then its deadline: no two of them can deadlock.
      const result = await manager
        .createQueryBuilder()
        .update(AgentRunEntity)
        .set({ status: 'RUNNING', suspendedState: '', tstamp: now })
        .where('uid = :runUid AND status IN (:...waiting)', { runUid, waiting: storedSpellings('WAITING_FOR_APPROVAL') })
        .execute();
      if (!result.affected) return null;
      const deadline = manager.createQueryBuilder().delete().from(RunApprovalDeadlineEntity).where('run_uid = :runUid', { runUid });
      if (expiredBy !== null) deadline.andWhere('deadline_at <= :expiredBy', { expiredBy });
      const removed = await deadline.execute();
      // The run waits on a deadline that has not passed (it was decided and waits again): leave it waiting.
      if (expiredBy !== null && !removed.affected) throw new WaitNotExpired();
      await this.writes.insert(manager, AgentRunEventEntity, { run: runUid, sequence, kind, round, durationMs, payload: JSON.stringify(payload), crdate: now });
      await this.writes.delete(manager, RunLeaseEntity, { runUid });
      await this.writes.insert(manager, RunLeaseEntity, { runUid, instanceId, heartbeatAt: now });
      return { ...payload, sequence, kind, round, durationMs };
    }).catch((error: unknown) => {
      if (error instanceof WaitNotExpired) return null;
      throw error;
    });
  }

  /** What a run was started with; null for runs stored before requests were kept, or by other programs, and for unreadable ones. */
  async storedRequest(runUid: number): Promise<StoredRunRequest | null> {
    const row = await this.dataSource.getRepository(RunRequestEntity).findOne({ where: { runUid } });
    try {
      return row ? (JSON.parse(row.request) as StoredRunRequest) : null;
    } catch {
      return null;
    }
  }

  /**
   * A run as a decision on its wait is taken from: its row, what it was
   * started with (null: see storedRequest) and its stored steps, also read
   * as the engine's; null when there is no run `uuid`. Whether it still
   * waits is for the caller to check (and resumeWithDecisions to enforce).
   */
  async waitingRun(uuid: string): Promise<WaitingRun | null> {
    const row = await this.findRun(uuid);
    if (!row) return null;
    const steps = await this.stepsAfter(row.uid, 0);
    return { row, request: await this.storedRequest(row.uid), steps, loopSteps: asLoopSteps(steps) };
  }

  /** Replaces a run's stored request (JSON: `StoredRunRequest`); a run without one is left as it is. */
  async replaceRequest(runUid: number, request: string): Promise<void> {
    await this.dataSource.getRepository(RunRequestEntity).update({ runUid }, { request });
  }

  /**
   * Claims an orphaned run for `instanceId`: its lease is missing or older
   * than `staleSeconds`, or (with `goneHolder`) held by that instance, which
   * is known to be gone. Race-free with any number of instances: the stale
   * lease is deleted and a new one inserted in one transaction; the run's
   * uid is the lease's primary key, so of two claimers one insert fails.
   * `requeue` (default): the run goes on here, counted in `requeue_count`;
   * false: it is claimed only to be closed (a cancel).
   */
  async claimOrphan(runUid: number, instanceId: string, staleSeconds: number, options: { goneHolder?: string | null; requeue?: boolean } = {}): Promise<boolean> {
    const goneHolder = options.goneHolder ?? null;
    try {
      return await this.dataSource.transaction(async (manager) => {
        const now = unixNow();
        await manager
          .createQueryBuilder()
          .delete()
          .from(RunLeaseEntity)
          .where(
            goneHolder === null ? 'run_uid = :runUid AND heartbeat_at < :cutoff' : 'run_uid = :runUid AND (heartbeat_at < :cutoff OR instance_id = :goneHolder)',
            { runUid, cutoff: now - staleSeconds, goneHolder },
          )
          .execute();
        await this.writes.insert(manager, RunLeaseEntity, { runUid, instanceId, heartbeatAt: now });
        const open = await manager
          .createQueryBuilder(AgentRunEntity, 'r')
          .where('r.uid = :runUid AND r.status IN (:...statuses)', { runUid, statuses: storedSpellings('QUEUED', 'RUNNING') })
          .getCount();
        if (open === 0) throw new ClaimLost();
        if (options.requeue !== false) await manager.increment(RunRequestEntity, { runUid }, 'requeueCount', 1);
        return true;
      });
    } catch {
      // Another instance holds a live lease (the insert collided), or the run ended meanwhile.
      return false;
    }
  }

  /**
   * Renews the leases of the runs this instance still executes. A run whose
   * loop is gone (it could not store its END) is not renewed: its lease goes
   * stale and housekeeping closes it. Returns how many leases were renewed
   * (fewer than asked: another instance took some over).
   */
  async heartbeat(instanceId: string, runUids: readonly number[]): Promise<number> {
    if (runUids.length === 0) return 0;
    const result = await this.dataSource
      .createQueryBuilder()
      .update(RunLeaseEntity)
      .set({ heartbeatAt: unixNow() })
      .where('instance_id = :instanceId AND run_uid IN (:...runUids)', { instanceId, runUids: [...runUids] })
      .execute();
    // Rows matched (mysql2 connects with FOUND_ROWS; SQLite counts every row the UPDATE touched).
    return result.affected ?? 0;
  }
}

class ClaimLost extends Error {}

/** A step was not stored: the instance writing it no longer holds the run's lease (another instance took the run over). */
export class LeaseLostError extends Error {
  readonly code = 'LEASE_LOST';
  constructor() {
    super('This instance no longer holds the run\'s lease; the step was not stored.');
    this.name = 'LeaseLostError';
  }
}

/** Rolls back a timeout whose run waits on a newer deadline. */
class WaitNotExpired extends Error {}

function runRowFromEnd(step: EndStep): Partial<AgentRunEntity> {
  const now = unixNow();
  return {
    status: step.status,
    terminationReason: step.terminationReason,
    iterations: storedInt(step.iterations),
    truncated: step.truncated,
    // Clamped to what the columns hold, so no provider's numbers can keep a run from closing.
    totalPromptTokens: storedInt(step.promptTokens),
    totalCompletionTokens: storedInt(step.completionTokens),
    totalTokens: storedInt(step.totalTokens),
    estimatedCost: storedCost(step.estimatedCost) ?? 0,
    errorClass: (step.errorClass ?? '').slice(0, 255),
    // A finished run is no longer suspended, queued or claimed (as nr_llm settles its runs).
    suspendedState: '',
    queuedRequest: '',
    claimedBy: '',
    leaseExpires: 0,
    finishedAt: now,
    tstamp: now,
  };
}

/** The provenance columns of a task run (all null for other runs). */
function taskColumnsOf(task: RunProvenance['task']) {
  return { taskUid: task?.uid ?? null, taskIdentifier: task?.identifier ?? null, taskVersion: task?.version ?? null };
}

/** A step's payload as stored: a conversation turn's REQUEST without its history's messages (history-sent). */
function storedPayloadOf(payload: Omit<LoopStep, 'kind' | 'round' | 'durationMs'>): object {
  const sent = (payload as Partial<RequestStep>).historySent;
  const messages = (payload as Partial<RequestStep>).messagesSent;
  return sent && messages ? { ...payload, messagesSent: withoutHistory(messages, sent) } : payload;
}
