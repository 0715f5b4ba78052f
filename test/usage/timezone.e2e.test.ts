/**
 * USAGE_TIMEZONE sets the day a call is booked on and the windows budgets
 * sum (nr_llm books on PHP's local midnight): with Europe/Berlin, a call at
 * 23:30 UTC on 1 March is booked on 2 March, 00:00 Berlin time.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier } from '../runs/run-kit';

type Row = Record<string, unknown>;

const utc = (iso: string) => Date.parse(iso) / 1000;

describe.each(testDialects)('usage days in USAGE_TIMEZONE (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { USAGE_TIMEZONE: 'Europe/Berlin' }, server: { usageNow: () => Date.parse('2026-03-01T23:30:00Z') } });
  });

  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
  });

  test('a call at 23:30 UTC on 1 March is booked on 2 March, and the budget windows follow Berlin\'s days', async () => {
    const beUser = 4711;
    const { createApiToken } = await t.ok<{ createApiToken: { token: string } }>('mutation($name: String!) { createApiToken(name: $name, role: EDITOR, beUser: 4711) { token } }', {
      name: uniqueIdentifier('tz'),
    });
    // One call a day, two a month. TYPO3 booked one call on 1 March (Berlin): yesterday, but this month.
    await t.database.query('INSERT INTO tx_nrllm_user_budget (be_user, max_requests_per_day, max_requests_per_month, tstamp, crdate) VALUES (?, 1, 2, 1, 1)', [beUser]);
    await t.database.query(
      "INSERT INTO tx_nrllm_service_usage (service_type, service_provider, be_user, request_count, tokens_used, request_date, tstamp, crdate) VALUES ('chat', 'openai', ?, 1, 10, ?, 1, 1)",
      [beUser, utc('2026-02-28T23:00:00Z')],
    );
    const setup = await kit.setup();
    setup.provider.script({ text: 'ok', usage: { prompt: 1, completion: 1 } });
    const first = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Go.', tools: [] }, createApiToken.token)).id);
    expect(first.terminationReason).toBe('completed');
    const rows = (await t.database.query('SELECT request_date FROM tx_nrllm_service_usage WHERE be_user = ? ORDER BY uid', [beUser])) as Row[];
    expect(rows.map((row) => Number(row.request_date))).toEqual([utc('2026-02-28T23:00:00Z'), utc('2026-03-01T23:00:00Z')]);

    const second = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Again.', tools: [] }, createApiToken.token)).id);
    expect(second).toMatchObject({ terminationReason: 'budget_exhausted', error: 'AI budget exhausted: daily request count is at 1 of 1' });
    expect(setup.provider.requests).toHaveLength(1);
  });
});
