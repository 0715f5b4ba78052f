/**
 * The usage page in a real browser (headless Chromium), through the running
 * server: usage booked by real runs against the scripted provider, and a row
 * TYPO3 wrote, show up as totals, daily bars and breakdowns equal to what
 * the API answers for the same range; a range with nothing booked says so; a
 * backwards range is refused before asking; a VIEWER is told the page is for
 * administrators.
 *
 * Skipped, with a message, when there is no Chromium.
 */
import type { Page } from 'playwright-core';
import { chromiumAvailable, ensureConsoleBuilt, launchBrowser, openPage, SKIP_MESSAGE, type Browser } from './browser';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier } from '../runs/run-kit';
import { instantOf } from '../../console/src/app/usage-chart';

const available = chromiumAvailable();
if (!available) console.warn(SKIP_MESSAGE);
const describeInChromium = available ? describe : describe.skip;

jest.setTimeout(120_000);

const DASHBOARD = `query($from: DateTime!, $to: DateTime!) {
  usageTotals(from: $from, to: $to) { days requests tokens promptTokens completionTokens cost }
  daily: usage(from: $from, to: $to, groupBy: [DAY]) { date requests tokens cost }
  byModel: usage(from: $from, to: $to, groupBy: [MODEL], limit: 20) { modelId requests tokens cost }
  byConfiguration: usage(from: $from, to: $to, groupBy: [CONFIGURATION], limit: 20) { configurationUid requests tokens cost }
  bySource: usage(from: $from, to: $to, groupBy: [SOURCE], limit: 20) { source requests tokens cost }
}`;

interface Figures {
  requests: number;
  tokens: number;
  cost: number;
}
interface Dashboard {
  usageTotals: Figures & { days: number; promptTokens: number; completionTokens: number };
  daily: (Figures & { date: string })[];
  byModel: (Figures & { modelId: string })[];
  byConfiguration: (Figures & { configurationUid: number })[];
  bySource: (Figures & { source: string })[];
}

/** The TYPO3 row's day: three days before today (UTC, the server's usage zone here). */
const TYPO3_DAYS_AGO = 3;

describeInChromium.each(testDialects)('the usage page in Chromium (%s)', (dialect) => {
  let t: TestServer;
  let browser: Browser;
  let base: string;
  const kit = new RunKit(() => t);

  const tokenFor = async (role: string, beUser: number, source: string): Promise<string> =>
    (
      await t.ok<{ createApiToken: { token: string } }>('mutation($name: String!, $role: Role!, $beUser: Int, $source: String) { createApiToken(name: $name, role: $role, beUser: $beUser, source: $source) { token } }', {
        name: uniqueIdentifier('tok'),
        role,
        beUser,
        source,
      })
    ).createApiToken.token;

  beforeAll(async () => {
    ensureConsoleBuilt();
    t = await startTestServer(dialect, { env: { USAGE_TIMEZONE: 'UTC' } });
    base = t.url.replace(/\/graphql$/, '');

    // Real runs: a priced configuration with tools (two calls), an unpriced one (one call), from two integrations.
    const priced = await kit.setup({ costInput: 150, costOutput: 600 });
    priced.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression: '2 + 2' } }], usage: { prompt: 100, completion: 10 } },
      { text: 'Four.', usage: { prompt: 200, completion: 20 } },
    );
    const unpriced = await kit.setup();
    unpriced.provider.script({ text: 'Hello.', usage: { prompt: 40, completion: 4 } });
    const cms = await tokenFor('EDITOR', 7, 'headless_cms');
    const widget = await tokenFor('EDITOR', 8, 'chat_widget');
    for (const [setup, token, input] of [
      [priced, cms, { tools: ['calculator'] }],
      [unpriced, widget, {}],
    ] as const) {
      const started = await kit.startRun({ configuration: setup.configuration, prompt: 'Go.', ...input }, token);
      expect((await kit.waitForRun(started.id)).status).toBe('COMPLETED');
    }
    // A row TYPO3 booked on an earlier day.
    const day = Math.floor(Date.now() / 86_400_000) * 86_400 - TYPO3_DAYS_AGO * 86_400;
    await t.database.query(
      `INSERT INTO tx_nrllm_service_usage (pid, service_type, service_provider, be_user, configuration_uid, model_uid, model_id, task_uid, source_extension, request_date,
         request_count, tokens_used, prompt_tokens, completion_tokens, characters_used, audio_seconds_used, images_generated, estimated_cost, tstamp, crdate)
       VALUES (0, 'chat', 'openai', 3, 0, 0, 'gpt-typo3', 0, 'nr_llm', ?, 5, 5000, 4000, 1000, 0, 0, 0, 0.25, ?, ?)`,
      [day, day, day],
    );
    browser = await launchBrowser();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await kit.closeProviders();
    await t?.stop();
  });

  async function dashboardOf(from: string, to: string): Promise<Dashboard> {
    return t.ok<Dashboard>(DASHBOARD, { from: instantOf(from), to: instantOf(to) });
  }

  async function shownRange(page: Page): Promise<{ from: string; to: string }> {
    return { from: await page.inputValue('[data-field="from"]'), to: await page.inputValue('[data-field="to"]') };
  }

  async function shown(page: Page) {
    const numbers = (selector: string, attributes: string[]) =>
      page.$$eval(
        selector,
        (elements, names) => elements.map((element) => names.map((name) => element.getAttribute(name) ?? '')),
        attributes,
      );
    const totals = Object.fromEntries((await numbers('[data-total]', ['data-total', 'data-value'])).map(([name, value]) => [name, Number(value)]));
    const bars: Record<string, [string, number, number][]> = {};
    for (const metric of ['tokens', 'cost', 'requests']) {
      bars[metric] = (await numbers(`[data-chart="${metric}"] rect.bar`, ['data-date', 'data-value', 'height'])).map(([date, value, height]) => [date!, Number(value), Number(height)]);
    }
    const breakdowns: Record<string, [string, number, number, number][]> = {};
    for (const name of ['model', 'configuration', 'source']) {
      breakdowns[name] = (await numbers(`[data-breakdown="${name}"] tbody tr`, ['data-key', 'data-requests', 'data-tokens', 'data-cost'])).map(([key, requests, tokens, cost]) => [
        key!,
        Number(requests),
        Number(tokens),
        Number(cost),
      ]);
    }
    return { totals, bars, breakdowns };
  }

  it('shows the totals, the daily bars and the breakdowns the API answers for the range, with nothing from another host', async () => {
    const { page, errors, foreignRequests } = await openPage(browser, base, ADMIN_TOKEN);
    await page.goto(`${base}/usage`);
    await page.waitForSelector('[data-usage-state="ready"]');
    expect(await page.getAttribute('nav a[href="/usage"]', 'aria-current')).toBe('page');
    const range = await shownRange(page);
    const api = await dashboardOf(range.from, range.to);
    const view = await shown(page);

    // What the runs and TYPO3 booked: 2 + 1 + 5 requests.
    expect(api.usageTotals).toMatchObject({ days: 30, requests: 8, tokens: 330 + 44 + 5000 });
    expect(view.totals).toEqual(api.usageTotals);

    // One bar per day, zeros included, each the API's figure; the largest reaches the chart's full height.
    for (const metric of ['tokens', 'cost', 'requests'] as const) {
      const bars = view.bars[metric]!;
      expect(bars.map(([date, value]) => [date, value])).toEqual(api.daily.map((day) => [day.date, day[metric]]));
      const largest = Math.max(...bars.map(([, value]) => value));
      for (const [, value, height] of bars) expect(height).toBeCloseTo((value / largest) * 140, 6);
    }
    expect(view.bars.requests!.filter(([, value]) => value > 0)).toHaveLength(2);

    expect(view.breakdowns.model).toEqual(api.byModel.map((row) => [row.modelId, row.requests, row.tokens, row.cost]));
    expect(view.breakdowns.configuration).toEqual(api.byConfiguration.map((row) => [String(row.configurationUid), row.requests, row.tokens, row.cost]));
    expect(view.breakdowns.source).toEqual(api.bySource.map((row) => [row.source, row.requests, row.tokens, row.cost]));
    expect(view.breakdowns.source!.map(([source]) => source).sort()).toEqual(['chat_widget', 'headless_cms', 'nr_llm']);
    expect(view.breakdowns.configuration).toHaveLength(3);
    await page.waitForLoadState('networkidle');
    expect({ foreignRequests, errors }).toEqual({ foreignRequests: [], errors: [] });
    await page.close();
  });

  it('a picked range shows that range; a range with nothing booked says so; a backwards range is not asked for', async () => {
    const { page, errors } = await openPage(browser, base, ADMIN_TOKEN);
    await page.goto(`${base}/usage`);
    await page.waitForSelector('[data-usage-state="ready"]');
    const today = await shownRange(page);

    // Only the TYPO3 row's day.
    const typo3Day = new Date(Date.UTC(Number(today.to.slice(0, 4)), Number(today.to.slice(5, 7)) - 1, Number(today.to.slice(8, 10)) - TYPO3_DAYS_AGO)).toISOString().slice(0, 10);
    await page.fill('[data-field="from"]', typo3Day);
    await page.fill('[data-field="to"]', typo3Day);
    await page.click('[data-action="show-range"]');
    await page.waitForSelector('[data-total="days"][data-value="1"]');
    await page.waitForSelector('[data-usage-state="ready"]');
    const api = await dashboardOf(typo3Day, typo3Day);
    expect(api.usageTotals).toMatchObject({ days: 1, requests: 5, tokens: 5000, cost: 0.25 });
    const view = await shown(page);
    expect(view.totals).toEqual(api.usageTotals);
    expect(view.bars.requests).toEqual([[typo3Day, 5, 140]]);
    expect(view.breakdowns.model).toEqual([['gpt-typo3', 5, 5000, 0.25]]);

    // Nothing booked.
    await page.fill('[data-field="from"]', '2020-01-01');
    await page.fill('[data-field="to"]', '2020-01-31');
    await page.click('[data-action="show-range"]');
    await page.waitForSelector('[data-usage-state="empty"]');
    expect(await page.textContent('[data-usage-empty]')).toContain('Nothing was booked from 2020-01-01 to 2020-01-31');
    expect(await page.$('[data-chart]')).toBeNull();
    expect((await shown(page)).totals).toEqual({ days: 31, requests: 0, tokens: 0, promptTokens: 0, completionTokens: 0, cost: 0 });

    // Backwards: refused on the page, the button off, the last answer kept.
    await page.fill('[data-field="from"]', '2020-02-01');
    expect(await page.textContent('[data-range-problem]')).toBe('The first day must not be after the last.');
    expect(await page.isDisabled('[data-action="show-range"]')).toBe(true);
    expect(await page.getAttribute('[data-total="days"]', 'data-value')).toBe('31');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a VIEWER is told the page is for administrators, and sees no figures', async () => {
    const viewer = await t.tokenFor('VIEWER');
    const { page, foreignRequests } = await openPage(browser, base, viewer);
    await page.goto(`${base}/usage`);
    await page.waitForSelector('[data-usage-state="error"]');
    expect(await page.textContent('[data-usage-error]')).toBe('Usage and costs are for administrators: this token may not read them. Sign in with an ADMIN token.');
    expect(await page.$('[data-total]')).toBeNull();
    expect(foreignRequests).toEqual([]);
    await page.close();
  });
});
