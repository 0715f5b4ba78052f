import { phpObjectJson } from '../graphql/raw-json';
import { plainValueOf } from '../shared/php-json';
import { parseMetadataForWrite, readJsonObject, readMetadata } from './snippet-metadata';

/** The metadata as the API writes it: nr_llm's values and key order as JSON. */
const read = (text: string | null | undefined) => phpObjectJson(readMetadata(text)).text;
/** The metadata as a JavaScript object. */
const plain = (text: string | null | undefined) => plainValueOf(readMetadata(text));

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
    ['a leading zero', '{"a": 01}'],
    ['a byte order mark', '\uFEFF{"a": 1}'],
    ['a raw control character in a string', '{"a": "x\u0001"}'],
  ])('%s reads as an empty object', (_case, text) => {
    expect(read(text)).toBe('{}');
  });

  it('reads as nr_llm\'s getMetadataArray: a PHP list ({"0":"x"}, {}) is no metadata, other integer keys stay', () => {
    expect(read('{"0":"x"}')).toBe('{}');
    expect(read('{"0":"x","1":"y"}')).toBe('{}');
    expect(read('{"1":"a"}')).toBe('{"1":"a"}');
    expect(read('{"b":2,"0":"x"}')).toBe('{"b":2,"0":"x"}');
    expect(read('{"1":"a","0":"b"}')).toBe('{"1":"a","0":"b"}');
  });

  it('keeps the text\'s key order: {"b":2,"1":"a"} stays b, 1', () => {
    expect(read('{"b":2,"1":"a"}')).toBe('{"b":2,"1":"a"}');
    expect(read('{"z":{"y":1,"10":2,"2":3},"a":null}')).toBe('{"z":{"y":1,"10":2,"2":3},"a":null}');
  });

  it('a repeated key keeps its first place and its last value, as PHP\'s json_decode', () => {
    expect(read('{"a":1,"b":2,"a":3}')).toBe('{"a":3,"b":2}');
    expect(read('{"1":"x","b":2,"01":3,"1":"y"}')).toBe('{"1":"y","b":2,"01":3}');
  });

  it('keeps integers beyond 2^53 exact and floats as floats', () => {
    expect(read('{"seed":9007199254740993}')).toBe('{"seed":9007199254740993}');
    expect(read('{"max":9223372036854775807,"min":-9223372036854775808}')).toBe('{"max":9223372036854775807,"min":-9223372036854775808}');
    // Beyond PHP's 64-bit ints json_decode gives a float.
    expect(read('{"big":9223372036854775808}')).toBe('{"big":9.223372036854776e+18}');
    expect(read('{"a":0.0,"b":0,"c":1.50,"d":-0,"e":1E2,"f":0.00001,"g":1e25,"h":-0.0}')).toBe(
      '{"a":0.0,"b":0,"c":1.5,"d":0,"e":100.0,"f":1.0e-5,"g":1.0e+25,"h":-0.0}',
    );
  });

  it('nested empty objects and lists are PHP arrays: {} and [] both read as []', () => {
    expect(read('{"a":{},"b":[],"c":{"0":"x"},"d":{"1":"x"}}')).toBe('{"a":[],"b":[],"c":["x"],"d":{"1":"x"}}');
  });

  it('what PHP\'s json_decode refuses reads as {}: an unpaired surrogate escape, nesting deeper than 512', () => {
    expect(read('{"a":"\\ud800"}')).toBe('{}');
    expect(read('{"a":"\\udc00x"}')).toBe('{}');
    expect(read('{"a":"\\ud800\\u0041"}')).toBe('{}');
    expect(plain('{"a":"\\ud83d\\ude00"}')).toEqual({ a: '\u{1F600}' });
    expect(plain('{"a":"\\\\ud800"}')).toEqual({ a: '\\ud800' });
    const nested = (levels: number) => '{"a":' + '['.repeat(levels - 1) + ']'.repeat(levels - 1) + '}';
    expect(read(nested(512))).not.toBe('{}');
    expect(read(nested(513))).toBe('{}');
  });

  it('text that is empty after PHP\'s trim (which keeps a no-break space) reads as {}', () => {
    expect(read(' \t\n\r\0\x0B')).toBe('{}');
  });

  it('a missing column reads as an empty object', () => {
    expect(read(null)).toBe('{}');
    expect(read(undefined)).toBe('{}');
  });

  it('never throws, whatever the text', () => {
    for (const text of ['{', '}', '\0', '\uD800', '{"a":', 'NaN', 'undefined', '{"a": 1,}', '{"a":"\\u12"}', '-', '[1e400]']) {
      expect(() => readMetadata(text)).not.toThrow();
      expect(read(text)).toBe('{}');
    }
  });

  it('an object reads as the decoded object', () => {
    expect(plain('{"voice": "nova", "speed": 1.25, "tags": ["a"], "nested": {"x": null}}')).toEqual({
      voice: 'nova',
      speed: 1.25,
      tags: ['a'],
      nested: { x: null },
    });
    expect(read('{"voice": "nova", "speed": 1.25, "tags": ["a"], "nested": {"x": null}}')).toBe('{"voice":"nova","speed":1.25,"tags":["a"],"nested":{"x":null}}');
  });

  it('strings are written with only what JSON needs escaped (and U+2028/9, as PHP does)', () => {
    expect(read('{"a":"\\u00e4\\/\\n\\u001f\\u2028ä€😀"}')).toBe('{"a":"ä/\\n\\u001f\\u2028ä€😀"}');
  });

  it('whitespace around an object is allowed', () => {
    expect(plain('\n  {"voice": "nova"}  \n')).toEqual({ voice: 'nova' });
  });

  it('an object with numeric keys that are not 0, 1, … reads as an object', () => {
    expect(read('{"1": "a", "2": "b"}')).toBe('{"1":"a","2":"b"}');
  });

  it('a "__proto__" key stays a plain key and changes no prototype', () => {
    const metadata = plain('{"__proto__": {"polluted": true}}') as Record<string, unknown>;
    expect(Object.getPrototypeOf(metadata)).toBe(Object.prototype);
    expect(Object.keys(metadata)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect(read('{"__proto__": {"polluted": true}}')).toBe('{"__proto__":{"polluted":true}}');
  });

  it('each empty read is a fresh array', () => {
    readMetadata('').set('changed', true);
    expect(read('')).toBe('{}');
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

  it('stores a JSON text as given, only without whitespace between tokens: big integers, 0.0 and key order reach the column', () => {
    expect(parseMetadataForWrite(' {"seed" : 9007199254740993, "b" : 2, "1" : "a", "t" : 0.0, "s" : "a b\\" c" } ')).toEqual({
      ok: true,
      json: '{"seed":9007199254740993,"b":2,"1":"a","t":0.0,"s":"a b\\" c"}',
    });
  });

  it('refuses JSON text PHP cannot decode (an unpaired surrogate escape) and says why', () => {
    const result = parseMetadataForWrite('{"a":"\\ud800"}');
    expect(result.ok).toBe(false);
    if (!result.ok) expect(result.message).toMatch(/PHP \(nr_llm\) cannot decode it/);
    expect(parseMetadataForWrite({ a: '\ud800' }).ok).toBe(false);
  });

  it('what is stored reads back as the same object', () => {
    const value = { voice: 'nova', list: [1, 'two', { three: 3 }], unicode: 'Ä😀' };
    const result = parseMetadataForWrite(value);
    expect(result.ok).toBe(true);
    if (result.ok) {
      expect(plainValueOf(readMetadata(result.json))).toEqual(value);
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
