import type { PhpJsonValue } from '../shared/php-json';
import { phpObjectJson, RawJson, stringifyResponse } from './raw-json';

describe('stringifyResponse', () => {
  it('writes a RawJson as its text, wherever it stands', () => {
    const result = { data: { a: new RawJson('{"seed":9007199254740993,"b":2,"1":"a"}'), list: [new RawJson('0.0'), 'x'] } };
    expect(stringifyResponse(result)).toBe('{"data":{"a":{"seed":9007199254740993,"b":2,"1":"a"},"list":[0.0,"x"]}}');
  });

  it('is JSON.stringify for everything else', () => {
    const value = { a: 'pw-raw-json-0', b: [1, null, { c: '"' }], d: undefined };
    expect(stringifyResponse(value)).toBe(JSON.stringify(value));
  });

  it('plain JSON.stringify gets the parsed value (JavaScript\'s losses included)', () => {
    expect(JSON.stringify({ a: new RawJson('{"b":2,"1":"a"}') })).toBe('{"a":{"1":"a","b":2}}');
  });

  it('phpObjectJson writes a PHP array as an object, empty included, with a zero fraction kept and slashes and non-ASCII unescaped', () => {
    expect(phpObjectJson(new Map()).text).toBe('{}');
    expect(phpObjectJson(new Map([['0', 'a']])).text).toBe('{"0":"a"}');
    expect(phpObjectJson(new Map<string, PhpJsonValue>([['t', 0], ['u', 'ä/b'], ['i', Number.POSITIVE_INFINITY]])).text).toBe('{"t":0.0,"u":"ä/b","i":0}');
  });
});
