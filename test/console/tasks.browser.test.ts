/**
 * The console's Tasks section in a real browser (headless Chromium), through
 * the running server and a scripted provider: the list shows the tasks and
 * filters them by category; editing and saving makes a new version; the
 * preview shows exactly what renderTask returns; "try it" runs the task and
 * shows its answer; a bad variable shows the server's own message.
 *
 * Skipped, with a message, when there is no Chromium; CI installs it and
 * fails when these tests did not run.
 */
import { chromiumAvailable, ensureConsoleBuilt, launchBrowser, openPage, SKIP_MESSAGE, type Browser, type WatchedPage } from './browser';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier, type RunSetup } from '../runs/run-kit';

const available = chromiumAvailable();
if (!available) console.warn(SKIP_MESSAGE);
const describeInChromium = available ? describe : describe.skip;

// A browser on a shared machine is slow to start pages; each test still waits for events, never for time.
jest.setTimeout(120_000);

interface RenderView {
  systemPrompt: string;
  userPrompt: string;
  callOptions: Record<string, unknown>;
}

describeInChromium('the Tasks section of the console in Chromium', () => {
  let t: TestServer;
  let browser: Browser;
  let base: string;
  let setup: RunSetup;
  const kit = new RunKit(() => t);
  const pages: WatchedPage[] = [];

  beforeAll(async () => {
    ensureConsoleBuilt();
    t = await startTestServer('sqlite');
    base = t.url.replace(/\/graphql$/, '');
    setup = await kit.setup({ systemPrompt: 'You write for a news site.' });
    browser = await launchBrowser();
  }, 300_000);

  afterAll(async () => {
    await browser?.close();
    await kit.closeProviders();
    await t?.stop();
  });

  /** A page with the administrator's token; checked for errors and foreign requests after each test. */
  const open = async (path: string): Promise<WatchedPage> => {
    const watched = await openPage(browser, base, ADMIN_TOKEN);
    pages.push(watched);
    await watched.page.goto(base + path);
    return watched;
  };
  afterEach(async () => {
    for (const { page, errors, foreignRequests } of pages.splice(0)) {
      expect({ errors, foreignRequests }).toEqual({ errors: [], foreignRequests: [] });
      await page.close();
    }
  });

  const createTask = async (input: Record<string, unknown>) => {
    const identifier = uniqueIdentifier('task');
    await t.ok('mutation($input: CreateTaskInput!) { createTask(input: $input) { uid } }', { input: { identifier, name: `Task ${identifier}`, configuration: setup.configuration, ...input } });
    return identifier;
  };
  const render = async (identifier: string, input: string, variables: Record<string, unknown>) =>
    (await t.ok<{ renderTask: RenderView }>('query($id: String!, $input: String, $vars: JSON) { renderTask(identifier: $id, input: $input, variables: $vars) { systemPrompt userPrompt callOptions } }', { id: identifier, input, vars: variables })).renderTask;

  it('the list shows the created tasks and filters them by category in Chromium', async () => {
    const content = await createTask({ category: 'content', promptTemplate: 'Summarise: {{input}}' });
    const developer = await createTask({ category: 'developer', promptTemplate: 'Explain: {{input}}' });
    const { page } = await open('/tasks');
    await page.waitForSelector(`[data-task="${content}"]`);
    await page.waitForSelector(`[data-task="${developer}"]`);
    expect(await page.textContent(`[data-task="${content}"]`)).toContain(`Task ${content}`);

    await page.selectOption('[data-field="category"]', 'content');
    await page.waitForSelector(`[data-task="${developer}"]`, { state: 'detached' });
    await page.waitForSelector(`[data-task="${content}"]`);
    expect(new Set(await page.$$eval('[data-task]', (rows) => rows.map((row) => row.getAttribute('data-category'))))).toEqual(new Set(['content']));
    expect(page.url()).toMatch(/\/tasks\?category=content$/);

    await page.click(`[data-task="${content}"] a`);
    await page.waitForURL(new RegExp(`/tasks/${content}$`));
    await page.waitForSelector('[data-field="promptTemplate"]');
  });

  it('editing the template and a variable and saving stores a new version in Chromium', async () => {
    const identifier = await createTask({ promptTemplate: 'Headline: {{input}}' });
    const { page } = await open(`/tasks/${identifier}`);
    await page.waitForSelector('[data-version="1"]');
    await page.fill('[data-field="promptTemplate"]', 'Headline in {{words}} words: {{input}}');
    await page.click('[data-action="add-variable"]');
    await page.fill('[data-declared-variable="0"] [data-variable-field="name"]', 'words');
    await page.selectOption('[data-declared-variable="0"] [data-variable-field="type"]', 'integer');
    await page.fill('[data-declared-variable="0"] [data-variable-field="default"]', '8');
    await page.selectOption('[data-field="outputFormat"]', 'plain');
    await page.click('[data-action="save"]');
    await page.waitForSelector('[data-saved]');
    await page.waitForSelector('[data-version="2"]');

    const stored = await t.ok<{ task: { promptTemplate: string; outputFormat: string; variables: unknown[]; versions: { version: number }[] } }>(
      'query($id: String!) { task(identifier: $id) { promptTemplate outputFormat variables { name type required default } versions { version } } }',
      { id: identifier },
    );
    expect(stored.task).toEqual({
      promptTemplate: 'Headline in {{words}} words: {{input}}',
      outputFormat: 'plain',
      variables: [
        { name: 'words', type: 'integer', required: false, default: 8 },
        { name: 'input', type: 'string', required: true, default: null },
      ],
      versions: [{ version: 2 }, { version: 1 }],
    });
    // Saving again unchanged keeps the declarations as they are (no new variables change).
    await page.reload();
    await page.waitForSelector('[data-declared-variable="0"]');
    expect(await page.inputValue('[data-declared-variable="0"] [data-variable-field="default"]')).toBe('8');

    // A save the server refuses shows its message and stores nothing.
    await page.fill('[data-field="promptTemplate"]', 'No placeholder for the variable: {{input}}');
    await page.click('[data-action="save"]');
    await page.waitForSelector('[data-save-problem]');
    expect(await page.textContent('[data-save-problem]')).toBe('variable "words" is declared but the template has no {{words}}');
    expect((await t.ok<{ task: { versions: unknown[] } }>('query($id: String!) { task(identifier: $id) { versions { version } } }', { id: identifier })).task.versions).toHaveLength(2);
  });

  it('saving a row TYPO3 wrote with a category outside nr_llm\'s lists sends only what was edited in Chromium', async () => {
    const identifier = uniqueIdentifier('typo3task');
    await t.database.query(
      `INSERT INTO tx_nrllm_task (pid, identifier, name, description, category, configuration_uid, prompt_template, input_type, input_source, output_format, skills, is_active, is_system, sorting, tstamp, crdate, deleted, hidden)
       VALUES (0, ?, 'From TYPO3', NULL, 'weird', 0, 'Summarise: {{input}}', 'manual', NULL, 'markdown', 0, 1, 1, 0, 0, 0, 0, 0)`,
      [identifier],
    );
    const { page } = await open(`/tasks/${identifier}`);
    await page.waitForSelector('[data-field="name"]');
    expect(await page.inputValue('[data-field="category"]')).toBe('weird');
    await page.fill('[data-field="name"]', 'Renamed in the console');
    await page.click('[data-action="save"]');
    await page.waitForSelector('[data-saved]');
    const stored = await t.ok<{ task: { name: string; category: string } }>('query($id: String!) { task(identifier: $id) { name category } }', { id: identifier });
    expect(stored.task).toEqual({ name: 'Renamed in the console', category: 'weird' });
  });

  it('the preview shows the exact system and user prompts and call options renderTask returns in Chromium', async () => {
    const skill = uniqueIdentifier('skill');
    await kit.createSkill({ identifier: skill, name: 'House style', body: 'Short sentences.\n  Indented line kept.' });
    const identifier = await createTask({
      promptTemplate: 'Keywords for {{audience}} ({{count}}):\n\n{{input}}  ',
      outputFormat: 'json',
      skills: [skill],
      variables: [{ name: 'count', type: 'integer', default: 3 }],
    });
    const { page } = await open(`/tasks/${identifier}`);
    await page.waitForSelector('[data-variable="audience"]');
    await page.fill('[data-variable="input"]', 'Line one\n  line two {{input}}');
    await page.fill('[data-variable="audience"]', 'editors');
    await page.fill('[data-variable="count"]', '5');
    await page.click('[data-action="preview"]');
    await page.waitForSelector('[data-render-user]');

    const expected = await render(identifier, 'Line one\n  line two {{input}}', { audience: 'editors', count: 5 });
    expect(expected.userPrompt).toContain('Keywords for editors (5):\n\nLine one\n  line two {{input}}  \n\nRespond with valid JSON only. No markdown, no explanation.');
    expect(await page.textContent('[data-render-user]')).toBe(expected.userPrompt);
    expect(await page.textContent('[data-render-system]')).toBe(expected.systemPrompt);
    expect(expected.systemPrompt).toBe('You write for a news site.');
    expect(JSON.parse((await page.textContent('[data-render-options]'))!)).toEqual(expected.callOptions);
    expect(expected.callOptions).toMatchObject({ response_format: 'json' });
    expect(setup.provider.requests).toHaveLength(0);
  });

  it('try it runs the task; the run completes, its answer is shown and it links to the run page in Chromium', async () => {
    const identifier = await createTask({ promptTemplate: 'Alt text for: {{input}}' });
    setup.provider.script({ text: 'A black cat asleep on a red chair.', usage: { prompt: 12, completion: 9 } });
    const before = setup.provider.requests.length;
    const { page } = await open(`/tasks/${identifier}`);
    await page.waitForSelector('[data-variable="input"]');
    await page.fill('[data-variable="input"]', 'cat.jpg');
    await page.click('[data-action="try"]');
    await page.waitForSelector('[data-try-status]:text("COMPLETED")', { timeout: 20_000 });
    expect(await page.textContent('[data-try-output]')).toBe('A black cat asleep on a red chair.');
    expect(setup.provider.requests.length - before).toBe(1);
    const sent = setup.provider.requests.at(-1)!.body.messages as { role: string; content: string }[];
    expect(sent.at(-1)).toEqual({ role: 'user', content: 'Alt text for: cat.jpg' });

    const runId = (await page.getAttribute('[data-try-run]', 'data-try-run'))!;
    const run = await t.ok<{ run: { status: string; task: string; finalContent: string } }>('query($id: ID!) { run(id: $id) { status task finalContent } }', { id: runId });
    expect(run.run).toEqual({ status: 'COMPLETED', task: identifier, finalContent: 'A black cat asleep on a red chair.' });
    await page.click('[data-link="run"]');
    await page.waitForURL(new RegExp(`/runs/${runId}$`));
    await page.waitForSelector('[data-step-kind="END"]', { state: 'attached' });
  });

  it('a bad variable shows the server\'s error message and sends nothing in Chromium', async () => {
    const identifier = await createTask({ promptTemplate: 'Write for {{audience}}: {{input}} ({{count}})', variables: [{ name: 'count', type: 'integer', default: 3 }] });
    const before = setup.provider.requests.length;
    const server = await t.gql('query($id: String!) { renderTask(identifier: $id, input: "text", variables: { count: "many" }) { userPrompt } }', { id: identifier });
    const message = server.errors![0]!.message;
    expect(message).toBe('Missing variables: audience; Mistyped variables: count (expected integer, got string)');

    const { page } = await open(`/tasks/${identifier}`);
    await page.waitForSelector('[data-variable="count"]');
    await page.fill('[data-variable="input"]', 'text');
    await page.fill('[data-variable="count"]', 'many');
    await page.click('[data-action="preview"]');
    await page.waitForSelector('[data-task-problem]');
    expect(await page.textContent('[data-task-problem]')).toBe(message);
    expect(await page.$('[data-render]')).toBeNull();

    // Try it, on a fresh page: the same message, and no run.
    await page.reload();
    await page.waitForSelector('[data-variable="count"]');
    await page.fill('[data-variable="input"]', 'text');
    await page.fill('[data-variable="count"]', 'many');
    await page.click('[data-action="try"]');
    await page.waitForSelector('[data-task-problem]');
    expect(await page.textContent('[data-task-problem]')).toBe(message);
    expect(await page.$('[data-try-run]')).toBeNull();
    expect(setup.provider.requests.length).toBe(before);
  });
});
