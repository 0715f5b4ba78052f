import { isPhpList, phpFloat, phpJsonDecode, phpJsonEncode, phpValueOf, type PhpArray } from './php-json';

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
