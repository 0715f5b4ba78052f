/**
 * Every provider call of a run is booked in nr_llm's daily aggregate
 * (`tx_nrllm_service_usage`) under nr_llm's key, on success only, and is
 * checked first against the budgets in nr_llm's order: the backend user's
 * daily and monthly limits (`tx_nrllm_user_budget`), then the
 * configuration's daily caps over all users. A refused call ends the run
 * `budget_exhausted` with its trace and a message naming the limit.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier, type RunSetup } from '../runs/run-kit';

type Row = Record<string, unknown>;

const CREATE_TOKEN = `mutation($name: String!, $beUser: Int, $source: String) {
  createApiToken(name: $name, role: EDITOR, beUser: $beUser, source: $source) { token }
}`;

const USAGE_COLUMNS =
  'service_type, service_provider, be_user, configuration_uid, model_uid, model_id, task_uid, source_extension, request_count, tokens_used, prompt_tokens, completion_tokens, estimated_cost, request_date';

describe.each(testDialects)('the usage ledger (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);
  let nextBeUser = 100;

  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { USAGE_TIMEZONE: 'UTC' } });
  });

  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
  });

  const tokenFor = async (beUser: number, source = ''): Promise<string> =>
    (await t.ok<{ createApiToken: { token: string } }>(CREATE_TOKEN, { name: uniqueIdentifier('tok'), beUser, source })).createApiToken.token;

  const usageRows = async (where: string, params: unknown[]): Promise<Row[]> =>
    ((await t.database.query(`SELECT ${USAGE_COLUMNS} FROM tx_nrllm_service_usage WHERE ${where} ORDER BY uid`, params)) as Row[]).map((row) => ({
      ...row,
      be_user: Number(row.be_user),
      configuration_uid: Number(row.configuration_uid),
      model_uid: Number(row.model_uid),
      task_uid: Number(row.task_uid),
      request_count: Number(row.request_count),
      tokens_used: Number(row.tokens_used),
      prompt_tokens: Number(row.prompt_tokens),
      completion_tokens: Number(row.completion_tokens),
      estimated_cost: Number(row.estimated_cost),
      request_date: Number(row.request_date),
    }));

  const modelUidOf = async (setup: RunSetup): Promise<number> =>
    Number(((await t.database.query('SELECT model_uid FROM tx_nrllm_configuration WHERE uid = ?', [setup.configurationUid])) as Row[])[0]?.model_uid);

  const todayUtc = () => Math.floor(Date.now() / 86_400_000) * 86_400;

  const insertBudget = async (beUser: number, columns: Record<string, number>): Promise<void> => {
    const names = Object.keys(columns);
    await t.database.query(
      `INSERT INTO tx_nrllm_user_budget (be_user, ${names.join(', ')}, tstamp, crdate) VALUES (?, ${names.map(() => '?').join(', ')}, 1, 1)`,
      [beUser, ...Object.values(columns)],
    );
  };

  const runToEnd = async (setup: RunSetup, token: string, input: Record<string, unknown> = {}) => {
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'Go.', ...input }, token);
    return kit.waitForRun(started.id);
  };

  test('a 3-round run with tools books one `tools` row: 3 requests, the run\'s tokens and its cost', async () => {
    const beUser = nextBeUser++;
    const token = await tokenFor(beUser, 'headless_cms');
    const setup = await kit.setup({ costInput: 150, costOutput: 600 });
    setup.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression: '2 + 2' } }], usage: { prompt: 100, completion: 10 } },
      { toolCalls: [{ name: 'calculator', arguments: { expression: '4 * 4' } }], usage: { prompt: 200, completion: 20 } },
      { text: 'Sixteen.', usage: { prompt: 300, completion: 30 } },
    );
    const run = await runToEnd(setup, token, { tools: ['calculator'] });
    expect(run).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed', totalTokens: 660 });

    const rows = await usageRows('be_user = ?', [beUser]);
    expect(rows).toEqual([
      {
        service_type: 'tools',
        service_provider: 'custom',
        be_user: beUser,
        configuration_uid: setup.configurationUid,
        model_uid: await modelUidOf(setup),
        model_id: 'scripted-gpt',
        task_uid: 0,
        source_extension: 'headless_cms',
        request_count: 3,
        tokens_used: 660,
        prompt_tokens: 600,
        completion_tokens: 60,
        estimated_cost: expect.closeTo(run.estimatedCost!, 6),
        request_date: todayUtc(),
      },
    ]);
    expect(run.estimatedCost).toBeGreaterThan(0);
  });

  test('the synthesis call after the round cap is booked as `chat`; an unpriced call adds cost 0', async () => {
    const beUser = nextBeUser++;
    const token = await tokenFor(beUser);
    const setup = await kit.setup();
    setup.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression: '1 + 1' } }], usage: { prompt: 10, completion: 1 } },
      { text: 'Two.', usage: { prompt: 20, completion: 2 } },
    );
    const run = await runToEnd(setup, token, { tools: ['calculator'], maxRounds: 1 });
    expect(run.terminationReason).toBe('max_iterations');
    const rows = await usageRows('be_user = ?', [beUser]);
    expect(rows.map((row) => [row.service_type, row.request_count, row.tokens_used, row.estimated_cost])).toEqual([
      ['tools', 1, 11, 0],
      ['chat', 1, 22, 0],
    ]);
  });

  test('a dry run books nothing; a failed call books nothing', async () => {
    const beUser = nextBeUser++;
    const token = await tokenFor(beUser);
    const setup = await kit.setup();
    const dry = await runToEnd(setup, token, { dryRun: true });
    expect(dry.terminationReason).toBe('dry_run');
    setup.provider.script({ status: 500, errorBody: '{"error":{"message":"down"}}' });
    const failed = await runToEnd(setup, token);
    expect(failed.terminationReason).toBe('provider_failed');
    expect(await usageRows('be_user = ?', [beUser])).toEqual([]);
  });

  test('the key splits rows by configuration and by source; a row TYPO3 wrote for the key is raised in place', async () => {
    const beUser = nextBeUser++;
    const cms = await tokenFor(beUser, 'cms');
    const shop = await tokenFor(beUser, 'shop');
    const first = await kit.setup();
    const second = await kit.setup();
    const modelUid = await modelUidOf(first);
    // TYPO3 booked a call of its own for the first configuration today, from the `cms` integration.
    await t.database.query(
      `INSERT INTO tx_nrllm_service_usage (service_type, service_provider, be_user, configuration_uid, model_uid, model_id, source_extension, request_count, tokens_used, prompt_tokens, completion_tokens, estimated_cost, request_date, tstamp, crdate)
       VALUES ('chat', 'custom', ?, ?, ?, 'scripted-gpt', 'cms', 4, 40, 30, 10, 0, ?, 1, 1)`,
      [beUser, first.configurationUid, modelUid, todayUtc()],
    );
    for (const [setup, token] of [[first, cms], [first, shop], [second, cms], [first, cms]] as const) {
      setup.provider.script({ text: 'ok', usage: { prompt: 1, completion: 1 } });
      expect((await runToEnd(setup, token, { tools: [] })).status).toBe('COMPLETED');
    }
    const rows = await usageRows('be_user = ?', [beUser]);
    expect(rows.map((row) => [row.configuration_uid, row.source_extension, row.request_count, row.tokens_used])).toEqual([
      [first.configurationUid, 'cms', 6, 44],
      [first.configurationUid, 'shop', 1, 2],
      [second.configurationUid, 'cms', 1, 2],
    ]);
  });

  test('a daily request limit of 2: runs 1 and 2 reach the provider, run 3 ends budget_exhausted without a call', async () => {
    const beUser = nextBeUser++;
    await insertBudget(beUser, { max_requests_per_day: 2 });
    const token = await tokenFor(beUser);
    const setup = await kit.setup();
    setup.provider.script({ text: 'one', usage: { prompt: 1, completion: 1 } }, { text: 'two', usage: { prompt: 1, completion: 1 } });
    expect((await runToEnd(setup, token, { tools: [] })).status).toBe('COMPLETED');
    expect((await runToEnd(setup, token, { tools: [] })).status).toBe('COMPLETED');
    const third = await runToEnd(setup, token, { tools: [] });
    expect(third).toMatchObject({ status: 'COMPLETED', terminationReason: 'budget_exhausted', error: 'AI budget exhausted: daily request count is at 2 of 2', totalTokens: 0 });
    expect(setup.provider.requests).toHaveLength(2);
    // The trace shows what happened up to the refusal.
    expect(third.steps.map((step) => step.kind)).toEqual(['CONTEXT', 'END']);
    expect(third.steps.at(-1)).toMatchObject({ terminationReason: 'budget_exhausted', error: 'AI budget exhausted: daily request count is at 2 of 2' });
  });

  test('a daily token limit equal to the tokens used lets the next call pass (used > limit), and refuses the one after', async () => {
    const beUser = nextBeUser++;
    await insertBudget(beUser, { max_tokens_per_day: 20 });
    const token = await tokenFor(beUser);
    const setup = await kit.setup();
    setup.provider.script({ text: 'a', usage: { prompt: 15, completion: 5 } }, { text: 'b', usage: { prompt: 1, completion: 1 } });
    expect((await runToEnd(setup, token, { tools: [] })).terminationReason).toBe('completed');
    expect((await runToEnd(setup, token, { tools: [] })).terminationReason).toBe('completed');
    const refused = await runToEnd(setup, token, { tools: [] });
    expect(refused).toMatchObject({ terminationReason: 'budget_exhausted', error: 'AI budget exhausted: daily token usage is at 22 of 20' });
    expect(setup.provider.requests).toHaveLength(2);
  });

  test('a monthly limit applies after the daily ones', async () => {
    const beUser = nextBeUser++;
    await insertBudget(beUser, { max_requests_per_day: 10, max_requests_per_month: 1 });
    const token = await tokenFor(beUser);
    const setup = await kit.setup();
    setup.provider.script({ text: 'a', usage: { prompt: 1, completion: 1 } });
    await runToEnd(setup, token, { tools: [] });
    expect(await runToEnd(setup, token, { tools: [] })).toMatchObject({ terminationReason: 'budget_exhausted', error: 'AI budget exhausted: monthly request count is at 1 of 1' });
  });

  test.each([
    ['hidden', { hidden: 1 }],
    ['inactive', { is_active: 0 }],
    ['deleted', { deleted: 1 }],
  ])('a %s budget sets no limit', async (_label, flags) => {
    const beUser = nextBeUser++;
    await insertBudget(beUser, { max_requests_per_day: 1, ...flags });
    const token = await tokenFor(beUser);
    const setup = await kit.setup();
    setup.provider.script({ text: 'a', usage: { prompt: 1, completion: 1 } }, { text: 'b', usage: { prompt: 1, completion: 1 } });
    await runToEnd(setup, token, { tools: [] });
    expect((await runToEnd(setup, token, { tools: [] })).terminationReason).toBe('completed');
  });

  test('the first visible budget by uid is the user\'s budget', async () => {
    const beUser = nextBeUser++;
    await insertBudget(beUser, { max_requests_per_day: 1, hidden: 1 });
    await insertBudget(beUser, { max_requests_per_day: 1 });
    await insertBudget(beUser, { max_requests_per_day: 50 });
    const token = await tokenFor(beUser);
    const setup = await kit.setup();
    setup.provider.script({ text: 'a', usage: { prompt: 1, completion: 1 } });
    await runToEnd(setup, token, { tools: [] });
    expect((await runToEnd(setup, token, { tools: [] })).error).toBe('AI budget exhausted: daily request count is at 1 of 1');
  });

  test('a configuration\'s daily caps count every user and also bind tokens without a backend user', async () => {
    const setup = await kit.setup();
    await t.database.query('UPDATE tx_nrllm_configuration SET max_requests_per_day = 2 WHERE uid = ?', [setup.configurationUid]);
    // Caps are read when a run is prepared: these runs start after the change.
    const someone = await tokenFor(nextBeUser++);
    const nobody = await tokenFor(0);
    setup.provider.script({ text: 'a', usage: { prompt: 1, completion: 1 } }, { text: 'b', usage: { prompt: 1, completion: 1 } });
    await runToEnd(setup, someone, { tools: [] });
    await runToEnd(setup, nobody, { tools: [] });
    const refused = await runToEnd(setup, nobody, { tools: [] });
    expect(refused).toMatchObject({ terminationReason: 'budget_exhausted', error: 'AI budget exhausted: configuration daily request count is at 2 of 2' });
    expect(setup.provider.requests).toHaveLength(2);
  });

  test('a configuration\'s cost cap compares the dollars booked today', async () => {
    const setup = await kit.setup({ costInput: 100_000_000, costOutput: 0 });
    await t.database.query('UPDATE tx_nrllm_configuration SET max_cost_per_day = 1.5 WHERE uid = ?', [setup.configurationUid]);
    const token = await tokenFor(0);
    // 2 prompt tokens at $1,000,000 per million: $2 booked.
    setup.provider.script({ text: 'a', usage: { prompt: 2, completion: 0 } });
    expect((await runToEnd(setup, token, { tools: [] })).estimatedCost).toBeCloseTo(2, 6);
    expect(await runToEnd(setup, token, { tools: [] })).toMatchObject({ terminationReason: 'budget_exhausted', error: 'AI budget exhausted: configuration daily cost is at 2 of 1.50' });
  });

  test('a call under way holds its request until it is booked or fails; a hold left by a dead instance counts until it expires', async () => {
    const setup = await kit.setup();
    await t.database.query('UPDATE tx_nrllm_configuration SET max_requests_per_day = 2 WHERE uid = ?', [setup.configurationUid]);
    const token = await tokenFor(0);
    const holds = async () => Number(((await t.database.query('SELECT COUNT(*) AS n FROM promptwire_usage_hold WHERE configuration_uid = ?', [setup.configurationUid])) as Row[])[0]?.n);
    // A failed call frees its hold and books nothing.
    setup.provider.script({ status: 500, errorBody: '{"error":{"message":"down"}}' });
    expect((await runToEnd(setup, token, { tools: [] })).terminationReason).toBe('provider_failed');
    expect(await holds()).toBe(0);
    // A booked call's hold goes with its booking.
    setup.provider.script({ text: 'a', usage: { prompt: 1, completion: 1 } });
    expect((await runToEnd(setup, token, { tools: [] })).terminationReason).toBe('completed');
    expect(await holds()).toBe(0);
    // Another instance died mid-call: its unexpired hold takes the last request; an expired one takes nothing.
    const now = Math.floor(Date.now() / 1000);
    await t.database.query('INSERT INTO promptwire_usage_hold (be_user, configuration_uid, expires_at) VALUES (0, ?, ?), (0, ?, ?)', [setup.configurationUid, now + 600, setup.configurationUid, now - 1]);
    expect(await runToEnd(setup, token, { tools: [] })).toMatchObject({ terminationReason: 'budget_exhausted', error: 'AI budget exhausted: configuration daily request count is at 2 of 2' });
    await t.database.query('UPDATE promptwire_usage_hold SET expires_at = ? WHERE configuration_uid = ?', [now - 1, setup.configurationUid]);
    setup.provider.script({ text: 'b', usage: { prompt: 1, completion: 1 } });
    expect((await runToEnd(setup, token, { tools: [] })).terminationReason).toBe('completed');
    expect(setup.provider.requests).toHaveLength(3);
  });
});
