import { isPhpList, phpArrayMerge, phpFloat, phpIntegerKey, phpJsonDecode, phpJsonEncode, phpValueOf, plainJsonText, plainValueOf, type PhpArray } from './php-json';

/** Decode, then encode with PHP's default flags. */
const roundTrip = (text: string): string | null | undefined => {
  const decoded = phpJsonDecode(text);
  return decoded === undefined ? undefined : phpJsonEncode(decoded);
};

describe('phpJsonDecode', () => {
  it('keeps the key order of the text, integer-like keys included', () => {
    const decoded = phpJsonDecode('{"b":2,"1":"a"}') as PhpArray;
    expect([...decoded.keys()]).toEqual(['b', '1']);
    expect(roundTrip('{"1":"a","0":"b"}')).toBe('{"1":"a","0":"b"}');
  });

  it('reads an object whose keys are "0", "1", … in order as a list', () => {
    expect(roundTrip('{"0":"x","1":"y"}')).toBe('["x","y"]');
    expect(isPhpList(phpJsonDecode('{}') as PhpArray)).toBe(true);
  });

  it('keeps the first place and the last value of a repeated key', () => {
    expect(roundTrip('{"a":1,"b":2,"a":3}')).toBe('{"a":3,"b":2}');
  });

  it('keeps 64-bit integers exact and reads longer ones, fractions and exponents as floats', () => {
    expect(phpJsonDecode('9223372036854775807')).toBe(9223372036854775807n);
    expect(phpJsonDecode('-9223372036854775808')).toBe(-9223372036854775808n);
    expect(phpJsonDecode('9223372036854775808')).toBe(9223372036854775808);
    expect(phpJsonDecode('-0')).toBe(0n);
    expect(phpJsonDecode('1.0')).toBe(1);
    expect(typeof phpJsonDecode('1e2')).toBe('number');
  });

  it('refuses what PHP refuses: invalid JSON, unpaired surrogates, control characters, nesting beyond 512', () => {
    for (const text of ['', ' ', '{', '{"a":1,}', '[1,]', '01', '"\\ud800"', '"\\udc00x"', '"a\u0001"', "'a'", 'TRUE', '{"a" 1}', '[1] 2']) {
      expect(phpJsonDecode(text)).toBeUndefined();
    }
    expect(phpJsonDecode('"\\ud83d\\ude00"')).toBe('😀');
    expect(phpJsonDecode('['.repeat(512) + ']'.repeat(512))).toBeInstanceOf(Map);
    expect(phpJsonDecode('['.repeat(513) + ']'.repeat(513))).toBeUndefined();
    expect(phpJsonDecode(' \t\n\r{"a" : [ true , false , null ] }\n')).toBeInstanceOf(Map);
  });
});

describe('phpJsonEncode', () => {
  it("escapes slashes and non-ASCII characters by default, in lower-case hex", () => {
    expect(phpJsonEncode('a/b é 😀')).toBe('"a\\/b \\u00e9 \\ud83d\\ude00"');
    expect(phpJsonEncode('"\\\b\f\n\r\t\u0001\u007f')).toBe('"\\"\\\\\\b\\f\\n\\r\\t\\u0001\u007f"');
  });

  it('leaves slashes and unicode as they are when asked, but U+2028 and U+2029 stay escaped', () => {
    expect(phpJsonEncode('a/b é\u2028\u2029', { unescapedSlashes: true, unescapedUnicode: true })).toBe('"a/b é\\u2028\\u2029"');
  });

  it('writes floats as PHP does: shortest digits, no zero fraction, exponent below 1e-4 and from 1e17 on', () => {
    expect(phpFloat(100)).toBe('100');
    expect(phpFloat(0.1)).toBe('0.1');
    expect(phpFloat(-1.5)).toBe('-1.5');
    expect(phpFloat(0.0001)).toBe('0.0001');
    expect(phpFloat(0.00001)).toBe('1.0e-5');
    expect(phpFloat(1.5e-7)).toBe('1.5e-7');
    expect(phpFloat(1e16)).toBe('10000000000000000');
    expect(phpFloat(1e17)).toBe('1.0e+17');
    expect(phpFloat(1e25)).toBe('1.0e+25');
    expect(phpFloat(9223372036854775808)).toBe('9.223372036854776e+18');
    expect(roundTrip('[1e2,1.0,2.50,-0.0,12345678901234567890]')).toBe('[100,1,2.5,-0,1.2345678901234567e+19]');
  });

  it('fails where PHP fails: a non-finite float, an unpaired surrogate', () => {
    expect(phpJsonEncode(Number.POSITIVE_INFINITY)).toBeNull();
    expect(roundTrip('[1e400]')).toBeNull();
    expect(phpJsonEncode('\ud800')).toBeNull();
  });
});

describe('phpValueOf', () => {
  it('holds JavaScript values as PHP code would: integral numbers as integers, objects in their order, undefined left out', () => {
    const value = phpValueOf({ type: 'object', minimum: 1, step: 0.5, list: ['a'], empty: {}, gone: undefined });
    expect(phpJsonEncode(value)).toBe('{"type":"object","minimum":1,"step":0.5,"list":["a"],"empty":[]}');
    expect(phpJsonEncode(phpValueOf([]))).toBe('[]');
  });
});

/** The flags the API writes options, metadata and call options with (see graphql/raw-json). */
const API = { unescapedSlashes: true, unescapedUnicode: true, preserveZeroFraction: true, partialOutputOnError: true } as const;
const apiRoundTrip = (text: string): string | null | undefined => {
  const decoded = phpJsonDecode(text);
  return decoded === undefined ? undefined : phpJsonEncode(decoded, API);
};

describe('phpJsonDecode: more of what PHP refuses and accepts', () => {
  it.each([
    ['whitespace only', ' \n'],
    ['a bare fraction', '.5'],
    ['a trailing point', '1.'],
    ['a plus sign', '+1'],
    ['hexadecimal', '0x10'],
    ['NaN', 'NaN'],
    ['an unquoted key', '{a:1}'],
    ['a comment', '[1] // x'],
    ['a byte order mark', '\uFEFF1'],
    ['a non-breaking space around the value', '\u00a01'],
    ['a raw tab in a string', '"a\tb"'],
    ['an unknown escape', '"\\a"'],
    ['a short \\u escape', '"\\u12"'],
    ['a high surrogate escape before a non-surrogate escape', '"\\ud800\\u0041"'],
    ['a reversed pair', '"\\udc00\\ud800"'],
    ['a raw unpaired surrogate', '"\ud800"'],
  ])('refuses %s', (_case, text) => {
    expect(phpJsonDecode(text)).toBeUndefined();
  });

  it('types integers beyond 64 bits and every fraction or exponent as floats, -0 as the int 0', () => {
    expect(phpJsonDecode('9007199254740993')).toBe(9007199254740993n);
    expect(phpJsonDecode('-9223372036854775809')).toBe(-(2 ** 63));
    expect(phpJsonDecode('0.0')).toBe(0);
    expect(Object.is(phpJsonDecode('-0.0'), -0)).toBe(true);
    expect(phpJsonDecode('1E+2')).toBe(100);
    expect(phpJsonDecode('1e400')).toBe(Number.POSITIVE_INFINITY);
  });

  it('reads escapes as PHP does', () => {
    expect(apiRoundTrip('"\\"\\\\\\/\\b\\f\\n\\r\\t\\u00e4\\ud83d\\ude00"')).toBe('"\\"\\\\/\\b\\f\\n\\r\\tä😀"');
  });
});

describe('phpIntegerKey (ZEND_HANDLE_NUMERIC_STR)', () => {
  it.each([
    ['0', 0n],
    ['5', 5n],
    ['-1', -1n],
    ['9223372036854775807', 9223372036854775807n],
    ['-9223372036854775808', -9223372036854775808n],
    ['9223372036854775808', null],
    ['05', null],
    ['-0', null],
    ['+1', null],
    ['1 ', null],
    ['', null],
    ['1.0', null],
  ])('%j is %p', (key, int) => {
    expect(phpIntegerKey(key)).toBe(int);
  });
});

describe('phpArrayMerge (array_merge)', () => {
  it('sets string keys in place and appends int keys renumbered from 0', () => {
    const base: PhpArray = new Map([['t', 1n], ['u', 2n]]);
    const merged = phpArrayMerge(base, phpJsonDecode('{"5":"x","t":3,"9":"y","05":"z","v":4}') as PhpArray);
    expect(phpJsonEncode(merged)).toBe('{"t":3,"u":2,"0":"x","1":"y","05":"z","v":4}');
    expect(phpJsonEncode(base)).toBe('{"t":1,"u":2}');
  });

  it('renumbers the int keys of the first array too, and appends a list', () => {
    expect(phpJsonEncode(phpArrayMerge(phpJsonDecode('{"5":"x"}') as PhpArray))).toBe('["x"]');
    expect(phpJsonEncode(phpArrayMerge(new Map([['a', 1n]]), phpJsonDecode('["b","c"]') as PhpArray))).toBe('{"a":1,"0":"b","1":"c"}');
  });
});

describe('phpJsonEncode with the API\'s flags', () => {
  it('keeps a zero fraction (JSON_PRESERVE_ZERO_FRACTION), so a float reads back as a float', () => {
    expect(apiRoundTrip('[0.0,-0.0,1.0,4096.0,1e2,1.5,0,1e25,0.00001,1e16]')).toBe('[0.0,-0.0,1.0,4096.0,100.0,1.5,0,1.0e+25,1.0e-5,10000000000000000.0]');
  });

  it('writes what JSON cannot carry as PHP\'s partial output does: INF and NAN as 0', () => {
    expect(apiRoundTrip('{"a":1e400,"b":-1e400}')).toBe('{"a":0,"b":0}');
    expect(phpJsonEncode(new Map([['a', '\ud800']]), API)).toBe('{"a":null}');
  });

  it('objectAtTop writes the outermost array as an object, an empty one as {}', () => {
    expect(phpJsonEncode(new Map(), { objectAtTop: true })).toBe('{}');
    expect(phpJsonEncode(phpJsonDecode('["a",[]]') as PhpArray, { objectAtTop: true })).toBe('{"0":"a","1":[]}');
    expect(phpJsonEncode('x', { objectAtTop: true })).toBe('"x"');
  });

  it('keeps key order and 64-bit integers', () => {
    expect(apiRoundTrip('{"b":2,"1":"a","seed":9007199254740993,"n":{"z":1,"10":2}}')).toBe('{"b":2,"1":"a","seed":9007199254740993,"n":{"z":1,"10":2}}');
  });
});

describe('plainValueOf', () => {
  it('gives numbers, arrays for lists and objects for other arrays', () => {
    expect(plainValueOf(phpJsonDecode('{"a":9007199254740991,"l":["x"],"o":{"1":"y"},"e":[]}') as PhpArray)).toEqual({ a: 9007199254740991, l: ['x'], o: { 1: 'y' }, e: {} });
  });

  it('keeps an integer beyond ±(2^53 − 1) a bigint, and a safe one a number', () => {
    const plain = plainValueOf(phpJsonDecode('{"seed":9007199254740993,"low":-9007199254740992,"max":9223372036854775807,"safe":9007199254740991,"negative":-9007199254740991,"l":[18446744073709551616,12345678901234567890123]}') as PhpArray) as Record<string, unknown>;
    expect(plain.seed).toBe(9007199254740993n);
    expect(plain.low).toBe(-9007199254740992n);
    expect(plain.max).toBe(9223372036854775807n);
    expect(plain.safe).toBe(9007199254740991);
    expect(plain.negative).toBe(-9007199254740991);
    // Beyond 64 bits PHP reads a float, and so does this module.
    expect(plain.l).toEqual([2 ** 64, Number('12345678901234567890123')]);
  });

  it('keeps a "__proto__" key a plain key', () => {
    const plain = plainValueOf(phpJsonDecode('{"__proto__":{"polluted":true}}') as PhpArray) as Record<string, unknown>;
    expect(Object.getPrototypeOf(plain)).toBe(Object.prototype);
    expect(Object.keys(plain)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
  });

  it('phpValueOf then plainValueOf gives the value back', () => {
    const value = { a: 1, b: 1.5, c: [true, null, 'x'], d: { e: 'f' } };
    expect(plainValueOf(phpValueOf(value))).toEqual(value);
  });
});

describe('plainJsonText', () => {
  it('writes a bigint as its digits, wherever it is', () => {
    const options = plainValueOf(phpJsonDecode('{"model":"m","seed":9007199254740993,"temperature":0.5,"n":{"ids":[9223372036854775807,-9223372036854775808,1]}}') as PhpArray);
    expect(plainJsonText(options)).toBe('{"model":"m","seed":9007199254740993,"temperature":0.5,"n":{"ids":[9223372036854775807,-9223372036854775808,1]}}');
    expect(plainJsonText(12n)).toBe('12');
    expect(plainJsonText([1n, 'x'])).toBe('[1,"x"]');
  });

  it('is JSON.stringify for a value without a bigint', () => {
    const value = { a: 'pw-bigint-1:2', b: [1, 2.5, null, true], c: { d: undefined, e: '\u2028"' } };
    expect(plainJsonText(value)).toBe(JSON.stringify(value));
  });

  it('leaves strings that look like numbers strings', () => {
    expect(plainJsonText({ seed: 9007199254740993n, text: '9007199254740993' })).toBe('{"seed":9007199254740993,"text":"9007199254740993"}');
  });

  it('reads back through phpJsonDecode with the same integers', () => {
    const text = '{"seed":9007199254740993,"list":[-9007199254740993]}';
    expect(phpJsonEncode(phpJsonDecode(plainJsonText(plainValueOf(phpJsonDecode(text) as PhpArray))) as PhpArray)).toBe(text);
  });

  it('still refuses a cycle', () => {
    const cyclic: Record<string, unknown> = { seed: 1n };
    cyclic.self = cyclic;
    expect(() => plainJsonText(cyclic)).toThrow(TypeError);
  });
});
