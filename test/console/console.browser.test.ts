/**
 * The console in a real browser (headless Chromium), through the running
 * server: pages load offline with no error, the playground runs a query and
 * a subscription, a live run's cards appear once each and in order while it
 * runs, deltas stream, a reload or a second window shows the same run, cancel
 * works, a dropped socket resumes without a gap, and the run playground
 * starts dry and demo runs.
 *
 * Skipped, with a message, when there is no Chromium; CI installs it and
 * fails when these tests did not run.
 */
import { cardsOf, type PageWindow, chromiumAvailable, ensureConsoleBuilt, launchBrowser, openPage, recordCardsAndSockets, SKIP_MESSAGE, type Browser } from './browser';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';

const available = chromiumAvailable();
if (!available) console.warn(SKIP_MESSAGE);
const describeInChromium = available ? describe : describe.skip;

// A browser on a shared machine is slow to start pages; each test still waits for events, never for time.
jest.setTimeout(120_000);

/** The slow demo configurations stream a word this often (ms), so a test sees a run while it runs. */
const SLOW_DELTA_MS = 150;

describeInChromium('the console in Chromium', () => {
  let t: TestServer;
  let browser: Browser;
  let base: string;
  let viewer: string;

  beforeAll(async () => {
    ensureConsoleBuilt();
    t = await startTestServer('sqlite', { env: { SEED_EXAMPLES: 'true' } });
    base = t.url.replace(/\/graphql$/, '');
    viewer = await t.tokenFor('VIEWER');
    for (const [identifier, deltaDelayMs] of [
      ['slow-demo', SLOW_DELTA_MS],
      ['slower-demo', SLOW_DELTA_MS * 3],
    ] as const) {
      await t.ok('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', {
        input: { identifier, name: identifier, model: 'demo', systemPrompt: 'You are slow.', options: { deltaDelayMs } },
      });
    }
    browser = await launchBrowser();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await t?.stop();
  });

  async function startRun(input: Record<string, unknown>): Promise<string> {
    const data = await t.ok<{ startRun: { id: string } }>('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input });
    return data.startRun.id;
  }

  async function storedSteps(id: string): Promise<string[]> {
    const data = await t.ok<{ run: { steps: { sequence: number; kind: string }[] } }>('query($id: ID!) { run(id: $id) { steps { sequence kind } } }', { id });
    return data.run.steps.map((step) => `${step.sequence}:${step.kind}`);
  }

  async function finishedDemoRun(): Promise<string> {
    const id = await startRun({ configuration: 'demo-assistant', prompt: 'What is 17 * 23?', tools: ['calculator'] });
    for (let attempt = 0; attempt < 200; attempt += 1) {
      const data = await t.ok<{ run: { status: string } }>('query($id: ID!) { run(id: $id) { status } }', { id });
      if (data.run.status === 'COMPLETED') return id;
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    throw new Error(`run ${id} did not complete`);
  }

  it('asks for a token once, keeps it, and every page loads with no request to another host and no console error', async () => {
    const signIn = await openPage(browser, base, null);
    await signIn.page.goto(`${base}/`);
    await signIn.page.fill('[data-field="token"]', viewer);
    await signIn.page.click('[data-action="sign-in"]');
    await signIn.page.waitForSelector('text=Signed in as');
    expect(await signIn.page.evaluate(() => (globalThis as unknown as PageWindow).localStorage.getItem('promptwire.token'))).toBe(viewer);
    await signIn.page.close();

    const runId = await finishedDemoRun();
    for (const [path, ready] of [
      ['/', '[data-link="playground"]'],
      ['/runs', `[data-run-id="${runId}"]`],
      ['/runs/new', '[data-field="configuration"] option[value="demo-assistant"]'],
      [`/runs/${runId}`, '[data-step-kind="END"]'],
      ['/playground', '.graphiql-query-editor .view-lines'],
    ] as const) {
      const watched = await openPage(browser, base, ADMIN_TOKEN);
      await watched.page.goto(base + path);
      await watched.page.waitForSelector(ready, { state: 'attached' });
      await watched.page.waitForLoadState('networkidle');
      expect({ path, foreign: watched.foreignRequests, errors: watched.errors }).toEqual({ path, foreign: [], errors: [] });
      await watched.page.close();
    }
  });

  it('a replayed REQUEST card reads its messages only when they are opened, and shows them; the JSON view has them too', async () => {
    const runId = await finishedDemoRun();
    const stored = await t.ok<{ run: { steps: { sequence: number; kind: string; messageCount: number | null; messagesSent: { role: string; content: string | null }[] | null }[] } }>(
      'query($id: ID!) { run(id: $id) { steps { sequence kind messageCount messagesSent { role content } } } }',
      { id: runId },
    );
    const requests = stored.run.steps.filter((step) => step.kind === 'REQUEST');
    expect(requests.length).toBeGreaterThanOrEqual(2);
    for (const step of stored.run.steps) expect(step.messageCount).toBe(step.kind === 'REQUEST' ? step.messagesSent!.length : null);
    const last = requests.at(-1)!;

    const { page, errors } = await openPage(browser, base, viewer);
    const bodies: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'POST' && request.url().endsWith('/graphql')) bodies.push(request.postData() ?? '');
    });
    await page.goto(`${base}/runs/${runId}`);
    await page.waitForSelector('[data-step-kind="END"]', { state: 'attached' });
    const card = `[data-step-sequence="${last.sequence}"]`;
    expect(await page.textContent(`${card} .messages-sent > summary`)).toBe(`${last.messageCount} messages sent`);
    // The replay came without messages, and none of a REQUEST was read (an ASSEMBLED card shows its own at once).
    const messageReads = () => bodies.filter((body) => /RunStepMessages/.test(body)).map((body) => (JSON.parse(body) as { variables: { afterSequence: number } }).variables.afterSequence + 1);
    const assembled = stored.run.steps.filter((step) => step.kind === 'ASSEMBLED').map((step) => step.sequence);
    expect(bodies.some((body) => /RunStepSummaries/.test(body))).toBe(true);
    expect(bodies.filter((body) => /\bmessagesSent\b/.test(body) && !/RunStepMessages/.test(body))).toEqual([]);
    expect(messageReads().filter((sequence) => !assembled.includes(sequence))).toEqual([]);
    expect(await page.$(`${card} .messages-sent li`)).toBeNull();

    await page.click(`${card} .messages-sent > summary`);
    await page.waitForSelector(`${card} .messages-sent li.message`);
    expect(messageReads().filter((sequence) => !assembled.includes(sequence))).toEqual([last.sequence]);
    const shown = await page.$$eval(`${card} .messages-sent li.message`, (items) => items.map((item) => item.querySelector('.role')?.textContent ?? ''));
    expect(shown).toEqual(last.messagesSent!.map((message) => message.role));
    const userText = last.messagesSent!.find((message) => message.role === 'user')!.content!;
    expect(await page.textContent(`${card} .messages-sent`)).toContain(userText);

    await page.click(`${card} .json > summary`);
    await page.waitForSelector(`${card} .json pre`);
    const json = JSON.parse((await page.textContent(`${card} .json pre`))!) as { sequence: number; messageCount: number; messagesSent: { role: string; content: string | null }[] };
    expect(json.sequence).toBe(last.sequence);
    expect(json.messageCount).toBe(last.messageCount);
    expect(json.messagesSent.map(({ role, content }) => ({ role, content }))).toEqual(last.messagesSent);
    expect(errors).toEqual([]);
    await page.close();
  });

  it('the playground runs a query over HTTP and a subscription over graphql-ws', async () => {
    const runId = await finishedDemoRun();
    const { page, errors, foreignRequests } = await openPage(browser, base, ADMIN_TOKEN);
    await page.goto(`${base}/playground`);
    const run = async (operation: string) => {
      await page.click('.graphiql-query-editor .view-lines');
      await page.keyboard.press('Control+A');
      await page.keyboard.press('Delete');
      await page.keyboard.insertText(operation);
      await page.click('.graphiql-execute-button');
    };
    await run('{ snippets(tag: "persona") { identifier tags } }');
    await page.waitForSelector('.graphiql-response :text("nova_persona")');
    await run(`subscription { runTrace(runId: "${runId}") { sequence kind toolResult } }`);
    await page.waitForSelector('.graphiql-response :text("END")');
    expect(errors).toEqual([]);
    expect(foreignRequests).toEqual([]);
    await page.close();
  });

  it('a live run: cards 1..N appear once each in order, deltas stream, a reload and a second window show the same run', async () => {
    const id = await startRun({ configuration: 'slow-demo', prompt: 'Please describe the weather on a long summer afternoon.' });
    const first = await openPage(browser, base, viewer);
    await first.page.addInitScript(recordCardsAndSockets);
    await first.page.goto(`${base}/runs/${id}`);
    // The streaming call's words appear while the run is running.
    await first.page.waitForFunction(() => ((globalThis as unknown as PageWindow).document.querySelector('[data-run-delta]')?.textContent ?? '').split(' ').length >= 3);
    expect(await first.page.textContent('[data-run-status]')).toBe('RUNNING');

    const second = await openPage(browser, base, viewer);
    await second.page.addInitScript(recordCardsAndSockets);
    await second.page.goto(`${base}/runs/${id}`);
    await second.page.waitForSelector('[data-step-kind="REQUEST"]', { state: 'attached' });

    await first.page.reload();
    for (const { page } of [first, second]) await page.waitForSelector('[data-run-status]:text("COMPLETED")', { timeout: 20_000 });

    const stored = await storedSteps(id);
    expect(stored.at(-1)).toMatch(/:END$/);
    for (const { page, errors, foreignRequests } of [first, second]) {
      expect(await cardsOf(page)).toEqual(stored);
      const added = await page.evaluate(() => (globalThis as unknown as PageWindow).__cardsAdded);
      expect(added).toEqual(stored.map((_, index) => index + 1));
      expect(errors).toEqual([]);
      expect(foreignRequests).toEqual([]);
    }
    expect(await first.page.textContent('.steps')).toBe(await second.page.textContent('.steps'));
    await first.page.close();
    await second.page.close();
  });

  it('cancel ends a running run CANCELLED with an END card', async () => {
    const id = await startRun({ configuration: 'slow-demo', prompt: 'Tell me a long story about a lighthouse keeper and the sea.' });
    const { page, errors } = await openPage(browser, base, ADMIN_TOKEN);
    await page.goto(`${base}/runs/${id}`);
    await page.waitForFunction(() => ((globalThis as unknown as PageWindow).document.querySelector('[data-run-delta]')?.textContent ?? '') !== '');
    await page.click('[data-action="cancel"]');
    await page.waitForSelector('[data-run-status]:text("CANCELLED")');
    await page.waitForSelector('[data-step-kind="END"]', { state: 'attached' });
    expect(await cardsOf(page)).toEqual(await storedSteps(id));
    expect(await page.$('[data-action="cancel"]')).toBeNull();
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a run waiting for approval shows its pending call; approving it lets the run finish', async () => {
    const id = await startRun({ configuration: 'demo-assistant', prompt: 'What is 17 * 23?', tools: ['calculator'], approvalRequired: ['calculator'] });
    const { page, errors } = await openPage(browser, base, ADMIN_TOKEN);
    await page.goto(`${base}/runs/${id}`);
    await page.waitForSelector('[data-run-status]:text("WAITING_FOR_APPROVAL")');
    const pending = await t.ok<{ run: { pendingToolCalls: { id: string; name: string }[] } }>('query($id: ID!) { run(id: $id) { pendingToolCalls { id name } } }', { id });
    expect(pending.run.pendingToolCalls).toHaveLength(1);
    const callId = pending.run.pendingToolCalls[0]!.id;
    expect(await page.$$('[data-approval-call]')).toHaveLength(1);
    // Without a timeout the card shows no countdown.
    expect(await page.$('[data-approval-deadline]')).toBeNull();
    await page.click(`[data-approval-call="${callId}"] [data-action="approve"]`);
    await page.waitForSelector('[data-run-status]:text("COMPLETED")');
    await page.waitForSelector('[data-step-kind="END"]', { state: 'attached' });
    expect(await cardsOf(page)).toEqual(await storedSteps(id));
    expect(await page.$('[data-approval-call]')).toBeNull();
    const done = await t.ok<{ run: { finalContent: string } }>('query($id: ID!) { run(id: $id) { finalContent } }', { id });
    expect(done.run.finalContent).toContain('391');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a run waiting for approval with a timeout shows when its calls will be refused', async () => {
    const id = await startRun({ configuration: 'demo-assistant', prompt: 'What is 17 * 23?', tools: ['calculator'], approvalRequired: ['calculator'], approvalTimeoutSeconds: 3600 });
    const { page, errors } = await openPage(browser, base, ADMIN_TOKEN);
    await page.goto(`${base}/runs/${id}`);
    await page.waitForSelector('[data-run-status]:text("WAITING_FOR_APPROVAL")');
    const shown = await page.waitForSelector('[data-approval-deadline]');
    const stored = await t.ok<{ run: { approvalDeadline: string } }>('query($id: ID!) { run(id: $id) { approvalDeadline } }', { id });
    expect(new Date((await shown.getAttribute('data-approval-deadline'))!).getTime()).toBe(new Date(stored.run.approvalDeadline).getTime());
    expect(await shown.textContent()).toMatch(/refused as not approved in (59|60) min \d+ s unless decided/);
    await t.ok('mutation($id: ID!) { cancelRun(id: $id) { status } }', { id });
    await page.waitForSelector('[data-run-status]:text("CANCELLED")');
    expect(await page.$('[data-approval-deadline]')).toBeNull();
    expect(errors).toEqual([]);
    await page.close();
  });

  it('a dropped socket resumes from the last card, without a gap or a repeated card', async () => {
    const id = await startRun({ configuration: 'slower-demo', prompt: 'What is 6 * 7, and why?', tools: ['calculator'] });
    const { page, errors } = await openPage(browser, base, viewer);
    await page.addInitScript(recordCardsAndSockets);
    await page.goto(`${base}/runs/${id}`);
    await page.waitForSelector('[data-step-kind="REQUEST"]', { state: 'attached' });
    expect(await page.textContent('[data-run-status]')).toBe('RUNNING');
    const opened = await page.evaluate(() => {
      const sockets = (globalThis as unknown as PageWindow).__sockets;
      const count = sockets.length;
      for (const socket of sockets) socket.close(3000, 'dropped by the test');
      return count;
    });
    await page.waitForSelector('[data-run-status]:text("COMPLETED")', { timeout: 20_000 });
    const stored = await storedSteps(id);
    expect(await cardsOf(page)).toEqual(stored);
    expect(await page.evaluate(() => (globalThis as unknown as PageWindow).__cardsAdded)).toEqual(stored.map((_, index) => index + 1));
    // The trace was followed on a new connection after the drop.
    expect(await page.evaluate(() => (globalThis as unknown as PageWindow).__sockets.length)).toBeGreaterThan(opened);
    expect(await page.textContent('[data-step-kind="TOOL"]')).toContain('42');
    expect(errors.filter((error) => !/WebSocket/i.test(error))).toEqual([]);
    await page.close();
  });

  it('the run playground starts a dry run and a demo run, each opening its run page', async () => {
    const { page, errors } = await openPage(browser, base, ADMIN_TOKEN);
    await page.goto(`${base}/runs/new`);
    await page.selectOption('[data-field="configuration"]', 'demo-assistant');
    await page.waitForSelector('[data-effective-prompt]:text("Nova persona")');
    await page.fill('[data-field="prompt"]', 'What is 17 * 23?');
    await page.check('[data-field="dryRun"]');
    await page.click('[data-action="start"]');
    await page.waitForURL(/\/runs\/[0-9a-f-]{36}$/);
    await page.waitForSelector('[data-step-kind="END"]', { state: 'attached' });
    expect(await cardsOf(page)).not.toContain(expect.stringMatching(/:LLM$/));

    await page.goto(`${base}/runs/new`);
    await page.selectOption('[data-field="configuration"]', 'demo-assistant');
    await page.fill('[data-field="prompt"]', 'What is 17 * 23?');
    await page.click('[data-action="start"]');
    await page.waitForURL(/\/runs\/[0-9a-f-]{36}$/);
    await page.waitForSelector('[data-run-status]:text("COMPLETED")');
    expect(await page.textContent('[data-step-kind="TOOL"]')).toContain('391');
    expect(await page.textContent('.final')).toContain('The result is 391.');
    expect(errors).toEqual([]);
    await page.close();
  });

  it('the runs list shows a new run and its end without a reload, from the runUpdated subscription (the list is loaded once)', async () => {
    const { page, errors } = await openPage(browser, base, viewer);
    const listLoads: string[] = [];
    page.on('request', (request) => {
      if (request.method() === 'POST' && /\bruns\(/.test(request.postData() ?? '')) listLoads.push(request.url());
    });
    await page.goto(`${base}/runs`);
    // Loaded: the table, or the empty list's text.
    await page.waitForSelector('table.runs, [data-runs-empty]');
    const id = await startRun({ configuration: 'slow-demo', prompt: 'A few words, slowly.' });
    await page.waitForSelector(`[data-run-id="${id}"]`, { state: 'attached' });
    await page.waitForSelector(`[data-run-id="${id}"][data-status="COMPLETED"]`, { timeout: 20_000 });
    expect(await page.$$eval('[data-run-id]', (rows) => rows[0]?.getAttribute('data-run-id'))).toBe(id);
    // Loaded when the page opened (and again only if its socket reconnected): no polling.
    expect(listLoads.length).toBeGreaterThanOrEqual(1);
    expect(listLoads.length).toBeLessThanOrEqual(2);
    expect(errors).toEqual([]);
    await page.close();
  });
});
