/**
 * The prompt library the service keeps in memory (composition, usedBy,
 * previewSnippetChange) is updated row by row after it was loaded. After
 * every kind of write — through the API, or in the tables as TYPO3 writes
 * them — it must answer exactly what the database says: the same selection
 * and prompt as the run path (which reads the database on each request), and
 * previews whose "after" is what the edit then really gives.
 */
import { testDialects } from '../support/databases';
import { createConfiguration, createSnippet, unique } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';

interface ConfigurationView {
  uid: number;
  identifier: string;
  systemPrompt: string;
  effectiveSystemPrompt: string;
  selectedSnippets: { identifier: string }[];
  composition: { parts: { snippet: { identifier: string }; text: string }[] };
}

interface PromptChange {
  configuration: { identifier: string };
  before: string;
  after: string;
}

describe.each(testDialects)('the prompt library after writes of every kind, on %s', (dialect) => {
  let t: TestServer;
  const tags = { persona: unique('persona'), tone: unique('tone'), style: unique('style') };
  const snippets: Record<string, { uid: number; identifier: string }> = {};

  beforeAll(async () => {
    // The detector polls rarely here: SQL writes must be seen without its events too.
    t = await startTestServer(dialect, { env: { PROMPT_CHANGE_POLL_MS: '8000' } });
    const make = async (key: string, fields: Record<string, unknown>) => (snippets[key] = await createSnippet(t, { name: key, snippet: `Text of ${key}.`, ...fields }));
    await make('alpha', { tags: [tags.persona, tags.tone], sorting: 1 });
    await make('Beta', { tags: [tags.tone], sorting: 1 });
    await make('gamma', { tags: [tags.tone, tags.style], sorting: 2 });
    await make('delta', { tags: [tags.style], sorting: 0 });
    await make('hidden', { tags: [tags.tone], hidden: true });
    await make('inactive', { tags: [tags.persona], isActive: false });
    await createConfiguration(t, { systemPrompt: 'One.', snippetTags: [tags.persona, tags.tone] });
    await createConfiguration(t, { systemPrompt: 'Two.', snippetTags: [tags.tone] });
    await createConfiguration(t, { systemPrompt: 'Three.', snippetTags: [tags.style, tags.persona] });
    await createConfiguration(t, { systemPrompt: '', snippetTags: [tags.style] });
    // Loads the library: from here on it is only updated.
    await check();
  });
  afterAll(async () => t?.stop());

  const configurations = async () =>
    (
      await t.ok<{ configurations: ConfigurationView[] }>(
        '{ configurations(limit: 20) { uid identifier systemPrompt effectiveSystemPrompt selectedSnippets { identifier } composition { parts { snippet { identifier } text } } } }',
      )
    ).configurations;

  /** The library's answers agree with the database's: composition and usedBy against the selection the run path reads. */
  async function check(): Promise<ConfigurationView[]> {
    const list = await configurations();
    for (const configuration of list) {
      const selected = configuration.selectedSnippets.map((s) => s.identifier);
      expect({ configuration: configuration.identifier, parts: configuration.composition.parts.map((p) => p.snippet.identifier) }).toEqual({ configuration: configuration.identifier, parts: selected });
      // The parts' texts make the snippet block of the prompt the run path composes (behaviour.md §4.2, §4.3).
      const block = configuration.composition.parts
        .map((p) => p.text)
        .filter((text) => text !== '')
        .join('\n\n');
      const prompt = block === '' ? configuration.systemPrompt : configuration.systemPrompt === '' ? block : `${configuration.systemPrompt}\n\n${block}`;
      expect(configuration.effectiveSystemPrompt).toBe(prompt);
    }
    const { snippets: rows } = await t.ok<{ snippets: { identifier: string; usedBy: { identifier: string }[] }[] }>('{ snippets(limit: 20) { identifier usedBy { identifier } } }');
    for (const row of rows) {
      const expected = list.filter((c) => c.selectedSnippets.some((s) => s.identifier === row.identifier)).map((c) => c.identifier);
      expect({ snippet: row.identifier, usedBy: row.usedBy.map((c) => c.identifier).sort() }).toEqual({ snippet: row.identifier, usedBy: expected.sort() });
    }
    return list;
  }

  /** Previews the edit, makes it through the API, and compares: every prompt that changed was previewed with its exact text, and no other. */
  async function previewThenUpdate(key: string, input: Record<string, unknown>): Promise<void> {
    const uid = snippets[key]!.uid;
    const before = await check();
    const preview = (
      await t.ok<{ previewSnippetChange: PromptChange[] }>('mutation($uid: Int!, $input: UpdateSnippetInput!) { previewSnippetChange(uid: $uid, input: $input) { configuration { identifier } before after } }', {
        uid,
        input,
      })
    ).previewSnippetChange;
    await t.ok('mutation($uid: Int!, $input: UpdateSnippetInput!) { updateSnippet(uid: $uid, input: $input) { uid } }', { uid, input });
    const after = await check();
    const changed = after
      .filter((c) => c.effectiveSystemPrompt !== before.find((b) => b.uid === c.uid)!.effectiveSystemPrompt)
      .map((c) => ({ configuration: { identifier: c.identifier }, before: before.find((b) => b.uid === c.uid)!.effectiveSystemPrompt, after: c.effectiveSystemPrompt }));
    expect(preview).toEqual(changed);
  }

  const stampNext = () => Math.floor(Date.now() / 1000) + 1;

  it('composes every prompt ahead after loading, and answers then as composed on demand', async () => {
    // beforeAll loaded the library; its prompts are composed ahead in the background.
    await t.server.services.library.prepared();
    await check();
    await previewThenUpdate('gamma', { snippet: 'Gamma, after the prompts were prepared.' });
  });

  it('follows API edits: text, tags, order, name, hiding, deactivating, and previews each exactly', async () => {
    await previewThenUpdate('alpha', { snippet: 'Alpha, rewritten.' });
    await previewThenUpdate('gamma', { tags: [tags.persona] });
    await previewThenUpdate('delta', { tags: [tags.style, tags.tone], sorting: 0 });
    await previewThenUpdate('Beta', { sorting: 5 });
    await previewThenUpdate('alpha', { name: 'zeta' });
    await previewThenUpdate('hidden', { hidden: false });
    await previewThenUpdate('alpha', { isActive: false });
    await previewThenUpdate('alpha', { isActive: true, hidden: true });
    await previewThenUpdate('inactive', { isActive: true, snippet: 'Now active.' });
  });

  it('follows API deletes and configuration edits', async () => {
    await t.ok('mutation($uid: Int!) { deleteSnippet(uid: $uid) }', { uid: snippets.gamma!.uid });
    await check();
    const [first] = await configurations();
    await t.ok('mutation($uid: Int!, $tags: [String!]) { updateConfiguration(uid: $uid, input: { snippetTags: $tags }) { uid } }', { uid: first!.uid, tags: [tags.style, tags.tone] });
    await check();
    const created = await createSnippet(t, { name: 'epsilon', snippet: 'Created after the load.', tags: [tags.style], sorting: 0 });
    snippets.epsilon = created;
    await check();
    await previewThenUpdate('epsilon', { snippet: 'Edited after creation.' });
  });

  it('follows rows TYPO3 writes in the tables: text, tags, order, soft and hard deletes, inserts, configurations', async () => {
    const sql = (statement: string, params: unknown[]) => t.database.query(statement, params);
    await sql('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', ['Written by TYPO3.', stampNext(), snippets.delta!.uid]);
    await check();
    await previewThenUpdate('delta', { snippet: 'And then through the API.' });
    await sql('UPDATE tx_nrllm_promptsnippet SET tags = ?, tstamp = ? WHERE uid = ?', [`${tags.persona},${tags.tone}`, stampNext() + 1, snippets.epsilon!.uid]);
    await check();
    await sql('UPDATE tx_nrllm_promptsnippet SET sorting = ?, name = ?, tstamp = ? WHERE uid = ?', [0, 'aaa first', stampNext() + 2, snippets.Beta!.uid]);
    await check();
    await previewThenUpdate('Beta', { snippet: 'Beta, moved by TYPO3.' });
    await sql('UPDATE tx_nrllm_promptsnippet SET deleted = 1, tstamp = ? WHERE uid = ?', [stampNext() + 3, snippets.epsilon!.uid]);
    await check();
    const stamp = stampNext() + 4;
    await sql(
      'INSERT INTO tx_nrllm_promptsnippet (pid, tstamp, crdate, deleted, hidden, identifier, name, tags, snippet, is_active, sorting) VALUES (0, ?, ?, 0, 0, ?, ?, ?, ?, 1, 1)',
      [stamp, stamp, unique('typo3'), 'Inserted by TYPO3', `${tags.tone},${tags.style}`, 'Inserted.'],
    );
    await check();
    await sql('DELETE FROM tx_nrllm_promptsnippet WHERE uid = ?', [snippets.inactive!.uid]);
    await check();
    const [, second] = await configurations();
    await sql('UPDATE tx_nrllm_configuration SET snippet_tags = ?, sorting = ?, tstamp = ? WHERE uid = ?', [`${tags.persona},${tags.style}`, 9, stampNext() + 5, second!.uid]);
    await check();
    await sql('UPDATE tx_nrllm_configuration SET deleted = 1, tstamp = ? WHERE uid = ?', [stampNext() + 6, second!.uid]);
    await check();
    await previewThenUpdate('delta', { tags: [tags.persona] });
  });
});
