/**
 * The usage feature's SQL: `tx_nrllm_service_usage` (the daily aggregate),
 * `tx_nrllm_user_budget` and TYPO3's tool switches. Sums are read with
 * plain SQL in as few round trips as the rules allow: a budget check is one
 * statement, a booking usually one.
 */
import type { DataSource, EntityManager } from 'typeorm';
import type { Dialect } from '../db/data-source';
import { DatabaseBusyError, isDatabaseBusy } from '../shared/errors';
import { KeyedMutex } from '../shared/keyed-mutex';
import type { Limits, TelemetryRow, UsageSums, UserBudgetLimits } from './usage-rules';
import { UsageHoldEntity } from './usage-hold.entity';
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
  /** Calls let through and not booked yet (unexpired holds), of the user and of the configuration; 0 unless asked for. */
  heldOfUser: number;
  heldOfConfiguration: number;
}

/** The scopes one budget check serialises on: the user's, then the configuration's (always in this order, so two checks never wait for each other in a cycle). */
export interface BudgetScopes {
  /** 0 = none. */
  beUser: number;
  /** 0 = none. */
  configurationUid: number;
}

/** What a check may do while it holds its scopes' lock. */
export interface LockedLedger {
  snapshot(input: SnapshotInput): Promise<BudgetSnapshot>;
  /** Records a call let through; its uid frees it. */
  hold(beUser: number, configurationUid: number, expiresAt: number): Promise<number>;
}

export interface SnapshotInput {
  beUser: number;
  configurationUid: number;
  dayStart: number;
  monthStart: number;
  now: number;
  /** Also count unexpired holds (the check does; standings do not). */
  countHolds?: boolean;
}

/** How long a check waits for another instance's check of the same scope before refusing (it fails closed). */
const BUDGET_LOCK_WAIT_SECONDS = 10;

type Query = (sql: string, params: unknown[]) => Promise<unknown>;

/** The columns promptwire writes to `tx_nrllm_telemetry`; the others keep their "not measured" defaults. Plain SQL: it runs on every call. */
const TELEMETRY_COLUMNS: readonly [string, keyof TelemetryRow][] = [
  ['correlation_id', 'correlationId'],
  ['operation', 'operation'],
  ['provider', 'provider'],
  ['model', 'model'],
  ['configuration_identifier', 'configurationIdentifier'],
  ['served_configuration_identifier', 'servedConfigurationIdentifier'],
  ['served_provider', 'servedProvider'],
  ['served_model', 'servedModel'],
  ['be_user', 'beUser'],
  ['source_extension', 'sourceExtension'],
  ['success', 'success'],
  ['error_class', 'errorClass'],
  ['latency_ms', 'latencyMs'],
  ['actual_input_tokens', 'actualInputTokens'],
  ['actual_output_tokens', 'actualOutputTokens'],
  ['actual_cost', 'actualCost'],
  ['response_model', 'responseModel'],
  ['crdate', 'crdate'],
];
const TELEMETRY_INSERT = `INSERT INTO tx_nrllm_telemetry (pid, ${TELEMETRY_COLUMNS.map(([column]) => column).join(', ')}) VALUES (0, ${TELEMETRY_COLUMNS.map(() => '?').join(', ')})`;
const telemetryValues = (row: TelemetryRow): unknown[] => TELEMETRY_COLUMNS.map(([, key]) => row[key]);

/** A booking chosen as a deadlock's victim is tried again, this often in all. */
const BOOK_ATTEMPTS = 3;

/** MySQL's deadlock and lock-wait-timeout errors: the transaction was rolled back and may be run again. */
function isDeadlock(error: unknown): boolean {
  const errno = (error as { errno?: unknown; driverError?: { errno?: unknown } }).driverError?.errno ?? (error as { errno?: unknown }).errno;
  return errno === 1213 || errno === 1205;
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
  private readonly local = new KeyedMutex();

  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
  ) {}

  /**
   * The user's budget row (the first non-deleted, non-hidden one by uid),
   * the user's usage today and this month, the configuration's usage today
   * over all users and, when asked, the holds of both, in one statement.
   * `beUser` 0 skips the user's parts, `configurationUid` 0 the
   * configuration's.
   */
  budgetSnapshot(input: SnapshotInput): Promise<BudgetSnapshot> {
    return snapshotWith((sql, params) => this.dataSource.query(sql, params), input);
  }

  /**
   * Runs one budget check (read, compare, hold) so that no other check of
   * the same user or configuration, in any instance on this database, runs
   * between its read and its hold:
   *
   * - SQLite: in a transaction, which takes the database's write lock first;
   * - MySQL/MariaDB: under a named lock (`GET_LOCK`) per scope, taken in the
   *   order user, configuration; the hold's insert commits before the locks
   *   are released. A booking needs no lock: it raises the ledger and drops
   *   its hold in one transaction, so a read sees both or neither.
   *
   * Within one process a keyed mutex queues checks first, so one waiting
   * check per scope holds a pooled connection.
   */
  async underBudgetLock<T>(scopes: BudgetScopes, work: (ledger: LockedLedger) => Promise<T>): Promise<T> {
    const names = [...(scopes.beUser > 0 ? [`u:${scopes.beUser}`] : []), ...(scopes.configurationUid > 0 ? [`c:${scopes.configurationUid}`] : [])];
    const locked = () => (this.dialect === 'sqlite' ? this.dataSource.transaction((manager) => work(lockedLedger(manager))) : this.mysqlLocked(names, work));
    return names.reduceRight<() => Promise<T>>((inner, name) => () => this.local.run(name, inner), locked)();
  }

  private async mysqlLocked<T>(names: string[], work: (ledger: LockedLedger) => Promise<T>): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    // Named locks are server-wide: the database name keeps databases apart; SHA1 keeps the name under 64 characters.
    const lockName = "CONCAT('promptwire:', SHA1(CONCAT(DATABASE(), ':usage:', ?)))";
    try {
      await runner.connect();
      if (names.length > 0) {
        const row = ((await runner.query(`SELECT ${names.map((_, i) => `GET_LOCK(${lockName}, ?) AS l${i}`).join(', ')}`, names.flatMap((name) => [name, BUDGET_LOCK_WAIT_SECONDS]))) as Record<string, unknown>[])[0];
        if (names.some((_, i) => Number(row?.[`l${i}`]) !== 1)) {
          await runner.query('SELECT RELEASE_ALL_LOCKS()').catch(() => undefined);
          throw new DatabaseBusyError(`Another instance held a budget check for over ${BUDGET_LOCK_WAIT_SECONDS} s`);
        }
      }
      try {
        return await work(lockedLedger(runner.manager));
      } finally {
        if (names.length > 0) await runner.query(`SELECT ${names.map(() => `RELEASE_LOCK(${lockName})`).join(', ')}`, names).catch(() => undefined);
      }
    } finally {
      await runner.release();
    }
  }

  /** Appends one call's telemetry row (rows are never updated). */
  async recordTelemetry(row: TelemetryRow): Promise<void> {
    await this.dataSource.query(TELEMETRY_INSERT, telemetryValues(row));
  }

  /** Drops a hold (its call failed, or was not made). */
  async freeHold(uid: number): Promise<void> {
    await this.dataSource.query('DELETE FROM promptwire_usage_hold WHERE uid = ?', [uid]);
  }

  /** Drops the holds that expired (their instance died mid-call); how many. */
  async sweepHolds(now: number): Promise<number> {
    const result = await this.dataSource.createQueryBuilder().delete().from(UsageHoldEntity).where('expires_at <= :now', { now }).execute();
    return result.affected ?? 0;
  }

  /**
   * Adds one call to its key's row of the day: the row's counters are
   * raised in place (the first row by uid, when a race left two), or a row
   * is inserted. Without a unique key a concurrent first booking of the
   * same key may insert a second row; every reader sums, so totals stay right.
   * The call's hold, if any, goes in the same transaction: a budget check
   * reads the call either as held or as booked, never as both or neither.
   * The call's telemetry row, if given, is appended in it too (one commit
   * per call). A telemetry row that cannot be written (a TYPO3 site on an
   * nr_llm without `tx_nrllm_telemetry`) never costs the booking: that one
   * statement fails alone (MySQL and SQLite keep the transaction), and its
   * error is returned for the caller to log.
   */
  async book(key: UsageKey, increment: UsageIncrement, now: number, holdUid: number | null = null, telemetry: TelemetryRow | null = null): Promise<{ telemetryError: unknown }> {
    const keyValues = [key.serviceType, key.serviceProvider, key.beUser, key.configurationUid, key.modelUid, key.modelId, key.taskUid, key.sourceExtension, key.requestDate];
    const set =
      'request_count = request_count + ?, tokens_used = tokens_used + ?, prompt_tokens = prompt_tokens + ?, completion_tokens = completion_tokens + ?, estimated_cost = estimated_cost + ?, tstamp = ?';
    const setValues = [increment.requests, increment.tokens, increment.promptTokens, increment.completionTokens, increment.cost, now];
    const update =
      this.dialect === 'sqlite'
        ? `UPDATE tx_nrllm_service_usage SET ${set} WHERE uid = (SELECT MIN(uid) FROM tx_nrllm_service_usage WHERE ${KEY_WHERE})`
        : `UPDATE tx_nrllm_service_usage SET ${set} WHERE ${KEY_WHERE} ORDER BY uid LIMIT 1`;
    const work = async (manager: EntityManager) => {
      const runner = manager.queryRunner!;
      const updated = await runner.query(update, [...setValues, ...keyValues], true);
      if (Number(updated.affected ?? 0) === 0) {
        await runner.query(
          `INSERT INTO tx_nrllm_service_usage (pid, service_type, service_provider, be_user, configuration_uid, model_uid, model_id, task_uid, source_extension, request_date,
             request_count, tokens_used, prompt_tokens, completion_tokens, characters_used, audio_seconds_used, images_generated, estimated_cost, tstamp, crdate)
           VALUES (0, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0, 0, 0, ?, ?, ?)`,
          [...keyValues, ...setValues, now],
        );
      }
      if (holdUid !== null) await runner.query('DELETE FROM promptwire_usage_hold WHERE uid = ?', [holdUid]);
      if (telemetry === null) return { telemetryError: null };
      try {
        await runner.query(TELEMETRY_INSERT, telemetryValues(telemetry));
        return { telemetryError: null };
      } catch (error) {
        // A deadlock or lock timeout ends the whole transaction: it is tried again as a whole.
        if (isDeadlock(error) || isDatabaseBusy(error)) throw error;
        return { telemetryError: error as unknown };
      }
    };
    if (this.dialect === 'sqlite') return this.dataSource.transaction(work);
    // READ COMMITTED: an update that finds no row of its key takes no gap lock, so two first bookings of one key insert two rows instead of deadlocking.
    for (let attempt = 1; ; attempt += 1) {
      try {
        return await this.dataSource.transaction('READ COMMITTED', work);
      } catch (error) {
        if (attempt >= BOOK_ATTEMPTS || !isDeadlock(error)) throw error;
      }
    }
  }
}

function lockedLedger(manager: EntityManager): LockedLedger {
  return {
    snapshot: (input) => snapshotWith((sql, params) => manager.query(sql, params), input),
    hold: async (beUser, configurationUid, expiresAt) => {
      const result = await manager.insert(UsageHoldEntity, { beUser, configurationUid, expiresAt });
      return Number(result.identifiers[0]?.uid);
    },
  };
}

async function snapshotWith(query: Query, input: SnapshotInput): Promise<BudgetSnapshot> {
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
  if (input.countHolds && parts.length > 0) {
    parts.push(
      `SELECT 'h' AS part, ${columns('SUM(CASE WHEN be_user = ? THEN 1 ELSE 0 END)', 'SUM(CASE WHEN configuration_uid = ? THEN 1 ELSE 0 END)', '0', '0', '0', '0', '0')}
         FROM promptwire_usage_hold WHERE (be_user = ? OR configuration_uid = ?) AND expires_at > ?`,
    );
    // 0 matches no scope: a hold of no user is nobody's.
    const beUser = input.beUser > 0 ? input.beUser : -1;
    const configurationUid = input.configurationUid > 0 ? input.configurationUid : -1;
    params.push(beUser, configurationUid, beUser, configurationUid, input.now);
  }
  const snapshot: BudgetSnapshot = {
    budget: null,
    userDaily: { requests: 0, tokens: 0, cost: 0 },
    userMonthly: { requests: 0, tokens: 0, cost: 0 },
    configurationDaily: { requests: 0, tokens: 0, cost: 0 },
    heldOfUser: 0,
    heldOfConfiguration: 0,
  };
  if (parts.length === 0) return snapshot;
  const rows = (await query(parts.join(' UNION ALL '), params)) as Record<string, unknown>[];
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
      case 'h':
        snapshot.heldOfUser = num(row.v1);
        snapshot.heldOfConfiguration = num(row.v2);
        break;
    }
  }
  return snapshot;
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

  /** TYPO3's tool switches: `enabled` per tool and per group (a missing row: on). */
  async toolSwitches(): Promise<{ tools: Map<string, boolean>; groups: Map<string, boolean> }> {
    const [tools, groups] = await Promise.all([
      this.dataSource.query('SELECT tool_name AS name, enabled FROM tx_nrllm_tool_state') as Promise<Record<string, unknown>[]>,
      this.dataSource.query('SELECT group_name AS name, enabled FROM tx_nrllm_tool_group_state') as Promise<Record<string, unknown>[]>,
    ]);
    // Any value but 0 is on, as TYPO3 reads the smallint.
    const map = (rows: Record<string, unknown>[]) => new Map(rows.map((row) => [String(row.name ?? ''), num(row.enabled) !== 0]));
    return { tools: map(tools), groups: map(groups) };
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
