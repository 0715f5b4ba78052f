import { createInMemorySnippetSource, type SnippetRow } from '../../../test/support/in-memory-snippet-source';
import { SEARCH_SNIPPETS_MAX_RESULTS, createGetSnippetTool, createSearchSnippetsTool, type SnippetSource } from './snippet-tools';
import { ToolInputError } from './tool-registry';

const signal = new AbortController().signal;

function row(identifier: string, overrides: Partial<SnippetRow> = {}): SnippetRow {
  return {
    identifier,
    name: identifier.toUpperCase(),
    description: null,
    tags: '',
    snippet: `Text of ${identifier}.`,
    isActive: true,
    hidden: false,
    sorting: 0,
    ...overrides,
  };
}

const rows: SnippetRow[] = [
  row('nova', { name: 'Nova persona', tags: 'Persona, Tone', snippet: 'You are Nova, a friendly expert.', sorting: 2 }),
  row('formal', { name: 'Formal tone', tags: 'tone_of_voice,style', snippet: 'Use a formal tone.', sorting: 1 }),
  row('life', { name: 'Lifestyle', tags: 'lifestyle', snippet: 'Talk about life.' }),
  row('hidden-one', { tags: 'style', hidden: true }),
  row('inactive-one', { tags: 'style', isActive: false }),
  row('deleted-one', { tags: 'style', deleted: true }),
  row('secret', { name: 'Secret', description: 'Mentions NEEDLE in the description', tags: 'misc' }),
];

async function search(args: Record<string, unknown>, source: SnippetSource = createInMemorySnippetSource(rows)): Promise<unknown> {
  return JSON.parse(await createSearchSnippetsTool(source).execute(args, { signal })) as unknown;
}

describe('search_snippets', () => {
  it('finds active, visible snippets by exact tag token, answering {identifier, name, tags}', async () => {
    await expect(search({ tag: ' STYLE ' })).resolves.toEqual([
      { identifier: 'formal', name: 'Formal tone', tags: ['tone_of_voice', 'style'] },
    ]);
  });

  it('never matches a tag by substring', async () => {
    await expect(search({ tag: 'life' })).resolves.toEqual([]);
    await expect(search({ tag: 'tone' })).resolves.toEqual([{ identifier: 'nova', name: 'Nova persona', tags: ['persona', 'tone'] }]);
  });

  it('finds snippets by text, case-insensitively, in name, description, tags and snippet text', async () => {
    await expect(search({ query: 'FRIENDLY' })).resolves.toEqual([
      { identifier: 'nova', name: 'Nova persona', tags: ['persona', 'tone'] },
    ]);
    await expect(search({ query: 'needle' })).resolves.toEqual([{ identifier: 'secret', name: 'Secret', tags: ['misc'] }]);
  });

  it('requires both when tag and text are given', async () => {
    await expect(search({ tag: 'tone', query: 'formal' })).resolves.toEqual([]);
    await expect(search({ tag: 'tone', query: 'nova' })).resolves.toHaveLength(1);
  });

  it('leaves out hidden, inactive and deleted snippets, and orders by sorting then name', async () => {
    const all = (await search({})) as { identifier: string }[];
    expect(all.map((snippet) => snippet.identifier)).toEqual(['life', 'secret', 'formal', 'nova']);
  });

  it('treats blank arguments as not given', async () => {
    await expect(search({ tag: '  ', query: '' })).resolves.toHaveLength(4);
  });

  it(`answers at most ${SEARCH_SNIPPETS_MAX_RESULTS} snippets`, async () => {
    const many = Array.from({ length: 80 }, (_, index) => row(`s${String(index).padStart(2, '0')}`, { tags: 'bulk' }));
    await expect(search({ tag: 'bulk' }, createInMemorySnippetSource(many))).resolves.toHaveLength(SEARCH_SNIPPETS_MAX_RESULTS);
  });

  it('passes the normalised filter to the source', async () => {
    const calls: unknown[] = [];
    const source: SnippetSource = {
      findActiveVisible: (filter) => {
        calls.push(filter);
        return Promise.resolve([]);
      },
      findByIdentifier: () => Promise.resolve(null),
    };
    await search({ tag: ' Persona ', query: '  nova  ' }, source);
    await search({}, source);
    expect(calls).toEqual([{ tag: 'persona', query: 'nova' }, {}]);
  });
});

describe('get_snippet', () => {
  const getSnippet = createGetSnippetTool(createInMemorySnippetSource(rows));

  it('answers {identifier, name, tags, snippet} as JSON', async () => {
    const answer = JSON.parse(await getSnippet.execute({ identifier: 'nova' }, { signal })) as unknown;
    expect(answer).toEqual({
      identifier: 'nova',
      name: 'Nova persona',
      tags: ['persona', 'tone'],
      snippet: 'You are Nova, a friendly expert.',
    });
  });

  it('looks the identifier up trimmed and lower-cased', async () => {
    await expect(getSnippet.execute({ identifier: ' NOVA ' }, { signal })).resolves.toContain('"identifier":"nova"');
  });

  it('reports an unknown, hidden or inactive snippet as an error result for the model', async () => {
    for (const identifier of ['ghost', 'hidden-one', 'inactive-one', 'deleted-one']) {
      await expect(getSnippet.execute({ identifier }, { signal })).rejects.toThrow(
        new ToolInputError(`no active snippet with identifier "${identifier}"`),
      );
    }
    await expect(getSnippet.execute({ identifier: '  ' }, { signal })).rejects.toThrow(ToolInputError);
  });
});
