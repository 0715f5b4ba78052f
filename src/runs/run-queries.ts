/**
 * The reads of runs: rows, steps, leases, approval deadlines, provenance and the run list. The
 * writes (and the transactions that keep a run and its steps together) are
 * RunStore's, which extends this.
 */
import type { DataSource } from 'typeorm';
import { afterPosition, atOrBeforePosition, type KeyColumn, type KeyKind, type KeysetSource, positionOf, type SqlCondition } from '../db/keyset';
import { filteredSelect } from '../db/list-filters';
import { getShapedArrays, getShapedEntityRows } from '../db/raw-rows';
import type { ReleasedRecord } from '../releases/release-rules';
import { unixNow } from '../shared/time';
import { AgentRunEventEntity } from './agent-run-event.entity';
import { AgentRunEntity } from './agent-run.entity';
import type { ChatMessage } from '../providers/adapters/types';
import { asHistorySent, historyLeftOutWarning, withHistory, type HistorySent } from './engine/history-sent';
import type { RequestedToolCall, LoopStep } from './engine/loop-step';
import type { HistorySource } from './run-preparer';
import type { RunState } from './engine/run-machine';
import { RunApprovalDeadlineEntity } from './run-approval-deadline.entity';
import { RunLeaseEntity } from './run-lease.entity';
import { RunProvenanceEntity } from './run-provenance.entity';
import { KNOWN_READ_STATUSES, OPEN_STORED_STATUSES, readRunStatus, readStatusesShownAs, storedSpellings } from './run-status';
import type { StoredStep } from './trace-bus';

/** Written into `claimed_by` of the runs this service executes; nr_llm's own workers write their ids there. */
export const RUN_OWNER_MARK = 'promptwire';

const OPEN = [...OPEN_STORED_STATUSES];

export function toStoredStep(row: AgentRunEventEntity): StoredStep {
  let payload: Record<string, unknown> = {};
  try {
    const parsed: unknown = JSON.parse(row.payload || '{}');
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) payload = parsed as Record<string, unknown>;
  } catch {
    // A payload damaged outside the service still lists as a step with its columns.
  }
  return { ...payload, sequence: row.sequence, kind: row.kind, round: row.round, durationMs: row.durationMs };
}

/**
 * A stored step read as the engine's step: every step in the table was
 * written from one (appendStep, closeIfOpen, resumeWithDecisions), with its
 * sequence number beside it. The one place that says so.
 */
export function asLoopStep(step: StoredStep): LoopStep {
  return step as unknown as LoopStep;
}

/** `asLoopStep` for a run's steps. */
export function asLoopSteps(steps: readonly StoredStep[]): LoopStep[] {
  return steps.map(asLoopStep);
}

export interface RunProvenance {
  releaseId: number | null;
  label: string | null;
  snippets: ReleasedRecord[];
  /** The task a task run ran (`runTask`); absent or null otherwise. */
  task?: RunTaskOrigin | null;
}

/** The task behind a run, and the stored version of it the run sent (null: not known). */
export interface RunTaskOrigin {
  uid: number;
  identifier: string;
  version: number | null;
}

/** Filters of the run list; given ones combine with AND. */
export interface RunListFilter {
  /** Runs the API shows with one of these statuses; null = any. */
  statuses: readonly RunState[] | null;
  /** A configuration identifier, lower case, compared without case with the one the run recorded. */
  configuration: string | null;
  /** A release label (lower case, as stored) the run was started with. */
  label: string | null;
  /** Created at or after this unix second. */
  createdFrom: number | null;
  /** Created before this unix second. */
  createdBefore: number | null;
}

/** The name a cursor of the run list carries. */
export const RUN_LIST = 'runs';

/** The run list's order, newest first: created, then uid. */
const RUN_ORDER: readonly KeyColumn[] = [
  { column: 'r.crdate', direction: 'DESC' },
  { column: 'r.uid', direction: 'DESC' },
];
const RUN_KEYS = ['r_crdate', 'r_uid'];
export const RUN_KEY_KINDS: readonly KeyKind[] = ['value', 'integer'];

export class RunQueries {
  constructor(
    protected readonly dataSource: DataSource,
    /** Reads a conversation turn's history again: its REQUEST steps name it instead of copying it (history-sent). */
    private readonly historySource: HistorySource | null = null,
  ) {}

  /** The provenance of each run that has one (runs started by older versions or by TYPO3 have none). */
  async provenanceOf(runUids: readonly number[]): Promise<Map<number, RunProvenance>> {
    const result = new Map<number, RunProvenance>();
    if (runUids.length === 0) return result;
    const rows = await this.dataSource.getRepository(RunProvenanceEntity).createQueryBuilder('p').where('p.run_uid IN (:...uids)', { uids: [...runUids] }).getMany();
    for (const row of rows) {
      let snippets: ReleasedRecord[] = [];
      try {
        const parsed: unknown = JSON.parse(row.snippets);
        if (Array.isArray(parsed)) snippets = parsed as ReleasedRecord[];
      } catch {
        // A damaged row still shows its release.
      }
      const task = row.taskUid !== null ? { uid: row.taskUid, identifier: row.taskIdentifier ?? '', version: row.taskVersion } : null;
      result.set(row.runUid, { releaseId: row.releaseId, label: row.label, snippets, task });
    }
    return result;
  }

  /** Who holds a run's lease and when it was last renewed (unix seconds); null when nobody does. */
  async leaseOf(runUid: number): Promise<{ instanceId: string; heartbeatAt: number } | null> {
    const lease = await this.dataSource.getRepository(RunLeaseEntity).findOne({ where: { runUid } });
    return lease ? { instanceId: lease.instanceId, heartbeatAt: Number(lease.heartbeatAt) } : null;
  }

  /** Whether step `sequence` of a run is stored (an insert whose answer was lost may have been written). */
  async hasStep(runUid: number, sequence: number): Promise<boolean> {
    const count = await this.dataSource.getRepository(AgentRunEventEntity).count({ where: { run: runUid, sequence } });
    return count > 0;
  }

  async findRun(uuid: string): Promise<AgentRunEntity | null> {
    // Read on every watch and cancel: the prepared raw-row path, not findOne's generic query building and hydration.
    const select = { shape: 'runs:byUuid', values: { uuid }, build: () => this.dataSource.getRepository(AgentRunEntity).createQueryBuilder('r').where('r.uuid = :uuid', { uuid }).limit(1) };
    const [row] = await getShapedEntityRows(this.dataSource, select, [], []);
    return row?.main ?? null;
  }

  async listRuns(limit: number, offset: number): Promise<AgentRunEntity[]> {
    return this.dataSource.getRepository(AgentRunEntity).find({ order: { crdate: 'DESC', uid: 'DESC' }, take: limit, skip: offset });
  }

  /** The runs that pass `filter`, newest first, as a keyset source. */
  listedRuns(filter: RunListFilter): KeysetSource<AgentRunEntity> {
    const conditions = this.runConditions(filter);
    const rows = () => this.dataSource.getRepository(AgentRunEntity).createQueryBuilder('r');
    return {
      read: async (after, limit) => {
        const page = () => {
          const query = rows();
          for (const { column, direction } of RUN_ORDER) query.addOrderBy(column, direction);
          return query.limit(limit);
        };
        const select = filteredSelect(`runs:page:${limit}`, page, after ? [...conditions, afterPosition(RUN_ORDER, after, 'after')] : conditions);
        return (await getShapedEntityRows(this.dataSource, select, [], RUN_KEYS)).map(({ main, key }) => ({ row: main, position: positionOf(key) }));
      },
      count: async () => {
        const [[count] = []] = await getShapedArrays(this.dataSource, filteredSelect('runs:count', () => rows().select('COUNT(*)', 'count'), conditions));
        return Number(count ?? 0);
      },
      existsAtOrBefore: async (position) => {
        const select = filteredSelect('runs:before', () => rows().select('r.uid', 'uid').limit(1), [...conditions, atOrBeforePosition(RUN_ORDER, position, 'before')]);
        return (await getShapedArrays(this.dataSource, select)).length > 0;
      },
    };
  }

  private runConditions(filter: RunListFilter): SqlCondition[] {
    const conditions: SqlCondition[] = [];
    if (filter.statuses) {
      // The status as readRunStatus reads it (upper case, trimmed), so a run is found under the status it shows.
      const read = "UPPER(TRIM(COALESCE(r.status, '')))";
      const { values, unknownToo } = readStatusesShownAs(filter.statuses);
      const matches = [values.length > 0 ? `${read} IN (:...statusValues)` : '1 = 0', ...(unknownToo ? [`${read} NOT IN (:...knownStatuses)`] : [])];
      conditions.push({ sql: `(${matches.join(' OR ')})`, parameters: { ...(values.length > 0 ? { statusValues: values } : {}), ...(unknownToo ? { knownStatuses: [...KNOWN_READ_STATUSES] } : {}) } });
    }
    if (filter.configuration !== null) conditions.push({ sql: 'LOWER(r.configuration_identifier) = :configuration', parameters: { configuration: filter.configuration } });
    if (filter.label !== null) {
      const provenance = this.dataSource.getMetadata(RunProvenanceEntity).tableName;
      conditions.push({ sql: `EXISTS (SELECT 1 FROM ${provenance} p WHERE p.run_uid = r.uid AND p.label = :label)`, parameters: { label: filter.label } });
    }
    if (filter.createdFrom !== null) conditions.push({ sql: 'r.crdate >= :createdFrom', parameters: { createdFrom: filter.createdFrom } });
    if (filter.createdBefore !== null) conditions.push({ sql: 'r.crdate < :createdBefore', parameters: { createdBefore: filter.createdBefore } });
    return conditions;
  }

  async stepsAfter(runUid: number, afterSequence: number, limit: number | null = null): Promise<StoredStep[]> {
    // Every watch's replay and page reads here: the prepared raw-row path (one SQL text per limit).
    const select = {
      shape: `runs:steps:${limit ?? 'all'}`,
      values: { runUid, afterSequence },
      build: () => {
        const query = this.dataSource
          .getRepository(AgentRunEventEntity)
          .createQueryBuilder('e')
          .where('e.run = :runUid AND e.sequence > :afterSequence', { runUid, afterSequence })
          .orderBy('e.sequence', 'ASC');
        return limit === null ? query : query.limit(limit);
      },
    };
    return this.withHistories((await getShapedEntityRows(this.dataSource, select, [], [])).map(({ main }) => toStoredStep(main)));
  }

  /**
   * Conversation turns' REQUEST steps with their history put back in place
   * (read once for the steps that share it); a history no longer stored as
   * it was sent is left out, and the step says so in `warnings`.
   */
  private async withHistories(steps: StoredStep[]): Promise<StoredStep[]> {
    // Most reads hold no turn's REQUEST: returned as read.
    if (!steps.some((step) => step.kind === 'request' && step.historySent !== undefined)) return steps;
    const reads = new Map<string, Promise<ChatMessage[] | null>>();
    const read = (sent: HistorySent): Promise<ChatMessage[] | null> => {
      const key = `${sent.session}:${sent.throughSequence}`;
      let history = reads.get(key);
      if (!history) reads.set(key, (history = this.historySource ? this.historySource(sent) : Promise.resolve(null)));
      return history;
    };
    return Promise.all(
      steps.map(async (step) => {
        const sent = step.kind === 'request' && Array.isArray(step.messagesSent) ? asHistorySent(step.historySent) : null;
        if (!sent) return step;
        const { messages, complete } = withHistory(step.messagesSent as ChatMessage[], sent, await read(sent));
        return { ...step, messagesSent: messages, ...(complete ? {} : { warnings: [historyLeftOutWarning(sent)] }) };
      }),
    );
  }

  async endStepsOf(runUids: readonly number[]): Promise<Map<number, StoredStep>> {
    const result = new Map<number, StoredStep>();
    if (runUids.length === 0) return result;
    const rows = await this.dataSource
      .getRepository(AgentRunEventEntity)
      .createQueryBuilder('e')
      .where('e.run IN (:...runUids) AND e.kind = :kind', { runUids: [...runUids], kind: 'end' })
      .getMany();
    for (const row of rows) result.set(row.run, toStoredStep(row));
    return result;
  }

  /** Runs not yet ended, by state (for the metrics). */
  async countOpen(): Promise<Record<string, number>> {
    const rows = await this.dataSource
      .getRepository(AgentRunEntity)
      .createQueryBuilder('r')
      .select('r.status', 'status')
      .addSelect('COUNT(*)', 'count')
      .where('r.status IN (:...open)', { open: OPEN })
      .groupBy('r.status')
      .getRawMany<{ status: string; count: string | number }>();
    const counts: Record<string, number> = {};
    // Keyed by the status as the service reads it (both stored spellings count as one).
    for (const row of rows) {
      const status = readRunStatus(row.status);
      counts[status] = (counts[status] ?? 0) + (Number(row.count) || 0);
    }
    return counts;
  }

  /** The calls of a waiting run, and when its wait ends undecided: from its last APPROVAL step that asked for decisions. */
  async pendingApproval(runUid: number): Promise<{ calls: RequestedToolCall[]; deadlineAt: number | null }> {
    const row = await this.dataSource
      .getRepository(AgentRunEventEntity)
      .createQueryBuilder('e')
      .where('e.run = :runUid AND e.kind = :kind', { runUid, kind: 'approval' })
      .orderBy('e.sequence', 'DESC')
      .limit(1)
      .getOne();
    const step = row ? toStoredStep(row) : null;
    if (!Array.isArray(step?.pendingToolCalls)) return { calls: [], deadlineAt: null };
    return { calls: step.pendingToolCalls as RequestedToolCall[], deadlineAt: typeof step.deadlineAt === 'number' ? step.deadlineAt : null };
  }

  async lastSequence(runUid: number): Promise<number> {
    const row = await this.dataSource
      .getRepository(AgentRunEventEntity)
      .createQueryBuilder('e')
      .select('MAX(e.sequence)', 'max')
      .where('e.run = :runUid', { runUid })
      .getRawOne<{ max: number | string | null }>();
    return Number(row?.max ?? 0) || 0;
  }

  /**
   * Runs of this service waiting for approval whose deadline has passed by
   * `now` (unix seconds), oldest deadline first.
   */
  async expiredApprovals(now: number, limit = 100): Promise<AgentRunEntity[]> {
    return this.dataSource
      .getRepository(AgentRunEntity)
      .createQueryBuilder('r')
      .innerJoin(RunApprovalDeadlineEntity, 'd', 'd.run_uid = r.uid')
      .where('r.status IN (:...waiting)', { waiting: storedSpellings('WAITING_FOR_APPROVAL') })
      .andWhere('r.claimed_by = :owner', { owner: RUN_OWNER_MARK })
      .andWhere('d.deadline_at <= :now', { now })
      .orderBy('d.deadline_at', 'ASC')
      .limit(limit)
      .getMany();
  }

  /** When a waiting run's wait ends undecided (unix seconds); null without a timeout. */
  async approvalDeadlineOf(runUid: number): Promise<number | null> {
    const row = await this.dataSource.getRepository(RunApprovalDeadlineEntity).findOne({ where: { runUid } });
    return row ? Number(row.deadlineAt) : null;
  }

  /** The oldest heartbeat (unix seconds) of a lease another instance holds on an open run of this service; null when there is none. */
  async oldestForeignHeartbeat(instanceId: string): Promise<number | null> {
    const row = await this.dataSource
      .getRepository(RunLeaseEntity)
      .createQueryBuilder('l')
      .innerJoin(AgentRunEntity, 'r', 'r.uid = l.run_uid')
      .select('MIN(l.heartbeat_at)', 'oldest')
      .where('l.instance_id <> :instanceId', { instanceId })
      .andWhere('r.status IN (:...open)', { open: OPEN })
      .andWhere('r.claimed_by = :owner', { owner: RUN_OWNER_MARK })
      .getRawOne<{ oldest: number | string | null }>();
    return row?.oldest === null || row?.oldest === undefined ? null : Number(row.oldest);
  }

  /**
   * Queued or running runs nobody is working on: no lease, or a lease older
   * than `staleSeconds`. A run waiting for approval needs no owner (it holds
   * no lease on purpose), so it is never one: housekeeping does not read
   * every waiting run on every pass.
   */
  async orphanedRuns(staleSeconds: number): Promise<AgentRunEntity[]> {
    return this.dataSource
      .getRepository(AgentRunEntity)
      .createQueryBuilder('r')
      .leftJoin(RunLeaseEntity, 'l', 'l.run_uid = r.uid')
      .where('r.status IN (:...statuses)', { statuses: storedSpellings('QUEUED', 'RUNNING') })
      // Only runs this service executes: nr_llm's own runs have their own workers and reaper.
      .andWhere('r.claimed_by = :owner', { owner: RUN_OWNER_MARK })
      .andWhere('(l.run_uid IS NULL OR l.heartbeat_at < :cutoff)', { cutoff: unixNow() - staleSeconds })
      .getMany();
  }
}
