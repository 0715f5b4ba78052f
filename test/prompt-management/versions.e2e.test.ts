import { testDialects } from '../support/databases';
import { createConfiguration, createSnippet, unique } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';

interface Version {
  version: number;
  snippet: string;
  tags: string[];
  author: string | null;
  source: string;
}

const VERSION_FIELDS = 'version snippet tags author source name isActive hidden metadata createdAt';

/** Polls until `check` returns a value (the external change detector runs every 200 ms here). */
async function eventually<T>(check: () => Promise<T | null | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met within the time limit');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.each(testDialects)('prompt versions through the server on %s', (dialect) => {
  let t: TestServer;
  let editor: string;
  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { PROMPT_CHANGE_POLL_MS: '200' } });
    editor = await t.tokenFor('EDITOR');
  });
  afterAll(async () => t?.stop());

  const snippetVersions = async (uid: number) =>
    (await t.ok<{ snippet: { versions: Version[] } }>(`query($uid: Int) { snippet(uid: $uid) { versions { ${VERSION_FIELDS} } } }`, { uid })).snippet.versions;

  it('every API write stores a version with the token name as author, newest first', async () => {
    const created = await t.ok<{ createSnippet: { uid: number } }>(
      'mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }',
      { input: { identifier: unique('v'), name: 'Tone', snippet: 'Be formal.', tags: ['tone'] } },
      editor,
    );
    const uid = created.createSnippet.uid;
    await t.ok('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { snippet: "Be casual." }) { uid } }', { uid }, editor);
    await t.ok('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { tags: ["tone", "style"] }) { uid } }', { uid });
    const versions = await snippetVersions(uid);
    expect(versions.map((v) => [v.version, v.snippet, v.tags, v.author, v.source])).toEqual([
      [3, 'Be casual.', ['tone', 'style'], expect.any(String), 'api'],
      [2, 'Be casual.', ['tone'], 'editor test token', 'api'],
      [1, 'Be formal.', ['tone'], 'editor test token', 'api'],
    ]);
  });

  it('diffs two versions field by field and as unified text', async () => {
    const { uid } = await createSnippet(t, { snippet: 'Line one.\nLine two.', name: 'Before' });
    await t.ok('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { snippet: "Line one.\\nLine 2.", name: "After" }) { uid } }', { uid });
    const diff = (
      await t.ok<{ snippetVersionDiff: { fields: { field: string; before: unknown; after: unknown }[]; textDiff: string } }>(
        'query($uid: Int!) { snippetVersionDiff(uid: $uid, from: 1, to: 2) { from to fields { field before after } textDiff } }',
        { uid },
      )
    ).snippetVersionDiff;
    expect(diff.fields).toEqual([
      { field: 'name', before: 'Before', after: 'After' },
      { field: 'snippet', before: 'Line one.\nLine two.', after: 'Line one.\nLine 2.' },
    ]);
    expect(diff.textDiff).toContain('-Line two.\n+Line 2.');
    const missing = await t.gql('query($uid: Int!) { snippetVersionDiff(uid: $uid, from: 1, to: 9) { textDiff } }', { uid });
    expect(missing.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
  });

  it('restoreSnippet writes an old version back as a new version; refused restores change nothing', async () => {
    const { uid } = await createSnippet(t, { snippet: 'First text.', tags: ['a'], hidden: false });
    await t.ok('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { snippet: "Second text.", tags: ["b"], hidden: true }) { uid } }', { uid });
    const viewer = await t.tokenFor('VIEWER');
    const forbidden = await t.gql('mutation($uid: Int!) { restoreSnippet(uid: $uid, version: 1) { uid } }', { uid }, viewer);
    expect(forbidden.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const unknown = await t.gql('mutation($uid: Int!) { restoreSnippet(uid: $uid, version: 7) { uid } }', { uid });
    expect(unknown.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect((await snippetVersions(uid)).length).toBe(2);

    const restored = await t.ok<{ restoreSnippet: { snippet: string; tags: string[]; hidden: boolean } }>(
      'mutation($uid: Int!) { restoreSnippet(uid: $uid, version: 1) { snippet tags hidden } }',
      { uid },
      editor,
    );
    expect(restored.restoreSnippet).toEqual({ snippet: 'First text.', tags: ['a'], hidden: false });
    const versions = await snippetVersions(uid);
    expect(versions.map((v) => [v.version, v.snippet, v.source, v.author])).toEqual([
      [3, 'First text.', 'api', 'editor test token'],
      [2, 'Second text.', 'api', expect.any(String)],
      [1, 'First text.', 'api', expect.any(String)],
    ]);
  });

  it('a change written directly in the table is stored as an external version within seconds', async () => {
    const { uid } = await createSnippet(t, { snippet: 'Written by the API.' });
    const later = Math.floor(Date.now() / 1000) + 1;
    await t.database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', ['Written by TYPO3.', later, uid]);
    const versions = await eventually(async () => {
      const list = await snippetVersions(uid);
      return list.length === 2 ? list : null;
    });
    expect(versions[0]).toMatchObject({ version: 2, snippet: 'Written by TYPO3.', source: 'external', author: null });
    // Seen once: later polls store nothing more.
    await new Promise((resolve) => setTimeout(resolve, 600));
    expect((await snippetVersions(uid)).length).toBe(2);
  });

  it('a row TYPO3 inserts directly gets version 1 with source external; a soft delete is a version too', async () => {
    const identifier = unique('typo3');
    // The detector reads rows from the newest tstamp it has seen; the test before wrote one a second
    // ahead of the clock, so this row is stamped after it (as TYPO3's clock would by then).
    const now = Math.floor(Date.now() / 1000) + 2;
    await t.database.query(
      'INSERT INTO tx_nrllm_promptsnippet (pid, tstamp, crdate, deleted, hidden, identifier, name, tags, snippet, is_active, sorting) VALUES (0, ?, ?, 0, 0, ?, ?, ?, ?, 1, 0)',
      [now, now, identifier, 'From TYPO3', 'persona', 'Inserted by TYPO3.'],
    );
    const uid = await eventually(async () => {
      const data = await t.ok<{ snippet: { uid: number; versions: Version[] } | null }>('query($id: String) { snippet(identifier: $id) { uid versions { version source } } }', { id: identifier });
      return data.snippet && data.snippet.versions.length === 1 ? data.snippet.uid : null;
    });
    expect((await snippetVersions(uid))[0]).toMatchObject({ version: 1, source: 'external', snippet: 'Inserted by TYPO3.' });
    await t.database.query('UPDATE tx_nrllm_promptsnippet SET deleted = 1, tstamp = ? WHERE uid = ?', [now + 1, uid]);
    const deleted = await eventually(async () => {
      const versions = await t.ok<{ snippetVersionDiff: { fields: { field: string }[] } }>('query($uid: Int!) { snippetVersionDiff(uid: $uid, from: 1, to: 2) { fields { field } } }', { uid }).catch(() => null);
      return versions;
    });
    expect(deleted.snippetVersionDiff.fields.map((f) => f.field)).toEqual(['deleted']);
  });

  it('configurations keep versions of their prompt, tags, model and options, and restore them', async () => {
    const configuration = await createConfiguration(t, { systemPrompt: 'You help.', snippetTags: ['persona'], temperature: 0.2 });
    await t.ok('mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { systemPrompt: "You help a lot.", snippetTags: ["tone"], temperature: 0.9 }) { uid } }', {
      uid: configuration.uid,
    }, editor);
    const read = async () =>
      (
        await t.ok<{ configuration: { systemPrompt: string; snippetTags: string[]; temperature: number; versions: { version: number; systemPrompt: string; snippetTags: string[]; temperature: number; author: string | null; source: string }[] } }>(
          'query($uid: Int) { configuration(uid: $uid) { systemPrompt snippetTags temperature versions { version systemPrompt snippetTags temperature maxTokens topP model createdAt author source } } }',
          { uid: configuration.uid },
        )
      ).configuration;
    const before = await read();
    expect(before.versions.map((v) => [v.version, v.systemPrompt, v.snippetTags, v.temperature, v.source])).toEqual([
      [2, 'You help a lot.', ['tone'], 0.9, 'api'],
      [1, 'You help.', ['persona'], 0.2, 'api'],
    ]);
    expect(before.versions[0]?.author).toBe('editor test token');
    const diff = await t.ok<{ configurationVersionDiff: { fields: { field: string }[]; textDiff: string } }>(
      'query($uid: Int!) { configurationVersionDiff(uid: $uid, from: 1, to: 2) { fields { field } textDiff } }',
      { uid: configuration.uid },
    );
    expect(diff.configurationVersionDiff.fields.map((f) => f.field)).toEqual(['snippetTags', 'systemPrompt', 'temperature']);
    expect(diff.configurationVersionDiff.textDiff).toContain('-You help.\n+You help a lot.');

    await t.ok('mutation($uid: Int!) { restoreConfiguration(uid: $uid, version: 1) { uid } }', { uid: configuration.uid }, editor);
    const after = await read();
    expect([after.systemPrompt, after.snippetTags, after.temperature]).toEqual(['You help.', ['persona'], 0.2]);
    expect(after.versions.map((v) => v.version)).toEqual([3, 2, 1]);
  });

  it('skills keep versions of their body', async () => {
    const created = await t.ok<{ createSkill: { uid: number } }>('mutation($input: CreateSkillInput!) { createSkill(input: $input) { uid } }', {
      input: { identifier: unique('skill'), name: 'Style guide', body: 'Use short sentences.' },
    });
    const uid = created.createSkill.uid;
    await t.ok('mutation($uid: Int!) { updateSkill(uid: $uid, input: { body: "Use very short sentences." }) { uid } }', { uid });
    const skills = (await t.ok<{ skills: { uid: number; versions: { version: number; body: string; source: string }[] }[] }>('{ skills { uid versions { version body source author } } }')).skills;
    expect(skills.find((s) => s.uid === uid)?.versions.map((v) => [v.version, v.body])).toEqual([
      [2, 'Use very short sentences.'],
      [1, 'Use short sentences.'],
    ]);
  });
});
