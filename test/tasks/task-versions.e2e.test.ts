/**
 * Tasks are versioned like snippets (every write, also TYPO3's, is a
 * version; diff, restore, promptChanged kind "task"), and releases apply: a
 * task published under a label runs as it was frozen.
 */
import { testDialects } from '../support/databases';
import { collect, startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier, type RunSetup } from '../runs/run-kit';

interface VersionView {
  version: number;
  promptTemplate: string;
  source: string;
  author: string | null;
  variables: unknown;
}

const eventually = async <T>(probe: () => T | undefined | Promise<T | undefined>, timeoutMs = 10_000): Promise<T> => {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined && value !== false) return value;
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
};

describe.each(testDialects)('task versions and releases on %s', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);
  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { PROMPT_CHANGE_POLL_MS: '200' } });
  });
  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
  });

  const createTask = async (setup: RunSetup | null, input: Record<string, unknown>) =>
    (
      await t.ok<{ createTask: { uid: number; identifier: string } }>('mutation($input: CreateTaskInput!) { createTask(input: $input) { uid identifier } }', {
        input: { identifier: uniqueIdentifier('task'), name: 'Task', ...(setup ? { configuration: setup.configuration } : {}), ...input },
      })
    ).createTask;
  const versions = async (identifier: string) =>
    (await t.ok<{ task: { versions: VersionView[] } }>('query($id: String!) { task(identifier: $id) { versions { version promptTemplate source author variables } } }', { id: identifier })).task.versions;
  const update = (uid: number, input: Record<string, unknown>) => t.ok('mutation($uid: Int!, $input: UpdateTaskInput!) { updateTask(uid: $uid, input: $input) { uid } }', { uid, input });

  it('every write is a version; the diff shows the template change; restore writes an old version back as a new one', async () => {
    const task = await createTask(null, { promptTemplate: 'Summarise: {{input}}' });
    await update(task.uid, { promptTemplate: 'Summarise for {{audience}}: {{input}}', variables: [{ name: 'audience', type: 'string', default: 'editors' }] });
    const listed = await versions(task.identifier);
    expect(listed.map((version) => [version.version, version.promptTemplate, version.source])).toEqual([
      [2, 'Summarise for {{audience}}: {{input}}', 'api'],
      [1, 'Summarise: {{input}}', 'api'],
    ]);
    expect(listed[0]!.variables).toEqual([{ name: 'audience', type: 'string', default: 'editors', description: null }]);
    const diff = await t.ok<{ taskVersionDiff: { fields: { field: string }[]; textDiff: string } }>('query($uid: Int!) { taskVersionDiff(uid: $uid, from: 1, to: 2) { fields { field } textDiff } }', { uid: task.uid });
    expect(diff.taskVersionDiff.fields.map((field) => field.field)).toEqual(['promptTemplate', 'variables']);
    expect(diff.taskVersionDiff.textDiff).toContain('-Summarise: {{input}}');
    expect(diff.taskVersionDiff.textDiff).toContain('+Summarise for {{audience}}: {{input}}');

    const restored = await t.ok<{ restoreTask: { promptTemplate: string; variables: { name: string }[] } }>('mutation($uid: Int!) { restoreTask(uid: $uid, version: 1) { promptTemplate variables { name } } }', { uid: task.uid });
    expect(restored.restoreTask).toEqual({ promptTemplate: 'Summarise: {{input}}', variables: [{ name: 'input' }] });
    expect((await versions(task.identifier)).map((version) => version.version)).toEqual([3, 2, 1]);
  });

  it('promptChanged streams task changes, from the API and from TYPO3 writing the table', async () => {
    const task = await createTask(null, { promptTemplate: 'Alt text: {{input}}' });
    const viewer = await t.tokenFor('VIEWER');
    type Change = { promptChanged: { kind: string; identifier: string; version: number; source: string; affectedConfigurations: string[] } };
    const feed = collect<Change>(t.wsClient(viewer), 'subscription { promptChanged { kind identifier version source affectedConfigurations } }', {});
    await eventually(async () => {
      await update(task.uid, { description: `ping ${Date.now()}` });
      return feed.events.some((event) => event.promptChanged.identifier === task.identifier) || undefined;
    });
    await update(task.uid, { promptTemplate: 'Alt text, short: {{input}}' });
    const api = await eventually(() => feed.events.find((event) => event.promptChanged.identifier === task.identifier && event.promptChanged.source === 'api' && event.promptChanged.version >= 3));
    expect(api.promptChanged).toMatchObject({ kind: 'task', affectedConfigurations: [] });

    await t.database.query('UPDATE tx_nrllm_task SET prompt_template = ?, tstamp = ? WHERE uid = ?', ['Edited in TYPO3: {{input}}', Math.floor(Date.now() / 1000) + 1, task.uid]);
    const external = await eventually(() => feed.events.find((event) => event.promptChanged.identifier === task.identifier && event.promptChanged.source === 'external'));
    expect(external.promptChanged.kind).toBe('task');
    const latest = (await versions(task.identifier))[0]!;
    expect(latest).toMatchObject({ promptTemplate: 'Edited in TYPO3: {{input}}', source: 'external', author: null });
  });

  it('runTask(label) sends the template the release froze, on the configuration\'s release, with the task version on the run', async () => {
    const setup = await kit.setup({ systemPrompt: 'Released system prompt.' });
    await t.ok('mutation($id: String!) { publishConfiguration(identifier: $id, label: "production") { id } }', { id: setup.configuration });
    const task = await createTask(setup, { promptTemplate: 'Headline for: {{input}}' });
    const release = await t.ok<{ publishTask: { task: string; label: string; version: number } }>('mutation($id: String!) { publishTask(identifier: $id, label: "Production") { task label version } }', { id: task.identifier });
    expect(release.publishTask).toEqual({ task: task.identifier, label: 'production', version: 1 });
    // Publishing again unchanged answers the same release.
    expect((await t.ok<{ publishTask: { version: number } }>('mutation($id: String!) { publishTask(identifier: $id, label: "production") { version } }', { id: task.identifier })).publishTask.version).toBe(1);

    await update(task.uid, { promptTemplate: 'Edited headline for: {{input}}' });
    setup.provider.script({ text: 'Frozen.' }, { text: 'Current.' });
    const released = await t.ok<{ runTask: { content: string; run: { id: string; task: string } } }>('mutation($input: RunTaskInput!) { runTask(input: $input) { content run { id task } } }', {
      input: { task: task.identifier, input: 'cats', label: 'production' },
    });
    expect(released.runTask.run.task).toBe(task.identifier);
    const sent = setup.provider.requests[0]!.body.messages as { role: string; content: string }[];
    expect(sent).toEqual([
      { role: 'system', content: 'Released system prompt.' },
      { role: 'user', content: 'Headline for: cats' },
    ]);
    await t.ok('mutation($input: RunTaskInput!) { runTask(input: $input) { content } }', { input: { task: task.identifier, input: 'cats' } });
    expect((setup.provider.requests[1]!.body.messages as { content: string }[]).at(-1)!.content).toBe('Edited headline for: cats');

    const [provenance] = (await t.database.query('SELECT p.task_version AS version FROM promptwire_run_provenance p JOIN tx_nrllm_agentrun r ON r.uid = p.run_uid WHERE r.uuid = ?', [released.runTask.run.id])) as { version: number }[];
    expect(Number(provenance!.version)).toBe(1);

    const rendered = await t.ok<{ renderTask: { userPrompt: string; label: string } }>('query($id: String!) { renderTask(identifier: $id, input: "dogs", label: "production") { userPrompt label } }', { id: task.identifier });
    expect(rendered.renderTask).toEqual({ userPrompt: 'Headline for: dogs', label: 'production' });
  });

  it('a label the task was never published under is NOT_FOUND, and nothing is sent', async () => {
    const setup = await kit.setup();
    const task = await createTask(setup, { promptTemplate: '{{input}}' });
    const result = await t.gql('mutation($input: RunTaskInput!) { runTask(input: $input) { content } }', { input: { task: task.identifier, input: 'x', label: 'staging' } });
    expect(result.errors?.[0]).toMatchObject({ extensions: { code: 'NOT_FOUND' } });
    expect(result.errors?.[0]?.message).toMatch(/has no release labelled "staging"; publishTask makes one/);
    expect(setup.provider.requests).toHaveLength(0);
  });
});
