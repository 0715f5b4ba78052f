import { testDialects } from '../support/databases';
import { createConfiguration, createSnippet, unique } from '../support/factories';
import { collect, startTestServer, type TestServer } from '../support/server';

async function eventually<T>(check: () => T | null | undefined | false | Promise<T | null | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met within the time limit');
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

interface ChangeEvent {
  promptChanged: { kind: string; identifier: string; version: number | null; source: string; affectedConfigurations: string[] };
}

describe.each(testDialects)('composition, usedBy, impact preview and the change feed on %s', (dialect) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { PROMPT_CHANGE_POLL_MS: '200' } });
  });
  afterAll(async () => t?.stop());

  /** A configuration selecting two fresh tags, with an active, an inactive, a hidden and a duplicate snippet. */
  async function library() {
    const persona = unique('persona');
    const tone = unique('tone');
    const nova = await createSnippet(t, { name: 'Nova persona', snippet: 'You are Nova, a friendly expert.', tags: [persona, tone], sorting: 1 });
    const formal = await createSnippet(t, { name: 'Formal tone', snippet: 'Use a formal, professional tone of voice.', tags: [tone], sorting: 2 });
    const off = await createSnippet(t, { name: 'Off', snippet: 'Inactive.', tags: [persona], isActive: false });
    const secret = await createSnippet(t, { name: 'Secret', snippet: 'Hidden.', tags: [tone], hidden: true, sorting: 3 });
    const configuration = await createConfiguration(t, { systemPrompt: 'You are a helpful assistant.', snippetTags: [persona, tone] });
    const other = await createConfiguration(t, { systemPrompt: 'Other.', snippetTags: [tone] });
    return { persona, tone, nova, formal, off, secret, configuration, other };
  }

  it('composition lists the parts with their matched tags and exact text, and the dropped snippets with why', async () => {
    const l = await library();
    const data = await t.ok<{
      configuration: { effectiveSystemPrompt: string; composition: { parts: { snippet: { identifier: string }; matchedTags: string[]; text: string }[]; dropped: { snippet: { identifier: string }; matchedTags: string[]; reason: string }[] } };
    }>(
      'query($uid: Int) { configuration(uid: $uid) { effectiveSystemPrompt composition { parts { snippet { identifier } matchedTags text } dropped { snippet { identifier } matchedTags reason } } } }',
      { uid: l.configuration.uid },
    );
    const { composition, effectiveSystemPrompt } = data.configuration;
    expect(composition.parts).toEqual([
      { snippet: { identifier: l.nova.identifier }, matchedTags: [l.persona, l.tone], text: 'Nova persona:\nYou are Nova, a friendly expert.' },
      { snippet: { identifier: l.formal.identifier }, matchedTags: [l.tone], text: 'Formal tone:\nUse a formal, professional tone of voice.' },
    ]);
    expect(effectiveSystemPrompt).toBe(['You are a helpful assistant.', ...composition.parts.map((p) => p.text)].join('\n\n'));
    expect(composition.dropped).toEqual([
      { snippet: { identifier: l.off.identifier }, matchedTags: [l.persona], reason: 'INACTIVE' },
      { snippet: { identifier: l.secret.identifier }, matchedTags: [l.tone], reason: 'HIDDEN' },
    ]);
  });

  it('usedBy names the configurations whose prompt holds the snippet now', async () => {
    const l = await library();
    const usedBy = async (uid: number) =>
      (await t.ok<{ snippet: { usedBy: { identifier: string }[] } }>('query($uid: Int) { snippet(uid: $uid) { usedBy { identifier } } }', { uid })).snippet.usedBy.map((c) => c.identifier);
    expect(await usedBy(l.formal.uid)).toEqual([l.configuration.identifier, l.other.identifier]);
    expect(await usedBy(l.nova.uid)).toEqual([l.configuration.identifier, l.other.identifier]);
    expect(await usedBy(l.secret.uid)).toEqual([]);
    await t.ok('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { hidden: true }) { uid } }', { uid: l.formal.uid });
    expect(await usedBy(l.formal.uid)).toEqual([]);
  });

  it('previewSnippetChange shows before, after and a diff for each affected configuration, and writes nothing', async () => {
    const l = await library();
    const before = await t.ok<{ snippet: { versions: unknown[]; updatedAt: string } }>('query($uid: Int) { snippet(uid: $uid) { versions { version } updatedAt } }', { uid: l.formal.uid });
    const preview = await t.ok<{ previewSnippetChange: { configuration: { identifier: string }; before: string; after: string; diff: string }[] }>(
      'mutation($uid: Int!) { previewSnippetChange(uid: $uid, input: { snippet: "Use a casual tone." }) { configuration { identifier } before after diff } }',
      { uid: l.formal.uid },
    );
    expect(preview.previewSnippetChange.map((c) => c.configuration.identifier)).toEqual([l.configuration.identifier, l.other.identifier]);
    const change = preview.previewSnippetChange[1]!;
    expect(change.before).toBe('Other.\n\nNova persona:\nYou are Nova, a friendly expert.\n\nFormal tone:\nUse a formal, professional tone of voice.');
    expect(change.after).toBe('Other.\n\nNova persona:\nYou are Nova, a friendly expert.\n\nFormal tone:\nUse a casual tone.');
    expect(change.diff).toContain('-Use a formal, professional tone of voice.\n+Use a casual tone.');

    // Un-hiding a snippet adds it; a change that alters no prompt lists nothing.
    const unhide = await t.ok<{ previewSnippetChange: { configuration: { identifier: string }; after: string }[] }>(
      'mutation($uid: Int!) { previewSnippetChange(uid: $uid, input: { hidden: false }) { configuration { identifier } after } }',
      { uid: l.secret.uid },
    );
    expect(unhide.previewSnippetChange.map((c) => c.configuration.identifier)).toEqual([l.configuration.identifier, l.other.identifier]);
    expect(unhide.previewSnippetChange[0]?.after.endsWith('Secret:\nHidden.')).toBe(true);
    const none = await t.ok<{ previewSnippetChange: unknown[] }>('mutation($uid: Int!) { previewSnippetChange(uid: $uid, input: { description: "just a note" }) { before } }', { uid: l.formal.uid });
    expect(none.previewSnippetChange).toEqual([]);

    const invalid = await t.gql('mutation($uid: Int!) { previewSnippetChange(uid: $uid, input: { tags: ["a,b"] }) { before } }', { uid: l.formal.uid });
    expect(invalid.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const after = await t.ok<{ snippet: { versions: unknown[]; updatedAt: string; snippet: string } }>('query($uid: Int) { snippet(uid: $uid) { versions { version } updatedAt snippet } }', { uid: l.formal.uid });
    expect(after.snippet.versions).toEqual(before.snippet.versions);
    expect(after.snippet.snippet).toBe('Use a formal, professional tone of voice.');
  });

  it('promptChanged streams API and external changes with the configurations they affect', async () => {
    const l = await library();
    const viewer = await t.tokenFor('VIEWER');
    const feed = collect<ChangeEvent>(t.wsClient(viewer), 'subscription { promptChanged { kind identifier version source affectedConfigurations } }', {});
    // The subscription is live once a change made now arrives.
    await eventually(async () => {
      await t.ok('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { description: "ping" }) { uid } }', { uid: l.off.uid });
      return feed.events.length > 0;
    });
    const start = feed.events.length;
    await t.ok('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { snippet: "Use a warm tone." }) { uid } }', { uid: l.formal.uid });
    const api = await eventually(() => feed.events.slice(start).find((e) => e.promptChanged.identifier === l.formal.identifier));
    expect(api.promptChanged).toEqual({ kind: 'snippet', identifier: l.formal.identifier, version: 2, source: 'api', affectedConfigurations: [l.configuration.identifier, l.other.identifier] });

    await t.database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', ['Use a cold tone.', Math.floor(Date.now() / 1000) + 1, l.formal.uid]);
    const external = await eventually(() => feed.events.find((e) => e.promptChanged.identifier === l.formal.identifier && e.promptChanged.source === 'external'));
    expect(external.promptChanged).toEqual({ kind: 'snippet', identifier: l.formal.identifier, version: 3, source: 'external', affectedConfigurations: [l.configuration.identifier, l.other.identifier] });
    expect(feed.errors).toEqual([]);

    // The effective prompt reflects the external change (the library is not served stale).
    const prompt = await t.ok<{ configuration: { composition: { parts: { text: string }[] } } }>('query($uid: Int) { configuration(uid: $uid) { composition { parts { text } } } }', { uid: l.other.uid });
    expect(prompt.configuration.composition.parts.map((p) => p.text)).toContain('Formal tone:\nUse a cold tone.');
  });

  it('promptChanged needs a token', async () => {
    const feed = collect(t.wsClient(null), 'subscription { promptChanged { kind } }', {});
    await feed.done;
    expect(feed.events).toEqual([]);
    expect(feed.errors.length).toBeGreaterThan(0);
  });
});
