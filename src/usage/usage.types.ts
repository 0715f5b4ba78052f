import { Field, Float, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { DateTimeScalar } from '../graphql/scalars';
import type { BudgetStanding, LimitStanding, UsageGroup, WindowStanding } from './usage.service';
import type { UserBudgetEntity } from './user-budget.entity';

export enum UsageDimension {
  DAY = 'DAY',
  MODEL = 'MODEL',
  CONFIGURATION = 'CONFIGURATION',
  USER = 'USER',
  SOURCE = 'SOURCE',
  PROVIDER = 'PROVIDER',
  TASK = 'TASK',
  SERVICE_TYPE = 'SERVICE_TYPE',
}

registerEnumType(UsageDimension, {
  name: 'UsageDimension',
  description:
    'What `usage` groups by: DAY (local days of USAGE_TIMEZONE, every day of the range, zeros included), MODEL (model id), CONFIGURATION, USER (TYPO3 backend user), SOURCE (the calling integration), PROVIDER (nr_llm\'s provider id), TASK, SERVICE_TYPE (`tools`, `chat`, …).',
});

@ObjectType({ simpleResolvers: true, description: 'A TYPO3 backend user\'s spending limits (`tx_nrllm_user_budget`); 0 = no limit.' })
export class UserBudget {
  @Field(() => Int) uid!: number;
  @Field(() => Int) beUser!: number;
  @Field(() => Int) maxRequestsPerDay!: number;
  @Field(() => Int) maxTokensPerDay!: number;
  @Field(() => Float, { description: 'US dollars.' }) maxCostPerDay!: number;
  @Field(() => Int) maxRequestsPerMonth!: number;
  @Field(() => Int) maxTokensPerMonth!: number;
  @Field(() => Float, { description: 'US dollars.' }) maxCostPerMonth!: number;
  @Field({ description: 'An inactive budget sets no limit.' }) isActive!: boolean;
}

const count = (value: unknown): number => {
  const number = Number(value);
  return Number.isFinite(number) && number > 0 ? Math.min(2_147_483_647, Math.trunc(number)) : 0;
};
const dollars = (value: unknown): number => {
  const number = Number(value);
  return Number.isFinite(number) && number > 0 ? number : 0;
};

export function toUserBudget(row: UserBudgetEntity): UserBudget {
  return {
    uid: row.uid,
    beUser: count(row.beUser),
    maxRequestsPerDay: count(row.maxRequestsPerDay),
    maxTokensPerDay: count(row.maxTokensPerDay),
    maxCostPerDay: dollars(row.maxCostPerDay),
    maxRequestsPerMonth: count(row.maxRequestsPerMonth),
    maxTokensPerMonth: count(row.maxTokensPerMonth),
    maxCostPerMonth: dollars(row.maxCostPerMonth),
    isActive: row.isActive,
  };
}

@InputType({ description: 'Limits to set; an absent field keeps its value (0 on a new budget). 0 = no limit.' })
export class UserBudgetInput {
  @Field(() => Int, { nullable: true }) maxRequestsPerDay?: number | null;
  @Field(() => Int, { nullable: true }) maxTokensPerDay?: number | null;
  @Field(() => Float, { nullable: true, description: 'US dollars, four decimals.' }) maxCostPerDay?: number | null;
  @Field(() => Int, { nullable: true }) maxRequestsPerMonth?: number | null;
  @Field(() => Int, { nullable: true }) maxTokensPerMonth?: number | null;
  @Field(() => Float, { nullable: true, description: 'US dollars, four decimals.' }) maxCostPerMonth?: number | null;
  @Field(() => Boolean, { nullable: true }) isActive?: boolean | null;
}

@ObjectType({ simpleResolvers: true, description: 'One limit: what is used, the limit (null: none) and what remains (null: unlimited).' })
export class BudgetLimit {
  @Field(() => Float) used!: number;
  @Field(() => Float, { nullable: true }) limit!: number | null;
  @Field(() => Float, { nullable: true }) remaining!: number | null;
}

@ObjectType({ simpleResolvers: true, description: 'A budget window: today (from local midnight) or this month (from the 1st).' })
export class BudgetWindow {
  @Field(() => DateTimeScalar) from!: Date;
  @Field(() => BudgetLimit) requests!: BudgetLimit;
  @Field(() => BudgetLimit) tokens!: BudgetLimit;
  @Field(() => BudgetLimit, { description: 'US dollars.' }) cost!: BudgetLimit;
}

@ObjectType({ simpleResolvers: true, description: 'Where a backend user stands against their budget, read from the usage ledger TYPO3 shares.' })
export class BudgetStatus {
  @Field(() => Int) beUser!: number;
  @Field(() => UserBudget, { nullable: true, description: 'The budget that applies; null: none (or an inactive one).' }) budget!: UserBudget | null;
  @Field(() => BudgetWindow) day!: BudgetWindow;
  @Field(() => BudgetWindow) month!: BudgetWindow;
}

@ObjectType({ simpleResolvers: true, description: 'A configuration\'s daily caps over all users.' })
export class ConfigurationBudget {
  @Field() configuration!: string;
  @Field(() => BudgetWindow) day!: BudgetWindow;
}

@ObjectType({ simpleResolvers: true, description: 'What the calling token may still spend.' })
export class RemainingBudget {
  @Field(() => Int, { description: 'The token\'s backend user (0 = none).' }) beUser!: number;
  @Field(() => BudgetStatus, { nullable: true, description: 'Null for a token without a backend user.' }) user!: BudgetStatus | null;
  @Field(() => ConfigurationBudget, { nullable: true, description: 'When `configuration` was named.' }) configuration!: ConfigurationBudget | null;
}

@ObjectType({ simpleResolvers: true, description: 'One group of the usage ledger; the dimensions not grouped by are null.' })
export class UsageRow {
  @Field(() => DateTimeScalar, { nullable: true, description: 'The local midnight of the day (DAY).' }) day!: Date | null;
  @Field(() => String, { nullable: true, description: 'The day as `YYYY-MM-DD` in USAGE_TIMEZONE (DAY).' }) date!: string | null;
  @Field(() => String, { nullable: true }) modelId!: string | null;
  @Field(() => Int, { nullable: true }) configurationUid!: number | null;
  @Field(() => String, { nullable: true, description: 'The configuration\'s identifier; null when it no longer exists.' }) configuration!: string | null;
  @Field(() => Int, { nullable: true }) beUser!: number | null;
  @Field(() => String, { nullable: true }) source!: string | null;
  @Field(() => String, { nullable: true }) provider!: string | null;
  @Field(() => Int, { nullable: true }) taskUid!: number | null;
  @Field(() => String, { nullable: true }) serviceType!: string | null;
  @Field(() => Float, { description: 'Provider calls (a whole number).' }) requests!: number;
  @Field(() => Float, { description: 'A whole number; Float because a sum may pass 2^31.' }) tokens!: number;
  @Field(() => Float) promptTokens!: number;
  @Field(() => Float) completionTokens!: number;
  @Field(() => Float, { description: 'US dollars.' }) cost!: number;
}

@ObjectType({ simpleResolvers: true, description: 'The ledger\'s sums over the days of a range.' })
export class UsageTotals {
  @Field(() => Int, { description: 'Days in the range.' }) days!: number;
  @Field(() => Float) requests!: number;
  @Field(() => Float) tokens!: number;
  @Field(() => Float) promptTokens!: number;
  @Field(() => Float) completionTokens!: number;
  @Field(() => Float, { description: 'US dollars.' }) cost!: number;
}

const fromUnix = (seconds: number) => new Date(seconds * 1000);

/** Sums booked as decimals come back with float noise: whole micro-dollars. */
const roundCost = (cost: number) => Math.round(cost * 1e6) / 1e6;

function toLimit(standing: LimitStanding, isCost = false): BudgetLimit {
  return isCost ? { used: roundCost(standing.used), limit: standing.limit, remaining: standing.remaining === null ? null : roundCost(standing.remaining) } : standing;
}

export function toBudgetWindow(window: WindowStanding): BudgetWindow {
  return { from: fromUnix(window.from), requests: toLimit(window.requests), tokens: toLimit(window.tokens), cost: toLimit(window.cost, true) };
}

export function toBudgetStatus(standing: BudgetStanding): BudgetStatus {
  return { beUser: standing.beUser, budget: standing.budget ? toUserBudget(standing.budget) : null, day: toBudgetWindow(standing.day), month: toBudgetWindow(standing.month) };
}

export function toUsageRow(group: UsageGroup): UsageRow {
  return {
    day: group.day === null ? null : fromUnix(group.day),
    date: group.date,
    modelId: group.modelId,
    configurationUid: group.configurationUid,
    configuration: group.configuration,
    beUser: group.beUser,
    source: group.source,
    provider: group.provider,
    taskUid: group.taskUid,
    serviceType: group.serviceType,
    requests: group.figures.requests,
    tokens: group.figures.tokens,
    promptTokens: group.figures.promptTokens,
    completionTokens: group.figures.completionTokens,
    cost: roundCost(group.figures.cost),
  };
}

export function toUsageTotals(totals: { days: number; requests: number; tokens: number; promptTokens: number; completionTokens: number; cost: number }): UsageTotals {
  return { ...totals, cost: roundCost(totals.cost) };
}
