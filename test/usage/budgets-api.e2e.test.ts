/**
 * The budgets and the ledger over GraphQL: `setUserBudget` / `userBudget` /
 * `deleteUserBudget` (ADMIN), the configuration caps on LlmConfiguration
 * (ADMIN-editable), `budgetStatus`, `remainingBudget`, and
 * `usage(from, to, groupBy)` with zero-filled days whose groupings sum to
 * `usageTotals`.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier } from '../runs/run-kit';

const BUDGET_FIELDS = 'uid beUser maxRequestsPerDay maxTokensPerDay maxCostPerDay maxRequestsPerMonth maxTokensPerMonth maxCostPerMonth isActive';
const SET_BUDGET = `mutation($beUser: Int!, $input: UserBudgetInput!) { setUserBudget(beUser: $beUser, input: $input) { ${BUDGET_FIELDS} } }`;
const WINDOW = 'from requests { used limit remaining } tokens { used limit remaining } cost { used limit remaining }';
const USAGE = `query($from: DateTime!, $to: DateTime!, $groupBy: [UsageDimension!]!) {
  usage(from: $from, to: $to, groupBy: $groupBy) { day date modelId configurationUid configuration beUser source provider taskUid serviceType requests tokens promptTokens completionTokens cost }
}`;
const TOTALS = 'query($from: DateTime!, $to: DateTime!) { usageTotals(from: $from, to: $to) { days requests tokens promptTokens completionTokens cost } }';

type Row = Record<string, unknown>;

const DAY = 86_400;
const utcDay = (offsetDays = 0) => (Math.floor(Date.now() / 1000 / DAY) + offsetDays) * DAY;
const iso = (seconds: number) => new Date(seconds * 1000).toISOString();

describe.each(testDialects)('budgets and usage over GraphQL (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { USAGE_TIMEZONE: 'UTC' } });
  });

  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
  });

  const tokenFor = async (beUser: number, role = 'EDITOR', source = ''): Promise<string> =>
    (
      await t.ok<{ createApiToken: { token: string } }>('mutation($name: String!, $role: Role!, $beUser: Int, $source: String) { createApiToken(name: $name, role: $role, beUser: $beUser, source: $source) { token } }', {
        name: uniqueIdentifier('tok'),
        role,
        beUser,
        source,
      })
    ).createApiToken.token;

  test('setUserBudget(beUser: 7, maxRequestsPerDay: 2): runs 1 and 2 reach the provider, run 3 ends budget_exhausted', async () => {
    const set = await t.ok<{ setUserBudget: Row }>(SET_BUDGET, { beUser: 7, input: { maxRequestsPerDay: 2 } });
    expect(set.setUserBudget).toMatchObject({ beUser: 7, maxRequestsPerDay: 2, maxTokensPerDay: 0, maxCostPerDay: 0, isActive: true });
    const rows = (await t.database.query('SELECT be_user, max_requests_per_day, is_active, deleted, hidden FROM tx_nrllm_user_budget WHERE be_user = 7')) as Row[];
    expect(rows.map((row) => Object.values(row).map(Number))).toEqual([[7, 2, 1, 0, 0]]);

    const token = await tokenFor(7);
    const setup = await kit.setup();
    setup.provider.script({ text: 'a', usage: { prompt: 1, completion: 1 } }, { text: 'b', usage: { prompt: 1, completion: 1 } });
    for (const expected of ['completed', 'completed', 'budget_exhausted']) {
      const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Go.', tools: [] }, token)).id);
      expect(run.terminationReason).toBe(expected);
      if (expected === 'budget_exhausted') expect(run.error).toBe('AI budget exhausted: daily request count is at 2 of 2');
    }
    expect(setup.provider.requests).toHaveLength(2);

    // The token's own standing, and an ADMIN's view of it.
    const own = await t.ok<{ remainingBudget: { beUser: number; user: { day: Row; month: Row } } }>(`{ remainingBudget { beUser user { day { ${WINDOW} } month { ${WINDOW} } } } }`, {}, token);
    expect(own.remainingBudget.beUser).toBe(7);
    expect(own.remainingBudget.user.day).toMatchObject({ from: iso(utcDay()), requests: { used: 2, limit: 2, remaining: 0 }, tokens: { used: 4, limit: null, remaining: null } });
    expect(own.remainingBudget.user.month).toMatchObject({ requests: { used: 2, limit: null, remaining: null } });
    const status = await t.ok<{ budgetStatus: { budget: Row; day: Row } }>(`query { budgetStatus(beUser: 7) { budget { maxRequestsPerDay } day { ${WINDOW} } } }`);
    expect(status.budgetStatus).toMatchObject({ budget: { maxRequestsPerDay: 2 }, day: { requests: { used: 2, limit: 2, remaining: 0 } } });

    // Raising the limit lets the next run through; an absent field keeps its value.
    await t.ok(SET_BUDGET, { beUser: 7, input: { maxRequestsPerDay: 3, maxCostPerMonth: 12.34567 } });
    const kept = await t.ok<{ userBudget: Row }>(`query { userBudget(beUser: 7) { ${BUDGET_FIELDS} } }`);
    expect(kept.userBudget).toMatchObject({ maxRequestsPerDay: 3, maxCostPerMonth: 12.3457 });
    setup.provider.script({ text: 'c', usage: { prompt: 1, completion: 1 } });
    expect((await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Go.', tools: [] }, token)).id)).terminationReason).toBe('completed');

    // Deleted: no limit any more, and the row stays (marked deleted, as TYPO3 deletes).
    expect((await t.ok<{ deleteUserBudget: boolean }>('mutation { deleteUserBudget(beUser: 7) }')).deleteUserBudget).toBe(true);
    expect((await t.ok<{ deleteUserBudget: boolean }>('mutation { deleteUserBudget(beUser: 7) }')).deleteUserBudget).toBe(false);
    expect((await t.ok<{ userBudget: Row | null }>('query { userBudget(beUser: 7) { uid } }')).userBudget).toBeNull();
    expect(((await t.database.query('SELECT deleted FROM tx_nrllm_user_budget WHERE be_user = 7')) as Row[]).map((row) => Number(row.deleted))).toEqual([1]);
  });

  test('budgets are an ADMIN\'s: an EDITOR is refused, and may read only its own standing', async () => {
    const editor = await tokenFor(31);
    const refused = await t.gql(SET_BUDGET, { beUser: 31, input: { maxRequestsPerDay: 100 } }, editor);
    expect(refused.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect((await t.gql('query { budgetStatus(beUser: 32) { beUser } }', {}, editor)).errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect((await t.ok<{ budgetStatus: { beUser: number; budget: unknown } }>('query { budgetStatus(beUser: 31) { beUser budget { uid } } }', {}, editor)).budgetStatus).toEqual({ beUser: 31, budget: null });
    expect((await t.database.query('SELECT uid FROM tx_nrllm_user_budget WHERE be_user = 31')) as Row[]).toEqual([]);
  });

  test.each([
    ['a negative limit', 5, { maxRequestsPerDay: -1 }, 'maxRequestsPerDay'],
    ['a fractional count', 5, { maxTokensPerMonth: 1.5 }, 'maxTokensPerMonth'],
    ['a cost past decimal(10,4)', 5, { maxCostPerDay: 1e9 }, 'maxCostPerDay'],
    ['backend user 0', 0, { maxRequestsPerDay: 1 }, 'beUser'],
  ])('%s is refused with BAD_USER_INPUT and nothing is stored', async (_label, beUser, input, field) => {
    const result = await t.gql(SET_BUDGET, { beUser, input });
    expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(result.errors?.[0]?.message).toContain(field);
    expect((await t.database.query('SELECT uid FROM tx_nrllm_user_budget WHERE be_user = ?', [beUser])) as Row[]).toEqual([]);
  });

  test('a configuration\'s caps are on LlmConfiguration; an ADMIN sets them, an EDITOR may not', async () => {
    const setup = await kit.setup();
    const editor = await tokenFor(0);
    const update = 'mutation($uid: Int!, $input: UpdateConfigurationInput!) { updateConfiguration(uid: $uid, input: $input) { maxRequestsPerDay maxTokensPerDay maxCostPerDay } }';
    const forbidden = await t.gql(update, { uid: setup.configurationUid, input: { maxRequestsPerDay: 5 } }, editor);
    expect(forbidden.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect((await t.gql(update, { uid: setup.configurationUid, input: { maxCostPerDay: -1 } })).errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const set = await t.ok<{ updateConfiguration: Row }>(update, { uid: setup.configurationUid, input: { maxRequestsPerDay: 1, maxTokensPerDay: 500, maxCostPerDay: 2.345 } });
    expect(set.updateConfiguration).toEqual({ maxRequestsPerDay: 1, maxTokensPerDay: 500, maxCostPerDay: 2.35 });
    // An EDITOR's other edits still go through (the caps unchanged).
    expect((await t.gql('mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { name: "Renamed", maxRequestsPerDay: 1 }) { name } }', { uid: setup.configurationUid }, editor)).errors).toBeUndefined();

    setup.provider.script({ text: 'a', usage: { prompt: 3, completion: 4 } });
    await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Go.', tools: [] }, editor)).id);
    const refused = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Go.', tools: [] }, editor)).id);
    expect(refused.error).toBe('AI budget exhausted: configuration daily request count is at 1 of 1');
    const remaining = await t.ok<{ remainingBudget: { user: unknown; configuration: { configuration: string; day: Row } } }>(
      `query($c: String) { remainingBudget(configuration: $c) { user { beUser } configuration { configuration day { ${WINDOW} } } } }`,
      { c: setup.configuration },
      editor,
    );
    expect(remaining.remainingBudget).toMatchObject({
      user: null,
      configuration: { configuration: setup.configuration, day: { requests: { used: 1, limit: 1, remaining: 0 }, tokens: { used: 7, limit: 500, remaining: 493 }, cost: { used: 0, limit: 2.35, remaining: 2.35 } } },
    });
  });

  test('usage by DAY has every day of the range, zeros included; every grouping sums to usageTotals', async () => {
    const setup = await kit.setup();
    // What TYPO3 wrote on other days, on the same configuration, for other users and sources.
    const insert = (serviceType: string, provider: string, beUser: number, source: string, model: string, taskUid: number, requests: number, tokens: number, cost: number, day: number) =>
      t.database.query(
        `INSERT INTO tx_nrllm_service_usage (service_type, service_provider, be_user, configuration_uid, model_id, task_uid, source_extension, request_count, tokens_used, prompt_tokens, completion_tokens, estimated_cost, request_date, tstamp, crdate)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, 1)`,
        [serviceType, provider, beUser, setup.configurationUid, model, taskUid, source, requests, tokens, tokens - 1, 1, cost, day],
      );
    // A far-away window nobody else writes to: 400 days ago.
    const base = utcDay(-400);
    await insert('chat', 'openai', 1, 'cms', 'gpt-4o', 0, 2, 100, 0.5, base);
    await insert('tools', 'claude', 2, 'shop', 'claude-3', 9, 3, 50, 0.25, base + 2 * DAY);
    await insert('chat', 'openai', 1, '', 'gpt-4o', 0, 1, 10, 0.125, base + 2 * DAY);

    const range = { from: iso(base + 3600), to: iso(base + 3 * DAY - 1) };
    const days = (await t.ok<{ usage: Row[] }>(USAGE, { ...range, groupBy: ['DAY'] })).usage;
    expect(days.map((row) => [row.date, row.requests, row.tokens, row.cost])).toEqual([
      [iso(base).slice(0, 10), 2, 100, 0.5],
      [iso(base + DAY).slice(0, 10), 0, 0, 0],
      [iso(base + 2 * DAY).slice(0, 10), 4, 60, 0.375],
    ]);
    expect(days[0]).toMatchObject({ day: iso(base), modelId: null, configuration: null });

    const totals = (await t.ok<{ usageTotals: Row }>(TOTALS, range)).usageTotals;
    expect(totals).toEqual({ days: 3, requests: 6, tokens: 160, promptTokens: 157, completionTokens: 3, cost: 0.875 });
    for (const dimension of ['CONFIGURATION', 'MODEL', 'PROVIDER', 'TASK', 'SOURCE', 'USER', 'SERVICE_TYPE']) {
      const rows = (await t.ok<{ usage: Row[] }>(USAGE, { ...range, groupBy: [dimension] })).usage;
      const sum = (key: string) => rows.reduce((total, row) => total + Number(row[key]), 0);
      expect([dimension, sum('requests'), sum('tokens'), Math.round(sum('cost') * 1e6) / 1e6]).toEqual([dimension, 6, 160, 0.875]);
    }
    const byModel = (await t.ok<{ usage: Row[] }>(USAGE, { ...range, groupBy: ['MODEL'] })).usage;
    expect(byModel.map((row) => [row.modelId, row.requests])).toEqual([['gpt-4o', 3], ['claude-3', 3]]);
    const byConfiguration = (await t.ok<{ usage: Row[] }>(USAGE, { ...range, groupBy: ['CONFIGURATION'] })).usage;
    expect(byConfiguration).toEqual([expect.objectContaining({ configurationUid: setup.configurationUid, configuration: setup.configuration, requests: 6 })]);
    const byDayAndSource = (await t.ok<{ usage: Row[] }>(USAGE, { ...range, groupBy: ['DAY', 'SOURCE'] })).usage;
    expect(byDayAndSource).toHaveLength(9);
    expect(byDayAndSource.filter((row) => row.source === 'shop').map((row) => row.requests)).toEqual([0, 0, 3]);
  });

  test.each([
    ['from after to', iso(utcDay()), iso(utcDay(-1)), 'from'],
    ['a span over 366 days', iso(utcDay(-400)), iso(utcDay()), '366'],
  ])('%s is BAD_USER_INPUT', async (_label, from, to, text) => {
    const result = await t.gql(USAGE, { from, to, groupBy: ['DAY'] });
    expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(result.errors?.[0]?.message).toContain(text);
  });

  test('usage and budgets are an ADMIN\'s to read', async () => {
    const viewer = await tokenFor(0, 'VIEWER');
    expect((await t.gql(USAGE, { from: iso(utcDay()), to: iso(utcDay()), groupBy: ['DAY'] }, viewer)).errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    expect((await t.gql('{ userBudgets { uid } }', {}, viewer)).errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
  });
});
