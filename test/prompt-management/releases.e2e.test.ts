/**
 * Releases through the running server: publishConfiguration freezes a
 * configuration under a label, startRun({label}) sends exactly the frozen
 * release after edits through GraphQL and directly in the tables, and the
 * run shows which release and snippet versions it used.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit, STEP_FIELDS, uniqueIdentifier, type RunWithSteps, type StepView } from '../runs/run-kit';

interface ReleaseView {
  id: string;
  label: string;
  effectiveSystemPrompt: string;
  snippets: { identifier: string; version: number }[];
  skills: { identifier: string; version: number }[];
  callOptions: Record<string, unknown>;
  configurationVersion: number;
  createdAt: string;
  author: string | null;
}

const RELEASE_FIELDS = 'id label effectiveSystemPrompt snippets { uid identifier version } skills { uid identifier version } callOptions configurationVersion createdAt author';

type RunWithRelease = RunWithSteps & { releaseLabel: string | null; release: { id: string; label: string } | null; snippetVersions: { identifier: string; version: number }[] };

describe.each(testDialects)('configuration releases through the server on %s', (dialect) => {
  let t: TestServer;
  let editor: string;
  let viewer: string;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    t = await startTestServer(dialect);
    editor = await t.tokenFor('EDITOR');
    viewer = await t.tokenFor('VIEWER');
  });
  afterAll(async () => {
    await t?.stop();
    await kit.closeProviders();
  });

  const publish = async (identifier: string, label: string, token = editor) =>
    (await t.ok<{ publishConfiguration: ReleaseView }>(`mutation($identifier: String!, $label: String!) { publishConfiguration(identifier: $identifier, label: $label) { ${RELEASE_FIELDS} } }`, { identifier, label }, token))
      .publishConfiguration;

  const releasesOf = async (identifier: string) =>
    (await t.ok<{ configuration: { releases: ReleaseView[] } }>(`query($identifier: String) { configuration(identifier: $identifier) { releases { ${RELEASE_FIELDS} } } }`, { identifier })).configuration.releases;

  const runWithRelease = async (id: string) =>
    (
      await t.ok<{ run: RunWithRelease }>(
        `query($id: ID!) { run(id: $id) { id status terminationReason finalContent releaseLabel release { id label } snippetVersions { uid identifier version } steps { ${STEP_FIELDS} } } }`,
        { id },
      )
    ).run;

  const snippetVersionsOf = async (uid: number) =>
    (await t.ok<{ snippet: { versions: { version: number; snippet: string; source: string }[] } }>('query($uid: Int) { snippet(uid: $uid) { versions { version snippet source } } }', { uid })).snippet.versions;

  const createSnippet = async (tag: string, snippet: string, name = 'Tone') =>
    (await t.ok<{ createSnippet: { uid: number; identifier: string } }>('mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid identifier } }', {
      input: { identifier: uniqueIdentifier('snip'), name, snippet, tags: [tag] },
    })).createSnippet;

  /** The messages the run's first model call sent, as stored on its REQUEST step (or a dry run's ASSEMBLED step). */
  const sentMessages = (steps: StepView[]) => steps.find((step) => step.kind === 'REQUEST' || (step.kind as string) === 'ASSEMBLED')!.messagesSent!;

  it('startRun({label}) sends the frozen prompt, call options and skills after edits through GraphQL and in the tables; the run shows its release and snippet versions', async () => {
    const tag = uniqueIdentifier('tone');
    const skill = uniqueIdentifier('skill');
    await kit.createSkill({ identifier: skill, name: 'House style', body: 'Use short sentences.' });
    const snippet = await createSnippet(tag, 'Be formal.');
    const setup = await kit.setup({ systemPrompt: 'You answer questions.', snippetTags: [tag], skills: [skill], maxTokens: 200 });
    await t.ok('mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { temperature: 0.3 }) { uid } }', { uid: setup.configurationUid });

    const release = await publish(setup.configuration, 'production');
    expect(release).toMatchObject({
      label: 'production',
      author: 'editor test token',
      snippets: [{ uid: snippet.uid, identifier: snippet.identifier, version: 1 }],
      skills: [{ identifier: skill, version: 1 }],
      configurationVersion: 2,
      callOptions: expect.objectContaining({ temperature: 0.3, max_tokens: 200, model: 'scripted-gpt', system_prompt: release.effectiveSystemPrompt }),
    });
    expect(release.effectiveSystemPrompt.startsWith('You answer questions.')).toBe(true);
    expect(release.effectiveSystemPrompt).toContain('Be formal.');
    // Publishing stores no version of its own: the snippet's history is unchanged.
    expect(await snippetVersionsOf(snippet.uid)).toHaveLength(1);

    // Editors keep editing: the snippet through GraphQL, then TYPO3 writes it in the table; the configuration and the skill change too.
    await t.ok('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { snippet: "Be casual." }) { uid } }', { uid: snippet.uid }, editor);
    await t.database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', ['Written by TYPO3.', Math.floor(Date.now() / 1000) + 1, snippet.uid]);
    await t.ok('mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { systemPrompt: "You are changed.", temperature: 1.5, maxTokens: 999 }) { uid } }', { uid: setup.configurationUid }, editor);
    const skills = (await t.ok<{ skills: { uid: number; identifier: string }[] }>('{ skills { uid identifier } }')).skills;
    await t.ok('mutation($uid: Int!) { updateSkill(uid: $uid, input: { body: "Use long sentences." }) { uid } }', { uid: skills.find((s) => s.identifier === skill)!.uid });

    setup.provider.script({ text: 'From the release.', usage: { prompt: 5, completion: 3 } }, { text: 'From the current state.', usage: { prompt: 5, completion: 3 } });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'Hello?', tools: [], label: 'production' }, editor);
    await kit.waitForRun(started.id);
    const run = await runWithRelease(started.id);
    expect(run).toMatchObject({ status: 'COMPLETED', finalContent: 'From the release.', releaseLabel: 'production', release: { id: release.id, label: 'production' } });
    expect(run.snippetVersions).toEqual([{ uid: snippet.uid, identifier: snippet.identifier, version: 1 }]);
    const messages = sentMessages(run.steps);
    expect(messages[0]).toMatchObject({ role: 'system', content: release.effectiveSystemPrompt });
    const userMessage = messages.find((message) => message.role === 'user')!.content!;
    expect(userMessage).toContain('Use short sentences.');
    expect(userMessage).not.toContain('Use long sentences.');
    const sent = setup.provider.requests[0]!.body;
    expect(sent).toMatchObject({ temperature: 0.3, max_tokens: 200, model: 'scripted-gpt' });
    expect((sent.messages as { content: string }[])[0]!.content).toBe(release.effectiveSystemPrompt);

    // A run without a label composes what is there now and names the versions it composed.
    const current = await kit.startRun({ configuration: setup.configuration, prompt: 'Hello?', tools: [] }, editor);
    await kit.waitForRun(current.id);
    const plain = await runWithRelease(current.id);
    expect(plain).toMatchObject({ status: 'COMPLETED', releaseLabel: null, release: null });
    expect(sentMessages(plain.steps)[0]!.content).toContain('Written by TYPO3.');
    expect(sentMessages(plain.steps)[0]!.content).toContain('You are changed.');
    expect(plain.snippetVersions).toEqual([{ uid: snippet.uid, identifier: snippet.identifier, version: 3 }]);
    // The table edit has its version (stored by the run's start or by the change detector, once).
    expect((await snippetVersionsOf(snippet.uid)).map((v) => [v.version, v.snippet, v.source])).toEqual([
      [3, 'Written by TYPO3.', 'external'],
      [2, 'Be casual.', 'api'],
      [1, 'Be formal.', 'api'],
    ]);
    expect(setup.provider.requests[1]!.body).toMatchObject({ temperature: 1.5, max_tokens: 999 });
  });

  it('publishing right after TYPO3 wrote a snippet in the table freezes that text, with its version stored as external', async () => {
    const tag = uniqueIdentifier('tone');
    const snippet = await createSnippet(tag, 'Through the API.');
    const setup = await kit.setup({ systemPrompt: 'Base.', snippetTags: [tag] });
    await t.database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', ['Through SQL.', Math.floor(Date.now() / 1000) + 1, snippet.uid]);
    const release = await publish(setup.configuration, 'production');
    expect(release.effectiveSystemPrompt).toContain('Through SQL.');
    expect(release.snippets).toEqual([expect.objectContaining({ identifier: snippet.identifier, version: 2 })]);
    expect((await snippetVersionsOf(snippet.uid)).map((v) => [v.version, v.snippet, v.source])).toEqual([
      [2, 'Through SQL.', 'external'],
      [1, 'Through the API.', 'api'],
    ]);
  });

  it('moving a label makes a new release, older ones stay readable, and a run keeps the release it started with', async () => {
    const tag = uniqueIdentifier('tone');
    const snippet = await createSnippet(tag, 'First words.');
    const setup = await kit.setup({ systemPrompt: 'Base.', snippetTags: [tag] });
    const first = await publish(setup.configuration, 'Production');
    expect(first.label).toBe('production');
    // Publishing what the label already holds answers that release.
    expect((await publish(setup.configuration, 'production')).id).toBe(first.id);

    const before = await kit.startRun({ configuration: setup.configuration, prompt: 'x', label: 'production', dryRun: true });
    await t.ok('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { snippet: "Second words." }) { uid } }', { uid: snippet.uid });
    const second = await publish(setup.configuration, 'production');
    expect(second.id).not.toBe(first.id);
    expect(second.snippets).toEqual([expect.objectContaining({ identifier: snippet.identifier, version: 2 })]);
    expect(second.effectiveSystemPrompt).toContain('Second words.');
    const staging = await publish(setup.configuration, 'staging');

    const current = await t.ok<{ configurationRelease: ReleaseView | null }>(
      `query($identifier: String!) { configurationRelease(identifier: $identifier, label: "PRODUCTION") { ${RELEASE_FIELDS} } }`,
      { identifier: setup.configuration },
      viewer,
    );
    expect(current.configurationRelease).toEqual(second);
    const all = await releasesOf(setup.configuration);
    expect(all.map((r) => [r.id, r.label])).toEqual([
      [staging.id, 'staging'],
      [second.id, 'production'],
      [first.id, 'production'],
    ]);
    expect(all[2]).toEqual(first);
    expect(all[2]!.effectiveSystemPrompt).toContain('First words.');

    const after = await kit.startRun({ configuration: setup.configuration, prompt: 'x', label: 'production', dryRun: true });
    const [oldRun, newRun] = [await runWithRelease((await kit.waitForRun(before.id)).id), await runWithRelease((await kit.waitForRun(after.id)).id)];
    expect(oldRun.release?.id).toBe(first.id);
    expect(sentMessages(oldRun.steps)[0]!.content).toBe(first.effectiveSystemPrompt);
    expect(newRun.release?.id).toBe(second.id);
    expect(sentMessages(newRun.steps)[0]!.content).toBe(second.effectiveSystemPrompt);
  });

  it('refuses bad labels, unknown configurations and labels, and VIEWER publishers, storing nothing', async () => {
    const setup = await kit.setup({ systemPrompt: 'Base.' });
    const runCount = async () => (await t.ok<{ runs: unknown[] }>('{ runs(limit: 100) { id } }')).runs.length;
    const runsBefore = await runCount();
    const mutation = 'mutation($identifier: String!, $label: String!) { publishConfiguration(identifier: $identifier, label: $label) { id } }';
    const errorOf = async (query: string, variables: Record<string, unknown>, token: string = editor) => (await t.gql(query, variables, token)).errors?.[0];

    for (const label of ['', 'two words', 'a/b', 'x'.repeat(65), 'prödüction']) {
      const error = await errorOf(mutation, { identifier: setup.configuration, label });
      expect(error?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'label' });
      expect(error?.message).toMatch(/label/);
    }
    expect((await errorOf(mutation, { identifier: 'no_such_configuration', label: 'production' }))?.extensions?.code).toBe('NOT_FOUND');
    expect((await errorOf(mutation, { identifier: setup.configuration, label: 'production' }, viewer))?.extensions?.code).toBe('FORBIDDEN');
    expect(await releasesOf(setup.configuration)).toEqual([]);

    const start = 'mutation($input: StartRunInput!) { startRun(input: $input) { id } }';
    const unknownLabel = await errorOf(start, { input: { configuration: setup.configuration, prompt: 'x', label: 'production' } });
    expect(unknownLabel?.extensions).toMatchObject({ code: 'NOT_FOUND', field: 'label' });
    expect((await errorOf(start, { input: { configuration: setup.configuration, prompt: 'x', label: 'not a label' } }))?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'label' });
    expect((await errorOf(start, { input: { configuration: 'no_such_configuration', prompt: 'x', label: 'production' } }))?.extensions?.code).toBe('NOT_FOUND');
    await publish(setup.configuration, 'production');
    expect((await errorOf(start, { input: { configuration: setup.configuration, prompt: 'x', label: 'production', systemPrompt: 'Other.' } }))?.extensions).toMatchObject({
      code: 'BAD_USER_INPUT',
      field: 'systemPrompt',
    });
    expect(await runCount()).toBe(runsBefore);

    const query = 'query($identifier: String!, $label: String!) { configurationRelease(identifier: $identifier, label: $label) { id } }';
    expect((await t.ok<{ configurationRelease: null }>(query, { identifier: setup.configuration, label: 'staging' }, viewer)).configurationRelease).toBeNull();
    expect((await t.ok<{ configurationRelease: null }>(query, { identifier: 'no_such_configuration', label: 'production' }, viewer)).configurationRelease).toBeNull();
    expect((await errorOf(query, { identifier: setup.configuration, label: 'not a label' }, viewer))?.extensions?.code).toBe('BAD_USER_INPUT');
  });
});
