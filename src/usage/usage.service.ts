/**
 * What the API asks of the usage feature: the backend users' budgets
 * (`tx_nrllm_user_budget`, ADMIN), where a user or a configuration stands
 * against its limits, and the ledger's sums over days, grouped and
 * gap-filled. The rules are usage-rules.ts; the SQL usage.repository.ts.
 */
import { BadUserInputError, ForbiddenError } from '../shared/errors';
import { Role, roleAtLeast, type Caller } from '../auth/roles';
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import {
  daysBetween,
  dayStart,
  localDate,
  hasAnyLimit,
  MAX_USAGE_DAYS,
  remaining,
  UsageDayClock,
  type Limits,
  type UsageSums,
} from './usage-rules';
import { USAGE_DIMENSION_COLUMNS, type UsageDimensionName, type UsageFigures, type UsageReports, type UsageRepository } from './usage.repository';
import type { UserBudgetEntity } from './user-budget.entity';

export type { UsageDimensionName, UsageFigures } from './usage.repository';

/** What setUserBudget may change; absent keys keep their value (0 on a new budget). */
export interface UserBudgetWrite {
  maxRequestsPerDay?: number | null;
  maxTokensPerDay?: number | null;
  maxCostPerDay?: number | null;
  maxRequestsPerMonth?: number | null;
  maxTokensPerMonth?: number | null;
  maxCostPerMonth?: number | null;
  isActive?: boolean | null;
}

const COUNT_LIMITS = ['maxRequestsPerDay', 'maxTokensPerDay', 'maxRequestsPerMonth', 'maxTokensPerMonth'] as const;
const COST_LIMITS = ['maxCostPerDay', 'maxCostPerMonth'] as const;
/** `int(11) unsigned` columns (TYPO3's GraphQL-facing bound is the signed Int). */
const MAX_COUNT = 2_147_483_647;
/** `decimal(10,4)`. */
const MAX_COST = 999_999.9999;
/** The largest backend user uid: `int(11) unsigned`, within GraphQL's Int. */
const MAX_BE_USER = 2_147_483_647;

/** One limit and where it stands: used, the limit (null = none), what is left (null = unlimited). */
export interface LimitStanding {
  used: number;
  limit: number | null;
  remaining: number | null;
}

export interface WindowStanding {
  /** The window's first instant (local midnight, or the 1st of the month), Unix seconds. */
  from: number;
  requests: LimitStanding;
  tokens: LimitStanding;
  cost: LimitStanding;
}

export interface BudgetStanding {
  beUser: number;
  /** The budget that applies; null when the user has none (no limits). */
  budget: UserBudgetEntity | null;
  day: WindowStanding;
  month: WindowStanding;
}

export interface ConfigurationStanding {
  configuration: ConfigurationEntity;
  day: WindowStanding;
}

export interface UsageGroup {
  /** Local midnight of the day (grouped by DAY), Unix seconds. */
  day: number | null;
  /** The day as `YYYY-MM-DD` in the usage time zone. */
  date: string | null;
  /** The configuration's identifier (null when it no longer exists). */
  configuration: string | null;
  modelId: string | null;
  configurationUid: number | null;
  beUser: number | null;
  source: string | null;
  provider: string | null;
  taskUid: number | null;
  serviceType: string | null;
  figures: UsageFigures;
}

/** The most groups one usage answer holds. */
export const MAX_USAGE_ROWS = 500;

function standing(used: number, limit: number, active: boolean): LimitStanding {
  const applies = active && limit > 0;
  return { used, limit: applies ? limit : null, remaining: applies ? remaining(limit, used) : null };
}

function windowStanding(from: number, used: UsageSums, limits: Limits | null): WindowStanding {
  const active = limits !== null;
  return {
    from,
    requests: standing(used.requests, limits?.requests ?? 0, active),
    tokens: standing(used.tokens, limits?.tokens ?? 0, active),
    cost: standing(used.cost, limits?.cost ?? 0, active),
  };
}

function checkBeUser(beUser: number): void {
  if (!Number.isInteger(beUser) || beUser < 1 || beUser > MAX_BE_USER) throw new BadUserInputError('beUser must be a TYPO3 backend user uid (a whole number of at least 1)', 'beUser');
}

export class UsageService {
  private readonly clock: UsageDayClock;

  constructor(
    private readonly repository: UsageRepository,
    private readonly reports: UsageReports,
    timeZone: string,
    private readonly now: () => number = Date.now,
    /** Configurations by uid (their caps and identifiers). */
    private readonly configurations: { findByUids(uids: readonly number[]): Promise<ConfigurationEntity[]>; findByIdentifier(identifier: string): Promise<ConfigurationEntity | null> },
  ) {
    this.clock = new UsageDayClock(timeZone);
  }

  get timeZone(): string {
    return this.clock.timeZone;
  }

  private nowSeconds(): number {
    return Math.floor(this.now() / 1000);
  }

  budget(beUser: number): Promise<UserBudgetEntity | null> {
    checkBeUser(beUser);
    return this.reports.budgetOf(beUser);
  }

  budgets(): Promise<UserBudgetEntity[]> {
    return this.reports.budgets();
  }

  /** Creates the user's budget, or changes the one that applies (the first visible row). */
  async setBudget(beUser: number, input: UserBudgetWrite): Promise<UserBudgetEntity> {
    checkBeUser(beUser);
    for (const key of COUNT_LIMITS) {
      const value = input[key];
      if (value != null && (!Number.isInteger(value) || value < 0 || value > MAX_COUNT)) throw new BadUserInputError(`${key} must be a whole number from 0 to ${MAX_COUNT} (0 = no limit)`, key);
    }
    for (const key of COST_LIMITS) {
      const value = input[key];
      if (value != null && (!Number.isFinite(value) || value < 0 || value > MAX_COST)) throw new BadUserInputError(`${key} must be a number of US dollars from 0 to ${MAX_COST} (0 = no limit)`, key);
    }
    const now = this.nowSeconds();
    const row = (await this.reports.budgetOf(beUser)) ?? this.reports.createBudget(beUser, now);
    for (const key of COUNT_LIMITS) if (input[key] != null) row[key] = input[key];
    for (const key of COST_LIMITS) if (input[key] != null) row[key] = Math.round(input[key] * 10_000) / 10_000;
    if (input.isActive != null) row.isActive = input.isActive;
    row.tstamp = now;
    return this.reports.saveBudget(row);
  }

  deleteBudget(beUser: number): Promise<boolean> {
    checkBeUser(beUser);
    return this.reports.deleteBudgets(beUser, this.nowSeconds());
  }

  /** Where a backend user stands today and this month; an ADMIN may ask about anyone, others about themselves. */
  async budgetStatus(beUser: number, caller: Caller): Promise<BudgetStanding> {
    checkBeUser(beUser);
    if (!roleAtLeast(caller.role, Role.ADMIN) && caller.beUser !== beUser) throw new ForbiddenError('Only an ADMIN may read another backend user\'s budget', 'beUser');
    return this.standingOf(beUser);
  }

  /** The caller's own standing (null without a backend user) and, when named, the configuration's daily caps. */
  async remainingBudget(caller: Caller, configurationIdentifier: string | null): Promise<{ user: BudgetStanding | null; configuration: ConfigurationStanding | null }> {
    const user = caller.beUser > 0 ? await this.standingOf(caller.beUser) : null;
    if (configurationIdentifier === null) return { user, configuration: null };
    const configuration = await this.configurations.findByIdentifier(configurationIdentifier);
    if (!configuration) throw new BadUserInputError(`No configuration with identifier "${configurationIdentifier}"`, 'configuration');
    const now = this.nowSeconds();
    const day = this.clock.dayOf(now);
    const snapshot = await this.repository.budgetSnapshot({ beUser: 0, configurationUid: configuration.uid, dayStart: day, monthStart: day, now });
    const caps = { requests: Number(configuration.maxRequestsPerDay) || 0, tokens: Number(configuration.maxTokensPerDay) || 0, cost: Number(configuration.maxCostPerDay) || 0 };
    return { user, configuration: { configuration, day: windowStanding(day, snapshot.configurationDaily, hasAnyLimit(caps) ? caps : null) } };
  }

  private async standingOf(beUser: number): Promise<BudgetStanding> {
    const now = this.nowSeconds();
    const day = this.clock.dayOf(now);
    const month = this.clock.monthOf(now);
    const snapshot = await this.repository.budgetSnapshot({ beUser, configurationUid: 0, dayStart: day, monthStart: month, now });
    const applies = snapshot.budget !== null && snapshot.budget.isActive;
    return {
      beUser,
      budget: applies ? await this.reports.budgetOf(beUser) : null,
      day: windowStanding(day, snapshot.userDaily, applies ? snapshot.budget!.daily : null),
      month: windowStanding(month, snapshot.userMonthly, applies ? snapshot.budget!.monthly : null),
    };
  }

  /** The days of a usage query: `from` ≤ `to`, at most 366 days. */
  private daysOf(from: Date, to: Date): number[] {
    const fromSeconds = Math.floor(from.getTime() / 1000);
    const toSeconds = Math.floor(to.getTime() / 1000);
    if (!Number.isFinite(fromSeconds) || !Number.isFinite(toSeconds)) throw new BadUserInputError('from and to must be valid instants', 'from');
    if (fromSeconds > toSeconds) throw new BadUserInputError('from must not be after to', 'from');
    const days = daysBetween(fromSeconds, toSeconds, this.clock.timeZone);
    if (days.length > MAX_USAGE_DAYS) throw new BadUserInputError(`A usage query spans at most ${MAX_USAGE_DAYS} days`, 'to');
    return days;
  }

  /** The ledger's sums of the days from `from` to `to` (local days of USAGE_TIMEZONE, both included). */
  async totals(from: Date, to: Date): Promise<UsageFigures & { days: number }> {
    const days = this.daysOf(from, to);
    const [row] = await this.reports.grouped(days[0]!, days[days.length - 1]!, []);
    return { ...(row?.sums ?? ZERO), days: days.length };
  }

  /**
   * The sums per group. With DAY, every day of the range is there for each
   * group, zeros included; groups are ranked by cost, then tokens, and only
   * as many as fit `limit` rows are kept (whole series, never cut days).
   */
  async usage(from: Date, to: Date, groupBy: readonly UsageDimensionName[], limit: number): Promise<UsageGroup[]> {
    if (!Number.isInteger(limit) || limit < 1 || limit > MAX_USAGE_ROWS) throw new BadUserInputError(`limit must be 1 to ${MAX_USAGE_ROWS}`, 'limit');
    const dimensions = [...new Set(groupBy)].filter((dimension) => dimension in USAGE_DIMENSION_COLUMNS);
    const days = this.daysOf(from, to);
    const rows = await this.reports.grouped(days[0]!, days[days.length - 1]!, dimensions);
    const byDay = dimensions.includes('DAY');
    const others = dimensions.filter((dimension) => dimension !== 'DAY');
    const keyOf = (values: UsageGroupValues) => JSON.stringify(others.map((dimension) => values[dimension] ?? null));

    // Rank the groups (all but the day) by what they spent.
    const groups = new Map<string, { values: UsageGroupValues; sums: UsageFigures }>();
    for (const row of rows) {
      const key = keyOf(row.values);
      const group = groups.get(key);
      groups.set(key, group ? { values: group.values, sums: addFigures(group.sums, row.sums) } : { values: row.values, sums: row.sums });
    }
    if (byDay && groups.size === 0) groups.set(keyOf({}), { values: {}, sums: ZERO });
    const ranked = [...groups.entries()].sort(([, a], [, b]) => b.sums.cost - a.sums.cost || b.sums.tokens - a.sums.tokens);
    const kept = ranked.slice(0, Math.max(1, Math.floor(limit / (byDay ? days.length : 1))));

    if (!byDay) return this.named(kept.map(([, group]) => toGroup(group.values, group.sums)));
    // A day series per group, zeros where nothing was booked (TYPO3 rows written on an odd instant count on their local day).
    const cells = new Map<string, UsageFigures>();
    for (const row of rows) {
      const day = dayStart(Number(row.values.DAY ?? 0), this.clock.timeZone);
      const cellKey = `${day}|${keyOf(row.values)}`;
      const cell = cells.get(cellKey);
      cells.set(cellKey, cell ? addFigures(cell, row.sums) : row.sums);
    }
    const result: UsageGroup[] = [];
    for (const day of days) {
      for (const [key, group] of kept) {
        result.push(toGroup({ ...group.values, DAY: day }, cells.get(`${day}|${key}`) ?? ZERO));
      }
    }
    return this.named(result);
  }

  /** Puts the local date and the configuration's identifier on each group. */
  private async named(groups: UsageGroup[]): Promise<UsageGroup[]> {
    const uids = [...new Set(groups.map((group) => group.configurationUid).filter((uid): uid is number => uid !== null && uid > 0))];
    const identifiers = new Map((uids.length > 0 ? await this.configurations.findByUids(uids) : []).map((row) => [row.uid, row.identifier]));
    const dates = new Map<number, string>();
    for (const group of groups) {
      if (group.day !== null) {
        let date = dates.get(group.day);
        if (date === undefined) dates.set(group.day, (date = localDate(group.day, this.clock.timeZone)));
        group.date = date;
      }
      if (group.configurationUid !== null) group.configuration = identifiers.get(group.configurationUid) ?? null;
    }
    return groups;
  }
}

type UsageGroupValues = Partial<Record<UsageDimensionName, string | number>>;

const ZERO: UsageFigures = Object.freeze({ requests: 0, tokens: 0, promptTokens: 0, completionTokens: 0, cost: 0 });

function addFigures(a: UsageFigures, b: UsageFigures): UsageFigures {
  return { requests: a.requests + b.requests, tokens: a.tokens + b.tokens, promptTokens: a.promptTokens + b.promptTokens, completionTokens: a.completionTokens + b.completionTokens, cost: a.cost + b.cost };
}

function toGroup(values: UsageGroupValues, figures: UsageFigures): UsageGroup {
  const text = (value: string | number | undefined) => (value === undefined ? null : String(value));
  const number = (value: string | number | undefined) => (value === undefined ? null : Number(value));
  return {
    day: number(values.DAY),
    date: null,
    configuration: null,
    modelId: text(values.MODEL),
    configurationUid: number(values.CONFIGURATION),
    beUser: number(values.USER),
    source: text(values.SOURCE),
    provider: text(values.PROVIDER),
    taskUid: number(values.TASK),
    serviceType: text(values.SERVICE_TYPE),
    figures,
  };
}
