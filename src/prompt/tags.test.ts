import {
  compareByteOrder,
  hasTag,
  lowerCaseAscii,
  normalizeTag,
  parseSelectionTags,
  parseTags,
  serializeTags,
  tagVocabulary,
  trimWhitespace,
  validateTagsForWrite,
} from './tags';

describe('trimWhitespace', () => {
  it('removes space, tab, newline, carriage return, NUL and vertical tab from both ends', () => {
    expect(trimWhitespace(' \t\n\r\0\x0Bword \t\n\r\0\x0B')).toBe('word');
  });

  it('keeps the same characters inside the text', () => {
    expect(trimWhitespace(' a \t\n b ')).toBe('a \t\n b');
  });

  it('does not remove no-break spaces, form feeds or other Unicode spaces', () => {
    for (const space of ['\u00A0', '\f', '\u2003', '\u3000', '\uFEFF', '\u2028']) {
      expect(trimWhitespace(space + 'x' + space)).toBe(space + 'x' + space);
    }
  });

  it('whitespace only gives the empty string', () => {
    expect(trimWhitespace(' \t\n\r\0\x0B')).toBe('');
    expect(trimWhitespace('')).toBe('');
  });
});

describe('lowerCaseAscii', () => {
  it('lower-cases A to Z', () => {
    expect(lowerCaseAscii('ABCXYZ abc 09_-')).toBe('abcxyz abc 09_-');
  });

  it('leaves non-ASCII letters as they are', () => {
    expect(lowerCaseAscii('ÄÖÜ É Σ İ')).toBe('ÄÖÜ É Σ İ');
    expect(lowerCaseAscii('STRASSE Ärger')).toBe('strasse Ärger');
  });
});

describe('normalizeTag', () => {
  it('a query argument is normalised like a stored tag', () => {
    expect(normalizeTag('STYLE')).toBe('style');
    expect(normalizeTag(' style ')).toBe('style');
    expect(normalizeTag('\tTone_Of_Voice\n')).toBe('tone_of_voice');
  });

  it('"Ä" stays "Ä"', () => {
    expect(normalizeTag(' Ärger ')).toBe('Ärger');
  });

  it('whitespace only normalises to the empty string', () => {
    expect(normalizeTag('  \t ')).toBe('');
  });

  it('keeps inner spaces', () => {
    expect(normalizeTag(' Tone Of Voice ')).toBe('tone of voice');
  });
});

describe('parseTags', () => {
  it('empty, blank and comma-only CSV give no tags', () => {
    expect(parseTags('')).toEqual([]);
    expect(parseTags('   ')).toEqual([]);
    expect(parseTags(' , ,, ')).toEqual([]);
  });

  it('a missing column gives no tags', () => {
    expect(parseTags(null)).toEqual([]);
    expect(parseTags(undefined)).toEqual([]);
  });

  it('trims, lower-cases and drops empty pieces, keeping order', () => {
    expect(parseTags(' Persona ,, Layout , STYLE ')).toEqual(['persona', 'layout', 'style']);
  });

  it("a snippet's tag list keeps duplicates", () => {
    expect(parseTags('style,Style, STYLE ,layout')).toEqual(['style', 'style', 'style', 'layout']);
  });

  it('lower-cases ASCII letters only', () => {
    expect(parseTags('Ärger,ÉTÉ,Ä')).toEqual(['Ärger', 'ÉtÉ', 'Ä']);
  });

  it('trims PHP whitespace only, not no-break spaces', () => {
    expect(parseTags('\u00A0style\u00A0,\x0Blayout\0')).toEqual(['\u00A0style\u00A0', 'layout']);
  });

  it('splits on commas only', () => {
    expect(parseTags('a;b c|d')).toEqual(['a;b c|d']);
  });
});

describe('parseSelectionTags', () => {
  it("a configuration's snippet_tags drops repeats, keeping the first", () => {
    expect(parseSelectionTags('tone_of_voice, persona, TONE_OF_VOICE ,layout,persona')).toEqual([
      'tone_of_voice',
      'persona',
      'layout',
    ]);
  });

  it('empty, blank and missing selections give no tags', () => {
    expect(parseSelectionTags('')).toEqual([]);
    expect(parseSelectionTags(' , ,, ')).toEqual([]);
    expect(parseSelectionTags(null)).toEqual([]);
    expect(parseSelectionTags(undefined)).toEqual([]);
  });

  it('normalises like parseTags', () => {
    expect(parseSelectionTags(' Persona ,, Layout , STYLE ')).toEqual(['persona', 'layout', 'style']);
  });

  it('"Ä" and "ä" are different tags', () => {
    expect(parseSelectionTags('Ä,ä,Ä')).toEqual(['Ä', 'ä']);
  });
});

describe('hasTag', () => {
  it('matches a whole token after normalisation', () => {
    expect(hasTag('persona, Style ,layout', 'style')).toBe(true);
    expect(hasTag('persona,style', 'STYLE')).toBe(true);
    expect(hasTag('persona,style', ' style ')).toBe(true);
  });

  it('style does not match a snippet tagged lifestyle', () => {
    expect(hasTag('lifestyle', 'style')).toBe(false);
  });

  it('life matches nothing', () => {
    expect(hasTag('lifestyle,style', 'life')).toBe(false);
  });

  it('an unknown tag matches nothing', () => {
    expect(hasTag('persona,layout', 'audience')).toBe(false);
  });

  it('an empty or blank tag matches nothing', () => {
    expect(hasTag('persona,,layout', '')).toBe(false);
    expect(hasTag(' , ', '  ')).toBe(false);
  });

  it('a missing tag column matches nothing', () => {
    expect(hasTag(null, 'style')).toBe(false);
    expect(hasTag(undefined, 'style')).toBe(false);
  });

  it('a query containing a comma matches no single token', () => {
    expect(hasTag('persona,layout', 'persona,layout')).toBe(false);
  });

  it('does not fold non-ASCII case', () => {
    expect(hasTag('Ärger', 'ärger')).toBe(false);
    expect(hasTag('ärger', 'Ärger')).toBe(false);
    expect(hasTag('Ärger', 'ÄRGER')).toBe(true); // only the ASCII letters fold
    expect(hasTag('Ärger', ' Ärger ')).toBe(true);
  });
});

describe('serializeTags', () => {
  it('joins normalised tags with a comma and no spaces', () => {
    expect(serializeTags([' Persona', 'TONE_of_voice '])).toBe('persona,tone_of_voice');
  });

  it('drops empty tags and keeps order and duplicates', () => {
    expect(serializeTags(['b', '  ', '', 'a', 'B'])).toBe('b,a,b');
  });

  it('no tags give the empty string', () => {
    expect(serializeTags([])).toBe('');
  });

  it('reads back as the same list', () => {
    const tags = ['Persona', ' layout ', 'Ärger'];
    expect(parseTags(serializeTags(tags))).toEqual(['persona', 'layout', 'Ärger']);
  });
});

describe('validateTagsForWrite', () => {
  it('gives the normalised CSV to store', () => {
    expect(validateTagsForWrite([' Persona ', 'Style'])).toEqual({ ok: true, csv: 'persona,style' });
  });

  it('drops tags that are empty after trimming', () => {
    expect(validateTagsForWrite(['', '  ', 'layout', '\t'])).toEqual({ ok: true, csv: 'layout' });
  });

  it('no tags store the empty string', () => {
    expect(validateTagsForWrite([])).toEqual({ ok: true, csv: '' });
    expect(validateTagsForWrite([' '])).toEqual({ ok: true, csv: '' });
  });

  it('a tag containing a comma is refused', () => {
    const result = validateTagsForWrite(['persona', 'tone,voice']);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.message).toContain('comma');
      expect(result.message).toContain('tone,voice');
    }
  });

  it('a lone comma is refused rather than dropped', () => {
    expect(validateTagsForWrite([',']).ok).toBe(false);
  });

  it('accepts a CSV of exactly 255 characters', () => {
    const tags = ['a'.repeat(100), 'b'.repeat(100), 'c'.repeat(53)];
    const result = validateTagsForWrite(tags);
    expect(result).toEqual({ ok: true, csv: tags.join(',') });
    if (result.ok) {
      expect(result.csv).toHaveLength(255);
    }
  });

  it('refuses a CSV of 256 characters', () => {
    const result = validateTagsForWrite(['a'.repeat(100), 'b'.repeat(100), 'c'.repeat(54)]);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.message).toContain('255');
    }
  });

  it('counts characters, not bytes or UTF-16 units', () => {
    expect(validateTagsForWrite(['Ä'.repeat(255)]).ok).toBe(true);
    expect(validateTagsForWrite(['😀'.repeat(255)]).ok).toBe(true);
    expect(validateTagsForWrite(['😀'.repeat(256)]).ok).toBe(false);
  });

  it('measures the length after trimming', () => {
    expect(validateTagsForWrite(['   ' + 'a'.repeat(255) + '   ']).ok).toBe(true);
  });
});

describe('compareByteOrder', () => {
  it('orders by code point, upper case before lower case', () => {
    expect(['b', 'B', 'a', 'A'].sort(compareByteOrder)).toEqual(['A', 'B', 'a', 'b']);
  });

  it('a prefix comes first', () => {
    expect(compareByteOrder('style', 'styles')).toBe(-1);
    expect(compareByteOrder('styles', 'style')).toBe(1);
    expect(compareByteOrder('style', 'style')).toBe(0);
  });

  it('puts characters above U+FFFF after U+E000 to U+FFFF, as UTF-8 bytes do', () => {
    // UTF-16 code units would put the emoji (a surrogate pair, 0xD83D…) first.
    expect(['😀', '\uFF21'].sort(compareByteOrder)).toEqual(['\uFF21', '😀']);
    expect(Buffer.compare(Buffer.from('\uFF21'), Buffer.from('😀'))).toBe(-1);
  });
});

describe('tagVocabulary', () => {
  it('lists every tag once, normalised, sorted as nr_llm\'s tag picker sorts them (PHP ksort)', () => {
    expect(tagVocabulary(['Style,persona', ' layout ,STYLE', 'Audience'])).toEqual([
      'audience',
      'layout',
      'persona',
      'style',
    ]);
  });

  it('ignores missing and empty columns', () => {
    expect(tagVocabulary([null, '', ' , ,, ', undefined, 'x'])).toEqual(['x']);
  });

  it('no rows give no tags', () => {
    expect(tagVocabulary([])).toEqual([]);
  });

  it('sorts text keys by bytes, not by locale', () => {
    expect(tagVocabulary(['zeta,Ärger,apfel,_intern,9lives,Zebra'])).toEqual([
      '9lives',
      '_intern',
      'apfel',
      'zebra',
      'zeta',
      'Ärger',
    ]);
  });

  it('sorts integer tags as numbers, as PHP array keys: 10,9,01,1 gives 01, 1, 9, 10', () => {
    expect(tagVocabulary(['10,9,01,1'])).toEqual(['01', '1', '9', '10']);
    expect(tagVocabulary(['10,9,100'])).toEqual(['9', '10', '100']);
  });

  it('of two tags PHP finds equal, the first seen comes first', () => {
    expect(tagVocabulary(['1', '01'])).toEqual(['1', '01']);
    expect(tagVocabulary(['01', '1'])).toEqual(['01', '1']);
  });

  it('compares an integer with other text as text, and numeric strings as numbers', () => {
    expect(tagVocabulary(['b,2,10,1.5,1e1,a'])).toEqual(['1.5', '2', '10', '1e1', 'a', 'b']);
    expect(tagVocabulary(['9lives,10,9'])).toEqual(['9', '10', '9lives']);
  });

  it('accepts any iterable', () => {
    function* columns(): Generator<string | null> {
      yield 'b';
      yield null;
      yield 'a,b';
    }
    expect(tagVocabulary(columns())).toEqual(['a', 'b']);
  });
});
