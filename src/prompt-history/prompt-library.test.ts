import { ConfigurationEntity } from '../configurations/configuration.entity';
import { PromptSnippetEntity } from '../snippets/snippet.entity';
import { PromptLibrary } from './prompt-library';

function snippet(uid: number, tags: string, text: string): PromptSnippetEntity {
  return Object.assign(new PromptSnippetEntity(), { uid, pid: 0, tstamp: 1, crdate: 1, deleted: false, hidden: false, identifier: `s${uid}`, name: `S${uid}`, description: null, snippet: text, tags, metadata: null, isActive: true, sorting: uid });
}

function configuration(uid: number, snippetTags: string): ConfigurationEntity {
  return Object.assign(new ConfigurationEntity(), { uid, pid: 0, tstamp: 1, crdate: 1, deleted: false, hidden: false, identifier: `c${uid}`, name: `C${uid}`, systemPrompt: `Prompt ${uid}.`, snippetTags, isActive: true, sorting: uid });
}

const snippets = () => [snippet(1, 'a', 'One.'), snippet(2, 'a,b', 'Two.'), snippet(3, 'b', 'Three.'), snippet(4, 'c', '')];
const configurations = () => [configuration(1, 'a'), configuration(2, 'b,a'), configuration(3, 'c'), configuration(4, 'a'), configuration(5, 'd')];

describe('PromptLibrary.prepare', () => {
  it('goes through the configurations in steps and says where to go on, then that it is done', () => {
    const library = new PromptLibrary(snippets(), configurations());
    expect(library.prepare(0, 2)).toBe(2);
    expect(library.prepare(2, 2)).toBe(4);
    expect(library.prepare(4, 2)).toBeUndefined();
    expect(library.prepare(0, 10)).toBeUndefined();
  });

  it('changes no answer: prompts, blocks and usedBy are those of a library that composes on demand', () => {
    const prepared = new PromptLibrary(snippets(), configurations());
    for (let from: number | undefined = 0; from !== undefined; ) from = prepared.prepare(from, 1);
    const fresh = new PromptLibrary(snippets(), configurations());
    for (const uid of [1, 2, 3, 4, 5]) {
      expect(prepared.effectiveSystemPrompt(prepared.configuration(uid)!)).toBe(fresh.effectiveSystemPrompt(fresh.configuration(uid)!));
      expect(prepared.selectedBlocks(prepared.configuration(uid)!)).toEqual(fresh.selectedBlocks(fresh.configuration(uid)!));
    }
    expect(prepared.effectiveSystemPrompt(prepared.configuration(2)!)).toBe('Prompt 2.\n\nS2:\nTwo.\n\nS3:\nThree.\n\nS1:\nOne.');
    for (const uid of [1, 2, 3, 4]) expect(prepared.usedBy(prepared.snippet(uid)!).map((row) => row.uid)).toEqual(fresh.usedBy(fresh.snippet(uid)!).map((row) => row.uid));
  });

  it('prepared prompts follow an edit like any others', () => {
    const library = new PromptLibrary(snippets(), configurations());
    library.prepare(0, 10);
    library.applySnippet(3, snippet(3, 'b', 'Three, edited.'));
    expect(library.effectiveSystemPrompt(library.configuration(2)!)).toContain('S3:\nThree, edited.');
    library.applySnippet(1, null);
    library.reorderSnippets(new Map([[2, 0], [3, 1], [4, 2]]));
    expect(library.effectiveSystemPrompt(library.configuration(1)!)).toBe('Prompt 1.\n\nS2:\nTwo.');
  });
});
