/**
 * The run tables: `tx_nrllm_agentrun` and `tx_nrllm_agentrun_event`.
 * A step is written with its sequence number before anyone is told about it.
 */
import type { DataSource } from 'typeorm';
import { unixNow } from '../shared/time';
import { AgentRunEventEntity } from './agent-run-event.entity';
import { AgentRunEntity } from './agent-run.entity';
import type { EndStep, RunStep } from './engine/run-step';
import type { StoredStep } from './trace-bus';

export type RunStatus = 'QUEUED' | 'RUNNING' | 'COMPLETED' | 'FAILED' | 'CANCELLED';

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

export class RunStore {
  constructor(private readonly dataSource: DataSource) {}

  async createRun(run: { uuid: string; configurationUid: number; configurationIdentifier: string }): Promise<AgentRunEntity> {
    const now = unixNow();
    const repository = this.dataSource.getRepository(AgentRunEntity);
    return repository.save(
      repository.create({
        ...run,
        status: 'QUEUED',
        iterations: 0,
        truncated: false,
        totalPromptTokens: 0,
        totalCompletionTokens: 0,
        totalTokens: 0,
        estimatedCost: null,
        terminationReason: '',
        errorClass: '',
        startedAt: 0,
        finishedAt: 0,
        tstamp: now,
        crdate: now,
      }),
    );
  }

  async markRunning(uid: number): Promise<void> {
    const now = unixNow();
    await this.dataSource.getRepository(AgentRunEntity).update({ uid }, { status: 'RUNNING', startedAt: now, tstamp: now });
  }

  /**
   * Stores one step. The END step also closes the run row, in the same
   * transaction, so a reader never sees an END without the final status.
   */
  async appendStep(runUid: number, sequence: number, step: RunStep): Promise<StoredStep> {
    const { kind, round, durationMs, ...payload } = step;
    const event = { run: runUid, sequence, kind, round, durationMs: Math.round(durationMs * 100) / 100, payload: JSON.stringify(payload), crdate: unixNow() };
    if (kind !== 'end') {
      await this.dataSource.getRepository(AgentRunEventEntity).insert(event);
    } else {
      await this.dataSource.transaction(async (manager) => {
        await manager.insert(AgentRunEventEntity, event);
        await manager.update(AgentRunEntity, { uid: runUid }, runRowFromEnd(step));
      });
    }
    return { ...payload, sequence, kind, round, durationMs: event.durationMs };
  }

  async findRun(uuid: string): Promise<AgentRunEntity | null> {
    return this.dataSource.getRepository(AgentRunEntity).findOne({ where: { uuid } });
  }

  async listRuns(limit: number, offset: number): Promise<AgentRunEntity[]> {
    return this.dataSource.getRepository(AgentRunEntity).find({ order: { crdate: 'DESC', uid: 'DESC' }, take: limit, skip: offset });
  }

  async stepsAfter(runUid: number, afterSequence: number): Promise<StoredStep[]> {
    const rows = await this.dataSource
      .getRepository(AgentRunEventEntity)
      .createQueryBuilder('e')
      .where('e.run = :runUid AND e.sequence > :afterSequence', { runUid, afterSequence })
      .orderBy('e.sequence', 'ASC')
      .getMany();
    return rows.map(toStoredStep);
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

  async lastSequence(runUid: number): Promise<number> {
    const row = await this.dataSource
      .getRepository(AgentRunEventEntity)
      .createQueryBuilder('e')
      .select('MAX(e.sequence)', 'max')
      .where('e.run = :runUid', { runUid })
      .getRawOne<{ max: number | string | null }>();
    return Number(row?.max ?? 0) || 0;
  }

  async unfinishedRuns(): Promise<AgentRunEntity[]> {
    return this.dataSource
      .getRepository(AgentRunEntity)
      .createQueryBuilder('r')
      .where('r.status IN (:...statuses)', { statuses: ['QUEUED', 'RUNNING'] })
      .getMany();
  }
}

function runRowFromEnd(step: EndStep): Partial<AgentRunEntity> {
  const now = unixNow();
  return {
    status: step.status,
    terminationReason: step.terminationReason,
    iterations: step.iterations,
    truncated: step.truncated,
    totalPromptTokens: step.promptTokens,
    totalCompletionTokens: step.completionTokens,
    totalTokens: step.totalTokens,
    estimatedCost: step.estimatedCost,
    errorClass: step.errorClass ?? '',
    finishedAt: now,
    tstamp: now,
  };
}
