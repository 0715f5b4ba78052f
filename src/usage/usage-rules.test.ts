import {
  budgetMessage,
  checkBudgets,
  compareLimits,
  dayStart,
  daysBetween,
  fillDailyGaps,
  formatBudgetNumber,
  localDate,
  monthStart,
  nextDayStart,
  remaining,
  serviceProviderOf,
  sourceExtensionOf,
  telemetryRow,
  errorClassOf,
  UsageDayClock,
  type Limits,
  type UserBudgetLimits,
} from './usage-rules';

const none: Limits = { requests: 0, tokens: 0, cost: 0 };
const utc = (iso: string) => Date.parse(iso) / 1000;

describe('the budget comparisons (nr_llm BudgetService::compare)', () => {
  it('refuses a request when used + 1 exceeds the limit', () => {
    expect(compareLimits('daily', { requests: 1, tokens: 0, cost: 0 }, { ...none, requests: 2 })).toBeNull();
    expect(compareLimits('daily', { requests: 2, tokens: 0, cost: 0 }, { ...none, requests: 2 })?.message).toBe('AI budget exhausted: daily request count is at 2 of 2');
  });

  it('lets a call through at exactly the token limit, and refuses above it', () => {
    expect(compareLimits('daily', { requests: 0, tokens: 100, cost: 0 }, { ...none, tokens: 100 })).toBeNull();
    expect(compareLimits('daily', { requests: 0, tokens: 101, cost: 0 }, { ...none, tokens: 100 })?.limit).toBe('daily_tokens');
  });

  it('adds the planned cost (never below 0) to the cost used', () => {
    expect(compareLimits('monthly', { requests: 0, tokens: 0, cost: 0.5 }, { ...none, cost: 1 }, 0.5)).toBeNull();
    expect(compareLimits('monthly', { requests: 0, tokens: 0, cost: 0.5 }, { ...none, cost: 1 }, 0.51)?.message).toBe('AI budget exhausted: monthly cost is at 0.50 of 1');
    expect(compareLimits('monthly', { requests: 0, tokens: 0, cost: 1 }, { ...none, cost: 1 }, -5)).toBeNull();
  });

  it('checks requests, then tokens, then cost', () => {
    const all = { requests: 1, tokens: 1, cost: 1 };
    expect(compareLimits('configuration_daily', { requests: 5, tokens: 5, cost: 5 }, all)?.limit).toBe('configuration_daily_requests');
    expect(compareLimits('configuration_daily', { requests: 0, tokens: 5, cost: 5 }, all)?.limit).toBe('configuration_daily_tokens');
    expect(compareLimits('configuration_daily', { requests: 0, tokens: 0, cost: 5 }, all)?.message).toBe('AI budget exhausted: configuration daily cost is at 5 of 1');
  });

  it('treats 0 and values that are no number as unlimited', () => {
    expect(compareLimits('daily', { requests: 99, tokens: 99, cost: 99 }, { requests: -1, tokens: Number.NaN, cost: 0 })).toBeNull();
  });

  it('formats numbers as PHP: whole numbers bare, others with two decimals and thousands separators', () => {
    expect(formatBudgetNumber(2)).toBe('2');
    expect(formatBudgetNumber(0.125)).toBe('0.13');
    expect(formatBudgetNumber(1234.5)).toBe('1,234.50');
    expect(budgetMessage('daily_cost', 12.3456, 10)).toBe('AI budget exhausted: daily cost is at 12.35 of 10');
  });
});

describe('the order of the scopes', () => {
  const budget = (daily: Partial<Limits>, monthly: Partial<Limits> = {}, isActive = true): UserBudgetLimits => ({ isActive, daily: { ...none, ...daily }, monthly: { ...none, ...monthly } });
  const used = (requests: number) => ({ requests, tokens: 0, cost: 0 });

  it('user daily, then user monthly, then the configuration', () => {
    const input = { budget: budget({ requests: 1 }, { requests: 1 }), userDaily: used(1), userMonthly: used(1), configurationLimits: { ...none, requests: 1 }, configurationDaily: used(1) };
    expect(checkBudgets(input)?.limit).toBe('daily_requests');
    expect(checkBudgets({ ...input, userDaily: used(0) })?.limit).toBe('monthly_requests');
    expect(checkBudgets({ ...input, userDaily: used(0), userMonthly: used(0) })?.limit).toBe('configuration_daily_requests');
    expect(checkBudgets({ ...input, userDaily: used(0), userMonthly: used(0), configurationDaily: used(0) })).toBeNull();
  });

  it('skips an inactive budget and a budget without limits', () => {
    const input = { userDaily: used(5), userMonthly: used(5), configurationLimits: null, configurationDaily: null };
    expect(checkBudgets({ ...input, budget: budget({ requests: 1 }, {}, false) })).toBeNull();
    expect(checkBudgets({ ...input, budget: budget({}) })).toBeNull();
    expect(checkBudgets({ ...input, budget: null })).toBeNull();
  });

  it('what remains of a limit is null when unlimited and never below 0', () => {
    expect(remaining(0, 5)).toBeNull();
    expect(remaining(10, 4)).toBe(6);
    expect(remaining(10, 14)).toBe(0);
  });
});

describe('the aggregation key', () => {
  it('books Anthropic as claude and an unknown provider as unknown', () => {
    expect(serviceProviderOf('anthropic')).toBe('claude');
    expect(serviceProviderOf('openai')).toBe('openai');
    expect(serviceProviderOf('')).toBe('unknown');
  });

  it('cuts a source to 64 characters', () => {
    expect(sourceExtensionOf('x'.repeat(70))).toHaveLength(64);
    expect(sourceExtensionOf('ä'.repeat(70))).toBe('ä'.repeat(64));
  });
});

describe('usage days in a time zone', () => {
  it('a call at 23:30 UTC on 1 March is booked on 2 March, 00:00 Berlin time', () => {
    const day = dayStart(utc('2026-03-01T23:30:00Z'), 'Europe/Berlin');
    expect(day).toBe(utc('2026-03-01T23:00:00Z'));
    expect(localDate(day, 'Europe/Berlin')).toBe('2026-03-02');
    expect(dayStart(utc('2026-03-01T23:30:00Z'), 'UTC')).toBe(utc('2026-03-01T00:00:00Z'));
  });

  it('days around a DST change last 23 and 25 hours', () => {
    const spring = dayStart(utc('2026-03-29T12:00:00Z'), 'Europe/Berlin');
    expect(nextDayStart(spring, 'Europe/Berlin') - spring).toBe(23 * 3600);
    const autumn = dayStart(utc('2026-10-25T12:00:00Z'), 'Europe/Berlin');
    expect(nextDayStart(autumn, 'Europe/Berlin') - autumn).toBe(25 * 3600);
  });

  it('a zone that skips midnight starts the day at its first existing instant', () => {
    // America/Santiago moves from 00:00 to 01:00 on 6 September 2026.
    const day = dayStart(utc('2026-09-06T18:00:00Z'), 'America/Santiago');
    expect(localDate(day, 'America/Santiago')).toBe('2026-09-06');
    expect(dayStart(day - 1, 'America/Santiago')).toBeLessThan(day);
  });

  it('the month starts at the local midnight of its first day', () => {
    expect(monthStart(utc('2026-03-15T10:00:00Z'), 'Europe/Berlin')).toBe(utc('2026-02-28T23:00:00Z'));
  });

  it('fills every day of the range, both ends included, zeros where nothing was booked', () => {
    const days = daysBetween(utc('2026-01-30T10:00:00Z'), utc('2026-02-02T01:00:00Z'), 'UTC');
    expect(days.map((day) => localDate(day, 'UTC'))).toEqual(['2026-01-30', '2026-01-31', '2026-02-01', '2026-02-02']);
    const rows = new Map([[days[1]!, 7]]);
    expect(fillDailyGaps(days, rows, () => 0)).toEqual([0, 7, 0, 0]);
    expect(daysBetween(10, 5, 'UTC')).toEqual([]);
  });

  it('the clock gives the same days as the rule, across a day change', () => {
    const clock = new UsageDayClock('Europe/Berlin');
    for (const at of ['2026-03-01T22:59:59Z', '2026-03-01T23:00:00Z', '2026-03-31T22:30:00Z', '2026-03-31T21:59:59Z']) {
      expect(clock.dayOf(utc(at))).toBe(dayStart(utc(at), 'Europe/Berlin'));
      expect(clock.monthOf(utc(at))).toBe(monthStart(utc(at), 'Europe/Berlin'));
    }
  });
});

describe('a telemetry row', () => {
  const account = { runUuid: 'b2c6e0a4-1f4e-4c3a-9a57-0d1f1e2a3b4c', serviceType: 'chat', providerType: 'anthropic', modelId: 'claude-x', configurationIdentifier: 'writer', beUser: 4, source: 's'.repeat(80) };

  it('names nr_llm\'s provider id, serves what was requested, and cuts the source to 64 characters', () => {
    const row = telemetryRow(account, { success: true, usage: { promptTokens: 10, completionTokens: 2, totalTokens: 12 }, cost: 0.0000123, latencyMs: 41.6, responseModel: 'claude-x-2026' }, 1_800_000_000);
    expect(row).toMatchObject({ correlationId: account.runUuid, provider: 'claude', servedProvider: 'claude', servedModel: 'claude-x', servedConfigurationIdentifier: 'writer', success: 1, errorClass: '', latencyMs: 42 });
    expect(row.sourceExtension).toHaveLength(64);
    expect([row.actualInputTokens, row.actualOutputTokens, row.actualCost]).toEqual([10, 2, '0.00001230']);
  });

  it('keeps NULL for what was not measured: no usage block, an unpriced model, a failed call; a failure keeps only its class', () => {
    const none = telemetryRow(account, { success: true, usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 }, cost: null, latencyMs: 5, responseModel: '' }, 1);
    expect([none.actualInputTokens, none.actualOutputTokens, none.actualCost]).toEqual([null, null, null]);
    class ProviderHttpError extends Error {}
    const failed = telemetryRow(account, { success: false, error: new ProviderHttpError('secret payload'), latencyMs: 7 }, 1);
    expect(failed).toMatchObject({ success: 0, errorClass: 'ProviderHttpError', actualInputTokens: null, actualCost: null, responseModel: '' });
    expect(JSON.stringify(failed)).not.toContain('secret');
    expect(errorClassOf('text')).toBe('string');
  });
});
