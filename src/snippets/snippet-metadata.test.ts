import { parseMetadataForWrite, readJsonObject, readMetadata } from './snippet-metadata';

describe('readMetadata', () => {
  it.each([
    ['empty text', ''],
    ['whitespace', '  \n\t '],
    ['invalid JSON', '{voice: nova}'],
    ['truncated JSON', '{"voice": "no'],
    ['a JSON string', '"nova"'],
    ['a JSON number', '42'],
    ['a JSON boolean', 'true'],
    ['JSON null', 'null'],
    ['a JSON array', '[1, 2, 3]'],
    ['an empty JSON array', '[]'],
    ['an array of objects', '[{"voice": "nova"}]'],
    ['an empty JSON object', '{}'],
    ['two JSON values', '{} {}'],
    ['text after the object', '{"voice": "nova"} trailing'],
  ])('%s reads as an empty object', (_case, text) => {
    expect(readMetadata(text)).toEqual({});
  });

  it('reads as nr_llm\'s getMetadataArray: a PHP list ({"0":"x"}, {}) is no metadata, other integer keys stay', () => {
    expect(readMetadata('{"0":"x"}')).toEqual({});
    expect(readMetadata('{"0":"x","1":"y"}')).toEqual({});
    expect(readMetadata('{"1":"a"}')).toEqual({ 1: 'a' });
    expect(readMetadata('{"b":2,"0":"x"}')).toEqual({ b: 2, 0: 'x' });
  });

  it('what PHP\'s json_decode refuses reads as {}: an unpaired surrogate escape, nesting deeper than 512', () => {
    expect(readMetadata('{"a":"\\ud800"}')).toEqual({});
    expect(readMetadata('{"a":"\\udc00x"}')).toEqual({});
    expect(readMetadata('{"a":"\\ud83d\\ude00"}')).toEqual({ a: '\u{1F600}' });
    expect(readMetadata('{"a":"\\\\ud800"}')).toEqual({ a: '\\ud800' });
    const nested = (levels: number) => '{"a":' + '['.repeat(levels - 1) + ']'.repeat(levels - 1) + '}';
    expect(readMetadata(nested(512))).not.toEqual({});
    expect(readMetadata(nested(513))).toEqual({});
  });

  it('text that is empty after PHP\'s trim (which keeps a no-break space) reads as {}', () => {
    expect(readMetadata(' \t\n\r\0\x0B')).toEqual({});
  });

  it('a missing column reads as an empty object', () => {
    expect(readMetadata(null)).toEqual({});
    expect(readMetadata(undefined)).toEqual({});
  });

  it('never throws, whatever the text', () => {
    for (const text of ['{', '}', '\0', '\uD800', '{"a":', 'NaN', 'undefined', '{"a": 1,}']) {
      expect(() => readMetadata(text)).not.toThrow();
      expect(readMetadata(text)).toEqual({});
    }
  });

  it('an object reads as the decoded object', () => {
    expect(readMetadata('{"voice": "nova", "speed": 1.25, "tags": ["a"], "nested": {"x": null}}')).toEqual({
      voice: 'nova',
      speed: 1.25,
      tags: ['a'],
      nested: { x: null },
    });
  });

  it('whitespace around an object is allowed', () => {
    expect(readMetadata('\n  {"voice": "nova"}  \n')).toEqual({ voice: 'nova' });
  });

  it('an object with numeric keys that are not 0, 1, … reads as an object', () => {
    expect(readMetadata('{"1": "a", "2": "b"}')).toEqual({ '1': 'a', '2': 'b' });
  });

  it('a "__proto__" key stays a plain key and changes no prototype', () => {
    const metadata = readMetadata('{"__proto__": {"polluted": true}}');
    expect(Object.getPrototypeOf(metadata)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('each empty read is a fresh object', () => {
    const first = readMetadata('');
    first.changed = true;
    expect(readMetadata('')).toEqual({});
  });
});

describe('readJsonObject', () => {
  it('reads an options column like metadata', () => {
    expect(readJsonObject('{"max_tokens": 500, "stop": ["\\n"]}')).toEqual({ max_tokens: 500, stop: ['\n'] });
    expect(readJsonObject('[]')).toEqual({});
    expect(readJsonObject('oops')).toEqual({});
    expect(readJsonObject(null)).toEqual({});
  });
});

describe('parseMetadataForWrite', () => {
  it('accepts a plain object and gives compact JSON', () => {
    expect(parseMetadataForWrite({ voice: 'nova', speed: 1.5, flags: [true, null], nested: { a: 'b' } })).toEqual({
      ok: true,
      json: '{"voice":"nova","speed":1.5,"flags":[true,null],"nested":{"a":"b"}}',
    });
  });

  it('accepts an empty object', () => {
    expect(parseMetadataForWrite({})).toEqual({ ok: true, json: '{}' });
  });

  it('accepts an object without a prototype', () => {
    const value = Object.create(null) as Record<string, unknown>;
    value.voice = 'nova';
    expect(parseMetadataForWrite(value)).toEqual({ ok: true, json: '{"voice":"nova"}' });
  });

  it('accepts a string holding a JSON object and stores it compacted', () => {
    expect(parseMetadataForWrite(' { "voice" : "nova" } ')).toEqual({ ok: true, json: '{"voice":"nova"}' });
  });

  it('what is stored reads back as the same object', () => {
    const value = { voice: 'nova', list: [1, 'two', { three: 3 }], unicode: 'Ä😀' };
    const result = parseMetadataForWrite(value);
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(readMetadata(result.json)).toEqual(value);
    }
  });

  it.each([
    ['null', null],
    ['undefined', undefined],
    ['an array', [{ voice: 'nova' }]],
    ['an empty array', []],
    ['a number', 42],
    ['a boolean', false],
    ['a string that is not JSON', 'voice=nova'],
    ['an empty string', ''],
    ['a string holding a JSON array', '[1,2]'],
    ['a string holding a JSON string', '"{}"'],
    ['a string holding JSON null', 'null'],
    ['a date', new Date(0)],
    ['a map', new Map([['voice', 'nova']])],
  ])('refuses %s with a clear message', (_case, value) => {
    const result = parseMetadataForWrite(value);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.message).toMatch(/^Metadata must be a JSON object/);
    }
  });

  it.each([
    ['undefined', { a: undefined }, 'metadata.a'],
    ['a function', { a: () => 1 }, 'metadata.a'],
    ['NaN', { a: { b: Number.NaN } }, 'metadata.a.b'],
    ['Infinity', { a: [1, Number.POSITIVE_INFINITY] }, 'metadata.a[1]'],
    ['a bigint', { a: BigInt(1) }, 'metadata.a'],
    ['a symbol', { a: Symbol('s') }, 'metadata.a'],
    ['a date', { when: new Date(0) }, 'metadata.when'],
  ])('refuses an object holding %s and names where', (_case, value, path) => {
    const result = parseMetadataForWrite(value);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.message).toContain(path);
    }
  });

  it('refuses an object that refers to itself', () => {
    const value: Record<string, unknown> = { a: 1 };
    value.self = value;
    const result = parseMetadataForWrite(value);
    expect(result.ok).toBe(false);
    if (!result.ok) {
      expect(result.message).toContain('metadata.self');
    }
  });

  it('accepts the same object twice in different branches', () => {
    const shared = { x: 1 };
    expect(parseMetadataForWrite({ a: shared, b: shared })).toEqual({ ok: true, json: '{"a":{"x":1},"b":{"x":1}}' });
  });
});
