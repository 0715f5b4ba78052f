/**
 * The rules of nr_llm's usage ledger and budgets, as pure functions:
 * the day a call is booked on (local midnight in USAGE_TIMEZONE), the
 * aggregation key's values, the order and comparisons of the limits, the
 * refusal message, the remaining budget and the gap-filled daily series.
 * The ledger, the budget check and the usage queries all call these.
 */

/** What a window of `tx_nrllm_service_usage` sums to. */
export interface UsageSums {
  requests: number;
  tokens: number;
  /** US dollars. */
  cost: number;
}

export const NO_USAGE: UsageSums = Object.freeze({ requests: 0, tokens: 0, cost: 0 });

/** One scope's limits; 0 = unlimited (nr_llm's convention). */
export interface Limits {
  requests: number;
  tokens: number;
  cost: number;
}

/** A `tx_nrllm_user_budget` row as the check needs it. */
export interface UserBudgetLimits {
  isActive: boolean;
  daily: Limits;
  monthly: Limits;
}

/** nr_llm's `BudgetCheckResult::LIMIT_*` ids, in the order they are checked within a scope. */
export type LimitId =
  | 'daily_requests'
  | 'daily_tokens'
  | 'daily_cost'
  | 'monthly_requests'
  | 'monthly_tokens'
  | 'monthly_cost'
  | 'configuration_daily_requests'
  | 'configuration_daily_tokens'
  | 'configuration_daily_cost';

const LIMIT_LABELS: Record<LimitId, string> = {
  daily_requests: 'daily request count',
  daily_tokens: 'daily token usage',
  daily_cost: 'daily cost',
  monthly_requests: 'monthly request count',
  monthly_tokens: 'monthly token usage',
  monthly_cost: 'monthly cost',
  configuration_daily_requests: 'configuration daily request count',
  configuration_daily_tokens: 'configuration daily token usage',
  configuration_daily_cost: 'configuration daily cost',
};

export type Scope = 'daily' | 'monthly' | 'configuration_daily';

/** A limit the next call would break. */
export interface BudgetBreach {
  limit: LimitId;
  used: number;
  max: number;
  /** `AI budget exhausted: <label> is at <used> of <max>` */
  message: string;
}

/** A limit that is set: a finite number above 0. Odd values in rows TYPO3 wrote (negative, NaN) set no limit. */
function isSet(limit: number): boolean {
  return Number.isFinite(limit) && limit > 0;
}

export function hasAnyLimit(limits: Limits): boolean {
  return isSet(limits.requests) || isSet(limits.tokens) || isSet(limits.cost);
}

/**
 * nr_llm's number format in the message: a whole number bare, anything else
 * with two decimals and PHP's `number_format` thousands separator.
 */
export function formatBudgetNumber(value: number): string {
  if (Number.isInteger(value)) return String(value);
  const [whole, fraction] = Math.abs(value).toFixed(2).split('.');
  const grouped = whole!.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${value < 0 ? '-' : ''}${grouped}.${fraction}`;
}

export function budgetMessage(limit: LimitId, used: number, max: number): string {
  return `AI budget exhausted: ${LIMIT_LABELS[limit]} is at ${formatBudgetNumber(used)} of ${formatBudgetNumber(max)}`;
}

function breach(limit: LimitId, used: number, max: number): BudgetBreach {
  return { limit, used, max, message: budgetMessage(limit, used, max) };
}

/**
 * nr_llm's comparisons for one scope, first breach wins: requests
 * `used + 1 > limit` (the call is one more request); tokens `used > limit`
 * (the call's tokens are unknown before it, so a call at exactly the limit
 * still goes); cost `used + planned > limit` (planned clamped to ≥ 0).
 */
export function compareLimits(scope: Scope, used: UsageSums, limits: Limits, plannedCost = 0): BudgetBreach | null {
  const planned = Number.isFinite(plannedCost) ? Math.max(0, plannedCost) : 0;
  const prefix = scope === 'configuration_daily' ? 'configuration_daily' : scope;
  if (isSet(limits.requests) && used.requests + 1 > limits.requests) return breach(`${prefix}_requests` as LimitId, used.requests, limits.requests);
  if (isSet(limits.tokens) && used.tokens > limits.tokens) return breach(`${prefix}_tokens` as LimitId, used.tokens, limits.tokens);
  if (isSet(limits.cost) && used.cost + planned > limits.cost) return breach(`${prefix}_cost` as LimitId, used.cost, limits.cost);
  return null;
}

/** Whether a user's budget row sets any limit at all: inactive, or without limits, it is skipped. */
export function budgetApplies(budget: UserBudgetLimits | null): budget is UserBudgetLimits {
  return budget !== null && budget.isActive && (hasAnyLimit(budget.daily) || hasAnyLimit(budget.monthly));
}

/** Which windows of the user's usage the check must read. */
export function windowsNeeded(budget: UserBudgetLimits | null): { daily: boolean; monthly: boolean } {
  if (!budgetApplies(budget)) return { daily: false, monthly: false };
  return { daily: hasAnyLimit(budget.daily), monthly: hasAnyLimit(budget.monthly) };
}

/**
 * The whole check in nr_llm's order: the user's daily limits, then the
 * user's monthly limits, then the configuration's daily caps (summed over
 * all users). Windows that were not read are passed as null and skipped.
 */
export function checkBudgets(input: {
  budget: UserBudgetLimits | null;
  userDaily: UsageSums | null;
  userMonthly: UsageSums | null;
  configurationLimits: Limits | null;
  configurationDaily: UsageSums | null;
  plannedCost?: number;
}): BudgetBreach | null {
  const planned = input.plannedCost ?? 0;
  if (budgetApplies(input.budget)) {
    if (hasAnyLimit(input.budget.daily)) {
      const found = compareLimits('daily', input.userDaily ?? NO_USAGE, input.budget.daily, planned);
      if (found) return found;
    }
    if (hasAnyLimit(input.budget.monthly)) {
      const found = compareLimits('monthly', input.userMonthly ?? NO_USAGE, input.budget.monthly, planned);
      if (found) return found;
    }
  }
  if (input.configurationLimits && hasAnyLimit(input.configurationLimits)) {
    return compareLimits('configuration_daily', input.configurationDaily ?? NO_USAGE, input.configurationLimits, planned);
  }
  return null;
}

/** What is left of one limit: null when unlimited, never below 0. */
export function remaining(limit: number, used: number): number | null {
  if (!isSet(limit)) return null;
  return Math.max(0, limit - used);
}

/** Usage plus calls this process has under way and booked-but-unseen: what a check compares. */
export function addSums(a: UsageSums, b: UsageSums): UsageSums {
  return { requests: a.requests + b.requests, tokens: a.tokens + b.tokens, cost: a.cost + b.cost };
}

// ---------------------------------------------------------------------------
// The aggregation key

/** nr_llm's provider ids (`getIdentifier()`): Anthropic is `claude`; an unknown type books as `unknown`. */
export function serviceProviderOf(adapterType: string | null | undefined): string {
  switch (adapterType) {
    case 'anthropic':
      return 'claude';
    case null:
    case undefined:
    case '':
      return 'unknown';
    default:
      return adapterType;
  }
}

/** `source_extension` holds at most 64 characters; a longer name is cut, not refused (a label, not a key). */
export function sourceExtensionOf(source: string | null | undefined): string {
  return Array.from(source ?? '').slice(0, 64).join('');
}

/** `model_id` is varchar(150). */
export function modelIdOf(modelId: string | null | undefined): string {
  return Array.from(modelId ?? '').slice(0, 150).join('');
}

// ---------------------------------------------------------------------------
// Days in the usage time zone

const formatters = new Map<string, Intl.DateTimeFormat>();

function formatterFor(timeZone: string): Intl.DateTimeFormat {
  let formatter = formatters.get(timeZone);
  if (!formatter) {
    formatter = new Intl.DateTimeFormat('en-US', {
      timeZone,
      hourCycle: 'h23',
      year: 'numeric',
      month: 'numeric',
      day: 'numeric',
      hour: 'numeric',
      minute: 'numeric',
      second: 'numeric',
    });
    formatters.set(timeZone, formatter);
  }
  return formatter;
}

/** Whether `timeZone` is an IANA zone name this runtime knows. */
export function isValidTimeZone(timeZone: string): boolean {
  try {
    formatterFor(timeZone);
    return true;
  } catch {
    return false;
  }
}

interface LocalTime {
  year: number;
  month: number;
  day: number;
  hour: number;
  minute: number;
  second: number;
}

function localTime(epochSeconds: number, timeZone: string): LocalTime {
  const parts: Record<string, number> = {};
  for (const part of formatterFor(timeZone).formatToParts(new Date(epochSeconds * 1000))) {
    if (part.type !== 'literal') parts[part.type] = Number(part.value);
  }
  return { year: parts.year!, month: parts.month!, day: parts.day!, hour: parts.hour!, minute: parts.minute!, second: parts.second! };
}

/** Seconds the zone is ahead of UTC at that instant. */
function offsetAt(epochSeconds: number, timeZone: string): number {
  const local = localTime(epochSeconds, timeZone);
  return Date.UTC(local.year, local.month - 1, local.day, local.hour, local.minute, local.second) / 1000 - epochSeconds;
}

/**
 * The instant a local calendar date starts: its midnight, or, where the zone
 * skips midnight (a DST change at 00:00), the first local time that exists,
 * as PHP's `strtotime('today')` gives it.
 */
function startOfLocalDate(year: number, month: number, day: number, timeZone: string): number {
  const asUtc = Date.UTC(year, month - 1, day) / 1000;
  let guess = asUtc - offsetAt(asUtc, timeZone);
  guess = asUtc - offsetAt(guess, timeZone);
  const local = localTime(guess, timeZone);
  // A skipped midnight lands on the previous day's 23:xx: go forward to the date's first instant.
  if (local.day !== day) guess += 3600;
  return guess;
}

/** `request_date`: the start of the local day (in `timeZone`) that contains the instant. */
export function dayStart(epochSeconds: number, timeZone: string): number {
  const local = localTime(epochSeconds, timeZone);
  return startOfLocalDate(local.year, local.month, local.day, timeZone);
}

/** The start of the local month that contains the instant (the monthly budget window). */
export function monthStart(epochSeconds: number, timeZone: string): number {
  const local = localTime(epochSeconds, timeZone);
  return startOfLocalDate(local.year, local.month, 1, timeZone);
}

/** The start of the local day after the one `dayStartSeconds` begins (23, 24 or 25 hours later). */
export function nextDayStart(dayStartSeconds: number, timeZone: string): number {
  return dayStart(dayStartSeconds + 36 * 3600, timeZone);
}

/** The local date of a day start, `YYYY-MM-DD`. */
export function localDate(epochSeconds: number, timeZone: string): string {
  const local = localTime(epochSeconds, timeZone);
  return `${local.year}-${String(local.month).padStart(2, '0')}-${String(local.day).padStart(2, '0')}`;
}

/** The most days one usage query may span. */
export const MAX_USAGE_DAYS = 366;

/**
 * Every day start from the day of `from` to the day of `to`, both included
 * (nr_llm's `fillDailyGaps` walks the same way). Empty when `from > to`.
 */
export function daysBetween(from: number, to: number, timeZone: string): number[] {
  const days: number[] = [];
  if (from > to) return days;
  const last = dayStart(to, timeZone);
  for (let day = dayStart(from, timeZone); day <= last && days.length <= MAX_USAGE_DAYS; day = nextDayStart(day, timeZone)) days.push(day);
  return days;
}

/** A daily series with every day of the range, zeros where nothing was booked. */
export function fillDailyGaps<T>(days: readonly number[], rows: ReadonlyMap<number, T>, empty: (day: number) => T): T[] {
  return days.map((day) => rows.get(day) ?? empty(day));
}

/**
 * A clock for booking: the day start of `now`, computed again only when the
 * day changes (formatting dates in a zone costs microseconds per call).
 */
export class UsageDayClock {
  private start = Number.NEGATIVE_INFINITY;
  private end = Number.NEGATIVE_INFINITY;
  private month = 0;

  constructor(readonly timeZone: string) {}

  /** The start of the local day of the instant (`request_date`). */
  dayOf(epochSeconds: number): number {
    this.move(epochSeconds);
    return this.start;
  }

  /** The start of the local month of the instant. */
  monthOf(epochSeconds: number): number {
    this.move(epochSeconds);
    return this.month;
  }

  private move(epochSeconds: number): void {
    if (epochSeconds >= this.start && epochSeconds < this.end) return;
    this.start = dayStart(epochSeconds, this.timeZone);
    this.end = nextDayStart(this.start, this.timeZone);
    this.month = monthStart(epochSeconds, this.timeZone);
  }
}

// ---------------------------------------------------------------------------
// Telemetry: one content-free row per provider call (`tx_nrllm_telemetry`)

/** What one provider call of a run leaves in `tx_nrllm_telemetry` (the columns promptwire measures; the rest keep their "not measured" defaults). */
export interface TelemetryRow {
  correlationId: string;
  operation: string;
  provider: string;
  model: string;
  configurationIdentifier: string;
  servedConfigurationIdentifier: string;
  servedProvider: string;
  servedModel: string;
  beUser: number;
  sourceExtension: string;
  success: number;
  errorClass: string;
  latencyMs: number;
  actualInputTokens: number | null;
  actualOutputTokens: number | null;
  /** Dollars with 8 decimals, as text for the decimal column; null when unpriced or failed. */
  actualCost: string | null;
  responseModel: string;
  crdate: number;
}

/** The outcome of one call, as the ledger saw it. */
export type CallOutcome =
  | { success: true; usage: { promptTokens: number; completionTokens: number; totalTokens: number }; cost: number | null; latencyMs: number; responseModel: string }
  | { success: false; error: unknown; latencyMs: number };

const cut = (text: string, length: number) => Array.from(text).slice(0, length).join('');

/** The class of a failure, never its message (messages can carry payload fragments). */
export function errorClassOf(error: unknown): string {
  if (error instanceof Error) return cut(error.constructor?.name || error.name || 'Error', 255);
  return cut(typeof error, 255);
}

/**
 * nr_llm's row for one call. Promptwire has no fallback, so "served" is the
 * requested configuration. Tokens are NULL when the provider reported no
 * usage at all (all three counts 0); the cost is NULL when the model is
 * unpriced; both are NULL for a failed call.
 */
export function telemetryRow(
  account: { runUuid: string; serviceType: string; providerType: string; modelId: string; configurationIdentifier: string; beUser: number; source: string },
  outcome: CallOutcome,
  now: number,
): TelemetryRow {
  const provider = cut(serviceProviderOf(account.providerType), 64);
  const model = cut(account.modelId, 128);
  const configurationIdentifier = cut(account.configurationIdentifier, 150);
  const measured = outcome.success && (outcome.usage.promptTokens > 0 || outcome.usage.completionTokens > 0 || outcome.usage.totalTokens > 0);
  const cost = outcome.success && outcome.cost !== null && Number.isFinite(outcome.cost) && outcome.cost >= 0 ? outcome.cost.toFixed(8) : null;
  return {
    correlationId: cut(account.runUuid, 36),
    operation: cut(account.serviceType, 32),
    provider,
    model,
    configurationIdentifier,
    servedConfigurationIdentifier: configurationIdentifier,
    servedProvider: provider,
    servedModel: model,
    beUser: Math.max(0, account.beUser),
    sourceExtension: sourceExtensionOf(account.source),
    success: outcome.success ? 1 : 0,
    errorClass: outcome.success ? '' : errorClassOf(outcome.error),
    latencyMs: Math.max(0, Math.min(4_294_967_295, Math.round(outcome.latencyMs))),
    actualInputTokens: measured && outcome.success ? outcome.usage.promptTokens : null,
    actualOutputTokens: measured && outcome.success ? outcome.usage.completionTokens : null,
    actualCost: cost,
    responseModel: outcome.success ? cut(outcome.responseModel, 128) : '',
    crdate: now,
  };
}
