import { composeSnippets } from './snippet-text';

describe('composeSnippets', () => {
  it('renders one pair as label, colon, newline, text', () => {
    expect(composeSnippets([{ label: 'Persona', snippet: 'You are Nova.' }])).toBe('Persona:\nYou are Nova.');
  });

  it('joins blocks with a blank line, in the order given', () => {
    expect(
      composeSnippets([
        { label: 'B', snippet: 'second' },
        { label: 'A', snippet: 'first' },
      ]),
    ).toBe('B:\nsecond\n\nA:\nfirst');
  });

  it('nothing to compose gives the empty string', () => {
    expect(composeSnippets([])).toBe('');
  });

  it('a missing snippet is skipped', () => {
    expect(
      composeSnippets([
        { label: 'Null', snippet: null },
        { label: 'Kept', snippet: 'text' },
        { label: 'Undefined', snippet: undefined },
      ]),
    ).toBe('Kept:\ntext');
  });

  it('only missing snippets give the empty string', () => {
    expect(composeSnippets([{ label: 'A', snippet: null }, { label: 'B', snippet: undefined }])).toBe('');
  });

  it('an empty snippet is skipped', () => {
    expect(composeSnippets([{ label: 'Empty', snippet: '' }, { label: 'Kept', snippet: 'x' }])).toBe('Kept:\nx');
  });

  it('a snippet of only PHP whitespace is skipped', () => {
    expect(composeSnippets([{ label: 'Blank', snippet: ' \t\n\r\0\x0B' }])).toBe('');
  });

  it('trims space, tab, newline, carriage return, NUL and vertical tab around the text', () => {
    expect(composeSnippets([{ label: 'L', snippet: '\0\x0B \t\r\ntext\n\r\t \x0B\0' }])).toBe('L:\ntext');
  });

  it('does not trim other Unicode spaces', () => {
    const text = '\u00A0text\u2003';
    expect(composeSnippets([{ label: 'L', snippet: text }])).toBe('L:\n' + text);
    expect(composeSnippets([{ label: 'L', snippet: '\u00A0' }])).toBe('L:\n\u00A0');
    expect(composeSnippets([{ label: 'L', snippet: '\uFEFF' }])).toBe('L:\n\uFEFF');
  });

  it('does not trim a form feed', () => {
    expect(composeSnippets([{ label: 'L', snippet: '\ftext\f' }])).toBe('L:\n\ftext\f');
  });

  it('keeps multi-line text as it is inside its block', () => {
    const text = 'line one\n\n  indented line\r\n\tline three';
    expect(composeSnippets([{ label: 'L', snippet: '\n' + text + '\n' }])).toBe('L:\n' + text);
  });

  it('keeps the label as given, without changing its case or trimming it', () => {
    expect(composeSnippets([{ label: ' nova PERSONA ', snippet: 'x' }])).toBe(' nova PERSONA :\nx');
  });

  it('composes two pairs sharing a label as two blocks', () => {
    expect(
      composeSnippets([
        { label: 'Same', snippet: 'one' },
        { label: 'Same', snippet: 'two' },
      ]),
    ).toBe('Same:\none\n\nSame:\ntwo');
  });

  it('skipped pairs leave no extra separators', () => {
    expect(
      composeSnippets([
        { label: 'A', snippet: 'a' },
        { label: 'B', snippet: '  ' },
        { label: 'C', snippet: null },
        { label: 'D', snippet: 'd' },
      ]),
    ).toBe('A:\na\n\nD:\nd');
  });
});
