import { composeWithProvenance, type ComposableSnippet } from './composition';
import { effectiveSystemPrompt } from './effective-prompt';

const snippet = (uid: number, identifier: string, name: string, text: string, tags: string[], flags: Partial<ComposableSnippet> = {}) => ({
  uid,
  identifier,
  name,
  snippet: text,
  hidden: false,
  isActive: true,
  tags,
  ...flags,
});

describe('composition with provenance', () => {
  const nova = snippet(1, 'nova', 'Nova persona', 'You are Nova, a friendly expert.', ['persona', 'tone_of_voice']);
  const formal = snippet(2, 'formal', 'Formal tone', 'Use a formal, professional tone of voice.', ['tone_of_voice']);
  const off = snippet(3, 'off', 'Off', 'Inactive text.', ['persona'], { isActive: false });
  const secret = snippet(4, 'secret', 'Hidden', 'Hidden text.', ['tone_of_voice'], { hidden: true });
  const twin = snippet(5, 'NOVA ', 'Nova twin', 'Same identifier.', ['tone_of_voice']);
  const rows = [nova, formal, off, secret, twin];
  const byTag = (tag: string) => rows.filter((row) => row.tags.includes(tag));

  it('parts are the selected snippets in prompt order, with every tag that matched them and their exact block', () => {
    const { parts } = composeWithProvenance(['persona', 'tone_of_voice'], byTag);
    expect(parts.map((p) => [p.snippet.identifier, p.matchedTags, p.text])).toEqual([
      ['nova', ['persona', 'tone_of_voice'], 'Nova persona:\nYou are Nova, a friendly expert.'],
      ['formal', ['tone_of_voice'], 'Formal tone:\nUse a formal, professional tone of voice.'],
    ]);
    const prompt = effectiveSystemPrompt('You are a helpful assistant.', ['persona', 'tone_of_voice'], (tag) => byTag(tag).filter((s) => s.isActive));
    expect(prompt).toBe(['You are a helpful assistant.', ...parts.map((p) => p.text)].join('\n\n'));
  });

  it('drops inactive, hidden and duplicate snippets, saying why', () => {
    const { dropped } = composeWithProvenance(['persona', 'tone_of_voice'], byTag);
    expect(dropped.map((d) => [d.snippet.uid, d.reason, d.matchedTags])).toEqual([
      [3, 'INACTIVE', ['persona']],
      [4, 'HIDDEN', ['tone_of_voice']],
      [5, 'DUPLICATE', ['tone_of_voice']],
    ]);
  });

  it('no tags: nothing composed, nothing dropped', () => {
    expect(composeWithProvenance([], byTag)).toEqual({ parts: [], dropped: [] });
  });
});
