import {
  type SelectableSnippet,
  appendSnippetBlock,
  composeSnippetBlock,
  effectiveSystemPrompt,
  messagesHaveSystem,
  selectSnippets,
} from './effective-prompt';
import { parseSelectionTags } from './tags';

let nextUid = 1;

function snippet(overrides: Partial<SelectableSnippet> & { identifier: string }): SelectableSnippet {
  const uid = overrides.uid ?? nextUid++;
  return {
    uid,
    name: overrides.identifier,
    snippet: 'Text of ' + overrides.identifier + '.',
    hidden: false,
    ...overrides,
  };
}

/** A tag lookup over a fixed map, recording which tags were asked for. */
function lookup(byTag: Record<string, SelectableSnippet[]>): ((tag: string) => SelectableSnippet[]) & { asked: string[] } {
  const asked: string[] = [];
  const activeByTag = (tag: string): SelectableSnippet[] => {
    asked.push(tag);
    return byTag[tag] ?? [];
  };
  return Object.assign(activeByTag, { asked });
}

describe('selectSnippets', () => {
  it('keeps tag order, then the lookup order within a tag', () => {
    const a = snippet({ identifier: 'a' });
    const b = snippet({ identifier: 'b' });
    const c = snippet({ identifier: 'c' });
    const activeByTag = lookup({ persona: [a, b], tone_of_voice: [c] });
    expect(selectSnippets(['tone_of_voice', 'persona'], activeByTag)).toEqual([c, a, b]);
    expect(activeByTag.asked).toEqual(['tone_of_voice', 'persona']);
  });

  it('a hidden snippet is not selected', () => {
    const shown = snippet({ identifier: 'shown' });
    const hidden = snippet({ identifier: 'hidden', hidden: true });
    expect(selectSnippets(['persona'], lookup({ persona: [hidden, shown] }))).toEqual([shown]);
  });

  it('a snippet carrying two selected tags is selected once, at its first tag', () => {
    const both = snippet({ identifier: 'both' });
    const other = snippet({ identifier: 'other' });
    const activeByTag = lookup({ persona: [both], style: [other, both] });
    expect(selectSnippets(['persona', 'style'], activeByTag)).toEqual([both, other]);
    expect(selectSnippets(['style', 'persona'], activeByTag)).toEqual([other, both]);
  });

  it('deduplicates by identifier trimmed and lower-cased, not by uid', () => {
    const first = snippet({ uid: 1, identifier: 'nova' });
    const sameIdentifier = snippet({ uid: 2, identifier: ' NOVA\t' });
    expect(selectSnippets(['persona', 'style'], lookup({ persona: [first], style: [sameIdentifier] }))).toEqual([first]);
  });

  it('uses the uid where the identifier is blank', () => {
    const blankOne = snippet({ uid: 10, identifier: '' });
    const blankOneAgain = snippet({ uid: 10, identifier: '  ' });
    const blankTwo = snippet({ uid: 11, identifier: '' });
    expect(
      selectSnippets(['persona', 'style'], lookup({ persona: [blankOne, blankTwo], style: [blankOneAgain] })),
    ).toEqual([blankOne, blankTwo]);
  });

  it('an identifier never collides with a uid', () => {
    const named = snippet({ uid: 1, identifier: '7' });
    const blank = snippet({ uid: 7, identifier: '' });
    expect(selectSnippets(['persona'], lookup({ persona: [named, blank] }))).toEqual([named, blank]);
  });

  it('a hidden snippet does not block a visible one with the same identifier', () => {
    const hidden = snippet({ uid: 1, identifier: 'nova', hidden: true });
    const visible = snippet({ uid: 2, identifier: 'Nova' });
    expect(selectSnippets(['persona', 'style'], lookup({ persona: [hidden], style: [visible] }))).toEqual([visible]);
  });

  it('an unknown tag selects nothing and is no error', () => {
    expect(selectSnippets(['no_such_tag'], lookup({}))).toEqual([]);
  });

  it('no tags select nothing and ask for nothing', () => {
    const activeByTag = lookup({ persona: [snippet({ identifier: 'a' })] });
    expect(selectSnippets([], activeByTag)).toEqual([]);
    expect(activeByTag.asked).toEqual([]);
  });
});

describe('composeSnippetBlock', () => {
  it('labels each snippet with its name', () => {
    expect(
      composeSnippetBlock([
        { name: 'Nova persona', snippet: 'You are Nova.' },
        { name: 'Formal tone', snippet: 'Be formal.' },
      ]),
    ).toBe('Nova persona:\nYou are Nova.\n\nFormal tone:\nBe formal.');
  });

  it('two snippets sharing a name both appear', () => {
    expect(
      composeSnippetBlock([
        { name: 'Tone', snippet: 'one' },
        { name: 'Tone', snippet: 'two' },
      ]),
    ).toBe('Tone:\none\n\nTone:\ntwo');
  });

  it('a snippet with empty text gives no block and no extra separator', () => {
    expect(
      composeSnippetBlock([
        { name: 'A', snippet: 'a' },
        { name: 'Empty', snippet: ' \n\t ' },
        { name: 'B', snippet: 'b' },
      ]),
    ).toBe('A:\na\n\nB:\nb');
  });

  it('trims each text the PHP way and keeps inner lines', () => {
    expect(composeSnippetBlock([{ name: 'L', snippet: '\n  first\n\nsecond  \n' }])).toBe('L:\nfirst\n\nsecond');
  });

  it('nothing selected gives the empty string', () => {
    expect(composeSnippetBlock([])).toBe('');
  });
});

describe('appendSnippetBlock', () => {
  it('an empty block leaves the prompt byte-identical', () => {
    for (const prompt of ['', 'Prompt.', '  spaced \n', 'trailing newlines\n\n']) {
      expect(appendSnippetBlock(prompt, '')).toBe(prompt);
    }
  });

  it('an empty prompt becomes the block alone', () => {
    expect(appendSnippetBlock('', 'Persona:\nx')).toBe('Persona:\nx');
  });

  it("puts the configuration's prompt first, then a blank line, then the block", () => {
    expect(appendSnippetBlock('Prompt.', 'Persona:\nx')).toBe('Prompt.\n\nPersona:\nx');
  });

  it('does not trim the prompt before appending', () => {
    expect(appendSnippetBlock('Prompt.\n', 'B:\nx')).toBe('Prompt.\n\n\nB:\nx');
    expect(appendSnippetBlock('   ', 'B:\nx')).toBe('   \n\nB:\nx');
  });
});

describe('effectiveSystemPrompt', () => {
  const nova = snippet({
    identifier: 'nova',
    name: 'Nova persona',
    snippet: 'You are Nova, a friendly expert.',
  });
  const formal = snippet({
    identifier: 'formal',
    name: 'Formal tone',
    snippet: 'Use a formal, professional tone of voice.',
  });

  it('composes the example of behaviour.md section 4 byte for byte', () => {
    const activeByTag = lookup({ persona: [nova], tone_of_voice: [formal] });
    expect(effectiveSystemPrompt('You are a helpful assistant.', parseSelectionTags('persona,tone_of_voice'), activeByTag)).toBe(
      'You are a helpful assistant.\n\nNova persona:\nYou are Nova, a friendly expert.\n\nFormal tone:\nUse a formal, professional tone of voice.',
    );
  });

  it('a configuration without tags keeps its prompt byte-identical', () => {
    expect(effectiveSystemPrompt('Prompt.\n', [], lookup({}))).toBe('Prompt.\n');
  });

  it('a configuration with neither prompt nor tags has no system prompt', () => {
    expect(effectiveSystemPrompt('', [], lookup({}))).toBe('');
  });

  it('tags that select nothing keep the prompt byte-identical', () => {
    expect(effectiveSystemPrompt(' Prompt ', ['unknown'], lookup({}))).toBe(' Prompt ');
  });

  it('tags without a prompt give the block alone', () => {
    expect(effectiveSystemPrompt('', ['persona'], lookup({ persona: [nova] }))).toBe(
      'Nova persona:\nYou are Nova, a friendly expert.',
    );
  });

  it('a hidden snippet is not composed', () => {
    const hiddenFormal = { ...formal, hidden: true };
    expect(effectiveSystemPrompt('P', ['persona', 'tone_of_voice'], lookup({ persona: [nova], tone_of_voice: [hiddenFormal] }))).toBe(
      'P\n\nNova persona:\nYou are Nova, a friendly expert.',
    );
  });

  it('a snippet selected by two tags is composed once', () => {
    expect(effectiveSystemPrompt('P', ['persona', 'style'], lookup({ persona: [nova], style: [nova] }))).toBe(
      'P\n\nNova persona:\nYou are Nova, a friendly expert.',
    );
  });

  it('a per-call override still gets the snippet block', () => {
    expect(effectiveSystemPrompt('Override.', ['persona'], lookup({ persona: [nova] }))).toBe(
      'Override.\n\nNova persona:\nYou are Nova, a friendly expert.',
    );
  });
});

describe('messagesHaveSystem', () => {
  it('is true when a system message is first', () => {
    expect(messagesHaveSystem([{ role: 'system' }, { role: 'user' }])).toBe(true);
  });

  it('is true when a system message is anywhere in the list', () => {
    expect(messagesHaveSystem([{ role: 'user' }, { role: 'assistant' }, { role: 'system' }])).toBe(true);
  });

  it('is false without a system message', () => {
    expect(messagesHaveSystem([{ role: 'user' }, { role: 'assistant' }, { role: 'tool' }])).toBe(false);
  });

  it('is false for an empty list', () => {
    expect(messagesHaveSystem([])).toBe(false);
  });

  it('matches the role exactly', () => {
    expect(messagesHaveSystem([{ role: 'System' }, { role: ' system' }])).toBe(false);
  });
});
