import { testDialects } from '../support/databases';
import { createSnippet, unique } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';

const SNIPPET_FIELDS = 'uid identifier name tags snippet metadata isActive hidden sorting createdAt updatedAt';

describe.each(testDialects)('snippets through the server on %s', (dialect) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer(dialect);
  });
  afterAll(async () => t?.stop());

  const byTag = async (tag: string) =>
    (await t.ok<{ snippets: { identifier: string }[] }>('query($tag: String) { snippets(tag: $tag, limit: 500) { identifier } }', { tag })).snippets.map(
      (s) => s.identifier,
    );

  it('stores the identifier lower-case and the tags normalised', async () => {
    const id = unique('Nova_Persona').toUpperCase();
    const data = await t.ok<{ createSnippet: { identifier: string; tags: string[] } }>(
      `mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { ${SNIPPET_FIELDS} } }`,
      { input: { identifier: id, name: 'Nova', snippet: 'You are Nova.', tags: [' Persona ', 'STYLE', 'Ärger'] } },
    );
    expect(data.createSnippet.identifier).toBe(id.toLowerCase());
    expect(data.createSnippet.tags).toEqual(['persona', 'style', 'Ärger']);
  });

  it('matches tags as whole tokens, never as substrings, and normalises the query tag', async () => {
    const tag = unique('style');
    const exact = await createSnippet(t, { tags: [tag] });
    const longer = await createSnippet(t, { tags: [`life${tag}`] });
    expect(await byTag(tag)).toEqual([exact.identifier]);
    expect(await byTag(`  ${tag.toUpperCase()} `)).toEqual([exact.identifier]);
    expect(await byTag(`life${tag}`)).toEqual([longer.identifier]);
    expect(await byTag('life')).toEqual([]);
  });

  it('an unknown tag yields no snippets and no error', async () => {
    const result = await t.gql<{ snippets: unknown[] }>('{ snippets(tag: "no-such-tag-anywhere") { uid } }');
    expect(result.errors).toBeUndefined();
    expect(result.data?.snippets).toEqual([]);
  });

  it('an inactive snippet is out of tag lookups but listed; a hidden one is in both', async () => {
    const tag = unique('switch');
    const inactive = await createSnippet(t, { tags: [tag], isActive: false, name: 'B' });
    const hidden = await createSnippet(t, { tags: [tag], hidden: true, name: 'A' });
    expect(await byTag(tag)).toEqual([hidden.identifier]);
    const all = (await t.ok<{ snippets: { identifier: string }[] }>('query($s: String) { snippets(search: $s, limit: 500) { identifier } }', { s: tag })).snippets.map(
      (s) => s.identifier,
    );
    expect(all).toEqual(expect.arrayContaining([inactive.identifier, hidden.identifier]));
  });

  it('orders a tag lookup by sorting, then name, each snippet once', async () => {
    const tag = unique('order');
    const c = await createSnippet(t, { tags: [tag, tag], sorting: 2, name: 'C' });
    const b = await createSnippet(t, { tags: [tag], sorting: 1, name: 'B' });
    const a = await createSnippet(t, { tags: [tag], sorting: 1, name: 'A' });
    expect(await byTag(tag)).toEqual([a.identifier, b.identifier, c.identifier]);
  });

  it('lists the tag vocabulary of non-deleted snippets, hidden and inactive included, in byte order', async () => {
    const base = unique('vocab');
    await createSnippet(t, { tags: [`${base}_b`], hidden: true });
    await createSnippet(t, { tags: [`${base}_a`], isActive: false });
    const deleted = await createSnippet(t, { tags: [`${base}_gone`] });
    await t.ok('mutation($uid: Int!) { deleteSnippet(uid: $uid) }', { uid: deleted.uid });
    const tags = (await t.ok<{ snippetTags: string[] }>('{ snippetTags }')).snippetTags;
    expect(tags.filter((tag) => tag.startsWith(base))).toEqual([`${base}_a`, `${base}_b`]);
    expect([...tags].sort((x, y) => Buffer.compare(Buffer.from(x), Buffer.from(y)))).toEqual(tags);
  });

  it('metadata sent as JSON text is stored as given and read back with its exact integers and key order', async () => {
    const snippet = await createSnippet(t, { metadata: '{"seed": 9007199254740993, "b": 2, "1": "a"}' });
    const body = await t.gqlText('query($uid: Int) { snippet(uid: $uid) { metadata } }', { uid: snippet.uid });
    expect(body).toBe('{"data":{"snippet":{"metadata":{"seed":9007199254740993,"b":2,"1":"a"}}}}\n');
  });

  it('reads metadata written by other programs as an object, never failing', async () => {
    const odd = ['', '   ', '{"truncated": ', 'not json', '"a string"', '42', 'null', '[1,2]', '{}', null];
    const uids: number[] = [];
    for (const value of odd) {
      const snippet = await createSnippet(t);
      await t.database.query('UPDATE tx_nrllm_promptsnippet SET metadata = ? WHERE uid = ?', [value, snippet.uid]);
      uids.push(snippet.uid);
    }
    const good = await createSnippet(t, { metadata: { voice: 'nova' } });
    for (const uid of uids) {
      const data = await t.ok<{ snippet: { metadata: unknown } }>('query($uid: Int) { snippet(uid: $uid) { metadata } }', { uid });
      expect(data.snippet.metadata).toEqual({});
    }
    const data = await t.ok<{ snippet: { metadata: unknown } }>('query($uid: Int) { snippet(uid: $uid) { metadata } }', { uid: good.uid });
    expect(data.snippet.metadata).toEqual({ voice: 'nova' });
  });

  it('searches identifier, name, description, tags and text case-insensitively', async () => {
    const word = unique('Needle');
    const inText = await createSnippet(t, { snippet: `text with ${word} inside` });
    const inDescription = await createSnippet(t, { description: `about ${word.toUpperCase()}` });
    const found = (await t.ok<{ snippets: { identifier: string }[] }>('query($s: String) { snippets(search: $s) { identifier } }', { s: word.toLowerCase() })).snippets;
    expect(found.map((s) => s.identifier).sort()).toEqual([inText.identifier, inDescription.identifier].sort());
  });

  it('deletes softly: the row stays, is invisible, and its identifier can be reused', async () => {
    const snippet = await createSnippet(t);
    expect(await t.ok('mutation($uid: Int!) { deleteSnippet(uid: $uid) }', { uid: snippet.uid })).toEqual({ deleteSnippet: true });
    const rows = (await t.database.query('SELECT deleted FROM tx_nrllm_promptsnippet WHERE uid = ?', [snippet.uid])) as { deleted: number }[];
    expect(Number(rows[0]?.deleted)).toBe(1);
    expect((await t.ok<{ snippet: unknown }>('query($uid: Int) { snippet(uid: $uid) { uid } }', { uid: snippet.uid })).snippet).toBeNull();
    const again = await t.gql('mutation($uid: Int!) { deleteSnippet(uid: $uid) }', { uid: snippet.uid });
    expect(again.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const reused = await createSnippet(t, { identifier: snippet.identifier });
    expect(reused.uid).not.toBe(snippet.uid);
  });

  it('maintains crdate and tstamp', async () => {
    const before = Math.floor(Date.now() / 1000);
    const snippet = await createSnippet(t);
    await t.database.query('UPDATE tx_nrllm_promptsnippet SET tstamp = 1000, crdate = 1000 WHERE uid = ?', [snippet.uid]);
    const data = await t.ok<{ updateSnippet: { createdAt: string; updatedAt: string } }>(
      'mutation($uid: Int!) { updateSnippet(uid: $uid, input: { name: "Renamed" }) { createdAt updatedAt } }',
      { uid: snippet.uid },
    );
    expect(new Date(data.updateSnippet.createdAt).getTime()).toBe(1_000_000);
    expect(new Date(data.updateSnippet.updatedAt).getTime() / 1000).toBeGreaterThanOrEqual(before);
  });

  describe('refuses bad input with a code and leaves stored data unchanged', () => {
    const create = (input: Record<string, unknown>) =>
      t.gql('mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }', { input: { identifier: unique('bad'), name: 'N', snippet: 'S', ...input } });

    it.each([
      ['an identifier with a space', { identifier: 'has space' }, 'BAD_USER_INPUT', 'identifier'],
      ['an identifier with a dot', { identifier: 'a.b' }, 'BAD_USER_INPUT', 'identifier'],
      ['an identifier over 100 characters', { identifier: 'a'.repeat(101) }, 'BAD_USER_INPUT', 'identifier'],
      ['an empty name', { name: '  ' }, 'BAD_USER_INPUT', 'name'],
      ['a name over 255 characters', { name: 'n'.repeat(256) }, 'BAD_USER_INPUT', 'name'],
      ['an empty snippet text', { snippet: ' ' }, 'BAD_USER_INPUT', 'snippet'],
      ['a tag with a comma', { tags: ['a,b'] }, 'BAD_USER_INPUT', 'tags'],
      ['tags over 255 characters joined', { tags: ['t'.repeat(200), 'u'.repeat(60)] }, 'BAD_USER_INPUT', 'tags'],
      ['metadata that is an array', { metadata: [1, 2] }, 'BAD_USER_INPUT', 'metadata'],
      ['metadata that is a string', { metadata: 'voice' }, 'BAD_USER_INPUT', 'metadata'],
      ['a negative sorting', { sorting: -1 }, 'BAD_USER_INPUT', 'sorting'],
    ])('%s', async (_label, input, code, field) => {
      const count = async () => Number(((await t.database.query('SELECT COUNT(*) AS n FROM tx_nrllm_promptsnippet')) as { n: number }[])[0]?.n);
      const before = await count();
      const result = await create(input);
      expect(result.errors?.[0]?.extensions).toMatchObject({ code, field });
      expect(result.errors?.[0]?.message).toMatch(/\w/);
      expect(await count()).toBe(before);
    });

    it('a duplicate identifier among live rows is a CONFLICT', async () => {
      const existing = await createSnippet(t);
      const result = await create({ identifier: existing.identifier.toUpperCase() });
      expect(result.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', field: 'identifier' });
    });

    it('a refused update changes nothing, not even the valid fields', async () => {
      const snippet = await createSnippet(t, { name: 'Original', tags: ['keep'] });
      const result = await t.gql('mutation($uid: Int!) { updateSnippet(uid: $uid, input: { name: "Changed", tags: ["bad,tag"] }) { uid } }', { uid: snippet.uid });
      expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
      const data = await t.ok<{ snippet: { name: string; tags: string[] } }>('query($uid: Int) { snippet(uid: $uid) { name tags } }', { uid: snippet.uid });
      expect(data.snippet).toEqual({ name: 'Original', tags: ['keep'] });
    });

    it.each([
      ['identifier', 'identifier: null'],
      ['name', 'name: null'],
      ['snippet', 'snippet: null'],
    ])('an explicit null %s in an update is refused and changes nothing', async (field, assignment) => {
      const snippet = await createSnippet(t, { name: 'Kept' });
      const result = await t.gql(`mutation($uid: Int!) { updateSnippet(uid: $uid, input: { ${assignment} }) { uid } }`, { uid: snippet.uid });
      expect(result.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field });
      const data = await t.ok<{ snippet: { identifier: string; name: string } }>('query($uid: Int) { snippet(uid: $uid) { identifier name } }', { uid: snippet.uid });
      expect(data.snippet).toEqual({ identifier: snippet.identifier, name: 'Kept' });
    });

    it('updating an unknown uid is NOT_FOUND', async () => {
      const result = await t.gql('mutation { updateSnippet(uid: 999999, input: { name: "x" }) { uid } }');
      expect(result.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    });

    it('a page larger than 500 is refused', async () => {
      const result = await t.gql('{ snippets(limit: 501) { uid } }');
      expect(result.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'limit' });
    });
  });
});
