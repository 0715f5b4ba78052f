/**
 * The usage feature's SQL: `tx_nrllm_service_usage` (the daily aggregate),
 * `tx_nrllm_user_budget` and TYPO3's tool switches. Sums are read with
 * plain SQL in as few round trips as the rules allow: a budget check is one
 * statement, a booking usually one.
 */
import type { DataSource } from 'typeorm';
import type { Dialect } from '../db/data-source';
import type { Limits, UsageSums, UserBudgetLimits } from './usage-rules';
import { UserBudgetEntity } from './user-budget.entity';

/** The aggregation key of one `tx_nrllm_service_usage` row (nr_llm's, in its order). */
export interface UsageKey {
  serviceType: string;
  serviceProvider: string;
  beUser: number;
  configurationUid: number;
  modelUid: number;
  modelId: string;
  taskUid: number;
  sourceExtension: string;
  /** Local midnight of the day. */
  requestDate: number;
}

export interface UsageIncrement {
  requests: number;
  tokens: number;
  promptTokens: number;
  completionTokens: number;
  /** US dollars; 0 when unpriced. */
  cost: number;
}

/** What one budget check reads. */
export interface BudgetSnapshot {
  budget: UserBudgetLimits | null;
  userDaily: UsageSums;
  userMonthly: UsageSums;
  configurationDaily: UsageSums;
}

const KEY_WHERE =
  'service_type = ? AND service_provider = ? AND be_user = ? AND configuration_uid = ? AND model_uid = ? AND model_id = ? AND task_uid = ? AND source_extension = ? AND request_date = ?';

/** A number read from a row: sums come back as strings (decimals) or null (no rows); odd values read as 0. */
function num(value: unknown): number {
  const number = Number(value ?? 0);
  return Number.isFinite(number) ? number : 0;
}

function sums(row: Record<string, unknown> | undefined, requests: string, tokens: string, cost: string): UsageSums {
  return { requests: num(row?.[requests]), tokens: num(row?.[tokens]), cost: num(row?.[cost]) };
}

function limitsOf(row: Record<string, unknown>, requests: string, tokens: string, cost: string): Limits {
  return { requests: num(row[requests]), tokens: num(row[tokens]), cost: num(row[cost]) };
}

/** The seven value columns every part of the budget statement selects, named alike so the parts can be joined with UNION ALL. */
function columns(...expressions: string[]): string {
  return expressions.map((expression, index) => `${expression} AS v${index + 1}`).join(', ');
}

export class UsageRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
  ) {}

  /**
   * The user's budget row (the first non-deleted, non-hidden one by uid),
   * the user's usage today and this month, and the configuration's usage
   * today over all users, in one statement. `beUser` 0 skips the user's
   * parts, `configurationUid` 0 the configuration's.
   */
  async budgetSnapshot(input: { beUser: number; configurationUid: number; dayStart: number; monthStart: number; now: number }): Promise<BudgetSnapshot> {
    const parts: string[] = [];
    const params: unknown[] = [];
    if (input.beUser > 0) {
      parts.push(
        `SELECT 'b' AS part, ${columns('max_requests_per_day', 'max_tokens_per_day', 'max_cost_per_day', 'max_requests_per_month', 'max_tokens_per_month', 'max_cost_per_month', 'is_active')}
           FROM (SELECT * FROM tx_nrllm_user_budget WHERE be_user = ? AND deleted = 0 AND hidden = 0 ORDER BY uid LIMIT 1) first_budget`,
        `SELECT 'u' AS part, ${columns(
          'SUM(CASE WHEN request_date >= ? THEN request_count ELSE 0 END)',
          'SUM(CASE WHEN request_date >= ? THEN tokens_used ELSE 0 END)',
          'SUM(CASE WHEN request_date >= ? THEN estimated_cost ELSE 0 END)',
          'SUM(request_count)',
          'SUM(tokens_used)',
          'SUM(estimated_cost)',
          '0',
        )} FROM tx_nrllm_service_usage WHERE be_user = ? AND request_date >= ? AND request_date <= ?`,
      );
      params.push(input.beUser, input.dayStart, input.dayStart, input.dayStart, input.beUser, Math.min(input.monthStart, input.dayStart), input.now);
    }
    if (input.configurationUid > 0) {
      parts.push(
        `SELECT 'c' AS part, ${columns('SUM(request_count)', 'SUM(tokens_used)', 'SUM(estimated_cost)', '0', '0', '0', '0')}
           FROM tx_nrllm_service_usage WHERE configuration_uid = ? AND request_date >= ? AND request_date <= ?`,
      );
      params.push(input.configurationUid, input.dayStart, input.now);
    }
    const empty: BudgetSnapshot = { budget: null, userDaily: { requests: 0, tokens: 0, cost: 0 }, userMonthly: { requests: 0, tokens: 0, cost: 0 }, configurationDaily: { requests: 0, tokens: 0, cost: 0 } };
    if (parts.length === 0) return empty;
    const rows = (await this.dataSource.query(parts.join(' UNION ALL '), params)) as Record<string, unknown>[];
    const snapshot = empty;
    for (const row of rows) {
      switch (row.part) {
        case 'b':
          snapshot.budget = { isActive: num(row.v7) !== 0, daily: limitsOf(row, 'v1', 'v2', 'v3'), monthly: limitsOf(row, 'v4', 'v5', 'v6') };
          break;
        case 'u':
          snapshot.userDaily = sums(row, 'v1', 'v2', 'v3');
          snapshot.userMonthly = sums(row, 'v4', 'v5', 'v6');
          break;
        case 'c':
          snapshot.configurationDaily = sums(row, 'v1', 'v2', 'v3');
          break;
      }
    }
    return snapshot;
  }

  /**
   * Adds one call to its key's row of the day: the row's counters are
   * raised in place (the first row by uid, when a race left two), or a row
   * is inserted. Without a unique key a concurrent first booking of the
   * same key may insert a second row; every reader sums, so totals stay right.
   */
  async book(key: UsageKey, increment: UsageIncrement, now: number): Promise<void> {
    const keyValues = [key.serviceType, key.serviceProvider, key.beUser, key.configurationUid, key.modelUid, key.modelId, key.taskUid, key.sourceExtension, key.requestDate];
    const set =
      'request_count = request_count + ?, tokens_used = tokens_used + ?, prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ?, estimated_cost = estimated_cost + ?, tstamp = ?';
    const setValues = [increment.requests, increment.tokens, increment.promptTokens, increment.completionTokens, increment.cost, now];
    const update =
      this.dialect === 'sqlite'
        ? `UPDATE tx_nrllm_service_usage SET ${set} WHERE uid = (SELECT MIN(uid) FROM tx_nrllm_service_usage WHERE ${KEY_WHERE})`
        : `UPDATE tx_nrllm_service_usage SET ${set} WHERE ${KEY_WHERE} ORDER BY uid LIMIT 1`;
    const runner = this.dataSource.createQueryRunner();
    try {
      const updated = await runner.query(update, [...setValues, ...keyValues], true);
      if (Number(updated.affected ?? 0) > 0) return;
      await runner.query(
        `INSERT INTO tx_nrllm_service_usage (pid, service_type, service_provider, be_user, configuration_uid, model_uid, model_id, task_uid, source_extension, request_date,
           request_count, tokens_used, prompt_tokens, completion_tokens, characters_used, audio_seconds_used, images_generated, estimated_cost, tstamp, crdate)
         VALUES (0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?)`,
        [...keyValues, ...setValues, now],
      );
    } finally {
      await runner.release();
    }
  }
}

/** A dimension `usage` can group by, and its column. */
export const USAGE_DIMENSION_COLUMNS = {
  DAY: 'request_date',
  MODEL: 'model_id',
  CONFIGURATION: 'configuration_uid',
  USER: 'be_user',
  SOURCE: 'source_extension',
  PROVIDER: 'service_provider',
  TASK: 'task_uid',
  SERVICE_TYPE: 'service_type',
} as const;

export type UsageDimensionName = keyof typeof USAGE_DIMENSION_COLUMNS;

/** One group of `usage`: its dimension values (by column) and its sums. */
export interface UsageGroupRow {
  values: Partial<Record<UsageDimensionName, string | number>>;
  sums: UsageFigures;
}

export interface UsageFigures {
  requests: number;
  tokens: number;
  promptTokens: number;
  completionTokens: number;
  cost: number;
}

const FIGURES = 'SUM(request_count) AS requests, SUM(tokens_used) AS tokens, SUM(prompt_tokens) AS prompt_tokens, SUM(completion_tokens) AS completion_tokens, SUM(estimated_cost) AS cost';

export function figuresOf(row: Record<string, unknown> | undefined): UsageFigures {
  return { requests: num(row?.requests), tokens: num(row?.tokens), promptTokens: num(row?.prompt_tokens), completionTokens: num(row?.completion_tokens), cost: num(row?.cost) };
}

/** Reads for the `usage` queries (kept apart from the hot path above). */
export class UsageReports {
  constructor(private readonly dataSource: DataSource) {}

  /** Sums per group of the days from `fromDay` to `toDay` (day starts, both included). */
  async grouped(fromDay: number, toDay: number, dimensions: readonly UsageDimensionName[]): Promise<UsageGroupRow[]> {
    const columns = dimensions.map((dimension) => USAGE_DIMENSION_COLUMNS[dimension]);
    const select = columns.map((column) => `${column} AS d_${column}`);
    const rows = (await this.dataSource.query(
      `SELECT ${[...select, FIGURES].join(', ')} FROM tx_nrllm_service_usage WHERE request_date >= ? AND request_date <= ?${columns.length > 0 ? ` GROUP BY ${columns.join(', ')}` : ''}`,
      [fromDay, toDay],
    )) as Record<string, unknown>[];
    return rows.map((row) => {
      const values: UsageGroupRow['values'] = {};
      for (const dimension of dimensions) {
        const raw = row[`d_${USAGE_DIMENSION_COLUMNS[dimension]}`];
        values[dimension] = typeof raw === 'string' && !['request_date', 'configuration_uid', 'be_user', 'task_uid'].includes(USAGE_DIMENSION_COLUMNS[dimension]) ? raw : num(raw);
      }
      return { values, sums: figuresOf(row) };
    });
  }

  /** The user's budget row: the first by uid that is neither deleted nor hidden. */
  async budgetOf(beUser: number): Promise<UserBudgetEntity | null> {
    return this.dataSource.getRepository(UserBudgetEntity).findOne({ where: { beUser, deleted: false, hidden: false }, order: { uid: 'ASC' } });
  }

  /** Every visible budget, one per user (the first by uid), by backend user. */
  async budgets(): Promise<UserBudgetEntity[]> {
    const rows = await this.dataSource.getRepository(UserBudgetEntity).find({ where: { deleted: false, hidden: false }, order: { beUser: 'ASC', uid: 'ASC' } });
    const seen = new Set<number>();
    return rows.filter((row) => !seen.has(row.beUser) && seen.add(row.beUser) !== undefined);
  }

  async saveBudget(row: UserBudgetEntity): Promise<UserBudgetEntity> {
    return this.dataSource.getRepository(UserBudgetEntity).save(row);
  }

  createBudget(beUser: number, now: number): UserBudgetEntity {
    return this.dataSource.getRepository(UserBudgetEntity).create({
      pid: 0,
      beUser,
      maxRequestsPerDay: 0,
      maxTokensPerDay: 0,
      maxCostPerDay: 0,
      maxRequestsPerMonth: 0,
      maxTokensPerMonth: 0,
      maxCostPerMonth: 0,
      isActive: true,
      tstamp: now,
      crdate: now,
      deleted: false,
      hidden: false,
    });
  }

  /** Marks every visible budget of the user deleted, as TYPO3 deletes; whether there was one. */
  async deleteBudgets(beUser: number, now: number): Promise<boolean> {
    const result = await this.dataSource.getRepository(UserBudgetEntity).update({ beUser, deleted: false }, { deleted: true, tstamp: now });
    return (result.affected ?? 0) > 0;
  }
}
