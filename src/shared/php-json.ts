/**
 * JSON as PHP's `json_decode(…, true)`, `array_merge` and `json_encode` see
 * it, for the places where this service must produce nr_llm's exact values
 * and bytes: the context window's byte counts, configurations' `options`,
 * snippets' `metadata` and the call options built from them. One module, so
 * one rule.
 *
 * PHP differs from JavaScript in ways that change values and bytes:
 * - a decoded object is an ordered array: its keys keep the text's order
 *   (JavaScript lists integer-like keys first), and one whose keys are
 *   exactly "0", "1", … in order is a list, encoded as `[…]`;
 * - an array key that reads as a canonical 64-bit integer is an int key
 *   (`"5"`, not `"05"` or `"-0"`): `array_merge` renumbers and appends it;
 * - an integer literal within 64 bits stays an integer (JavaScript rounds
 *   above 2^53); a longer one, or one with a fraction or exponent, is a float
 *   (`0` is an int, `0.0` a float: `is_int` tells them apart);
 * - floats are written with the shortest digits that read back, in plain
 *   notation unless the decimal exponent is below −4 or above 17, and
 *   without a zero fraction unless JSON_PRESERVE_ZERO_FRACTION is given
 *   (`1e2` → `100` or `100.0`, `1e25` → `1.0e+25`);
 * - by default `/` is escaped as `\/` and every non-ASCII character as
 *   `\uXXXX` (lower-case hex, two escapes for a character beyond U+FFFF);
 *   with "unescaped unicode" U+2028 and U+2029 are still escaped;
 * - decoding refuses an unpaired UTF-16 surrogate escape and nesting deeper
 *   than 512 levels.
 *
 * Pure functions, no I/O.
 */
import crypto from 'node:crypto';

/**
 * A PHP array: ordered keys (as strings), a list when they are "0", "1", … in
 * order. A key that reads as a canonical int (`phpIntegerKey`) is PHP's int
 * key of that value; `"5"` and the int 5 are one key in PHP, so the string is
 * the key here. Values are shared, not copied: treat an array you did not
 * build as read-only.
 */
export type PhpArray = Map<string, PhpJsonValue>;

/**
 * A decoded value: `bigint` is a PHP integer, `number` a PHP float, `Map` a
 * PHP array.
 */
export type PhpJsonValue = null | boolean | string | bigint | number | PhpArray;

/** PHP's default `json_decode` depth. */
export const PHP_JSON_MAX_DEPTH = 512;

const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

class Refused extends Error {}

/**
 * Decodes `text` as `json_decode($text, true)` does; `undefined` when PHP
 * refuses it (invalid JSON, an unpaired surrogate escape, a control character
 * in a string, nesting deeper than 512 levels). `null` is JSON `null`.
 */
export function phpJsonDecode(text: string): PhpJsonValue | undefined {
  const parser = new Parser(text);
  try {
    parser.skipWhitespace();
    const value = parser.value(0);
    parser.skipWhitespace();
    if (parser.position !== text.length) return undefined;
    return value;
  } catch (error) {
    if (error instanceof Refused) return undefined;
    throw error;
  }
}

class Parser {
  position = 0;

  constructor(private readonly text: string) {}

  skipWhitespace(): void {
    for (;;) {
      const character = this.text[this.position];
      if (character === ' ' || character === '\t' || character === '\n' || character === '\r') this.position += 1;
      else return;
    }
  }

  value(depth: number): PhpJsonValue {
    const character = this.text[this.position];
    switch (character) {
      case '{':
        return this.object(depth + 1);
      case '[':
        return this.list(depth + 1);
      case '"':
        return this.string();
      case 't':
        return this.literal('true', true);
      case 'f':
        return this.literal('false', false);
      case 'n':
        return this.literal('null', null);
      default:
        return this.number();
    }
  }

  private literal<T>(word: string, value: T): T {
    if (!this.text.startsWith(word, this.position)) throw new Refused();
    this.position += word.length;
    return value;
  }

  private object(depth: number): PhpArray {
    if (depth > PHP_JSON_MAX_DEPTH) throw new Refused();
    this.position += 1;
    const entries: PhpArray = new Map();
    this.skipWhitespace();
    if (this.text[this.position] === '}') {
      this.position += 1;
      return entries;
    }
    for (;;) {
      this.skipWhitespace();
      if (this.text[this.position] !== '"') throw new Refused();
      const key = this.string();
      this.skipWhitespace();
      if (this.text[this.position] !== ':') throw new Refused();
      this.position += 1;
      this.skipWhitespace();
      // A repeated key keeps its first place and takes the last value, as in PHP.
      entries.set(key, this.value(depth));
      this.skipWhitespace();
      const next = this.text[this.position];
      this.position += 1;
      if (next === '}') return entries;
      if (next !== ',') throw new Refused();
    }
  }

  private list(depth: number): PhpArray {
    if (depth > PHP_JSON_MAX_DEPTH) throw new Refused();
    this.position += 1;
    const entries: PhpArray = new Map();
    this.skipWhitespace();
    if (this.text[this.position] === ']') {
      this.position += 1;
      return entries;
    }
    for (;;) {
      this.skipWhitespace();
      entries.set(String(entries.size), this.value(depth));
      this.skipWhitespace();
      const next = this.text[this.position];
      this.position += 1;
      if (next === ']') return entries;
      if (next !== ',') throw new Refused();
    }
  }

  private string(): string {
    this.position += 1;
    let result = '';
    for (;;) {
      const code = this.text.charCodeAt(this.position);
      if (Number.isNaN(code) || code < 0x20) throw new Refused();
      if (code === 0x22) {
        this.position += 1;
        return result;
      }
      if (code === 0x5c) {
        result += this.escape();
        continue;
      }
      if (code >= 0xd800 && code <= 0xdbff) {
        // A raw surrogate pair is one character of valid UTF-8; a lone one is not UTF-8 at all.
        const low = this.text.charCodeAt(this.position + 1);
        if (!(low >= 0xdc00 && low <= 0xdfff)) throw new Refused();
        result += this.text.slice(this.position, this.position + 2);
        this.position += 2;
        continue;
      }
      if (code >= 0xdc00 && code <= 0xdfff) throw new Refused();
      result += this.text[this.position];
      this.position += 1;
    }
  }

  private escape(): string {
    const kind = this.text[this.position + 1];
    this.position += 2;
    switch (kind) {
      case '"':
        return '"';
      case '\\':
        return '\\';
      case '/':
        return '/';
      case 'b':
        return '\b';
      case 'f':
        return '\f';
      case 'n':
        return '\n';
      case 'r':
        return '\r';
      case 't':
        return '\t';
      case 'u': {
        const high = this.hex4();
        if (high >= 0xdc00 && high <= 0xdfff) throw new Refused();
        if (high < 0xd800 || high > 0xdbff) return String.fromCharCode(high);
        if (this.text[this.position] !== '\\' || this.text[this.position + 1] !== 'u') throw new Refused();
        this.position += 2;
        const low = this.hex4();
        if (low < 0xdc00 || low > 0xdfff) throw new Refused();
        return String.fromCharCode(high, low);
      }
      default:
        throw new Refused();
    }
  }

  private hex4(): number {
    const digits = this.text.slice(this.position, this.position + 4);
    if (!/^[0-9a-fA-F]{4}$/.test(digits)) throw new Refused();
    this.position += 4;
    return parseInt(digits, 16);
  }

  private number(): bigint | number {
    NUMBER.lastIndex = this.position;
    const match = NUMBER.exec(this.text);
    if (match === null) throw new Refused();
    const literal = match[0];
    this.position += literal.length;
    if (match[1] === undefined && match[2] === undefined) {
      const integer = BigInt(literal);
      if (integer >= INT64_MIN && integer <= INT64_MAX) return integer;
    }
    return Number(literal);
  }
}

const NUMBER = /-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?/y;

/**
 * A JavaScript value as PHP code would hold it: objects become arrays in
 * their key order (entries whose value is `undefined` are left out, as
 * `JSON.stringify` leaves them out), integral numbers within 64 bits become
 * integers, other numbers floats.
 */
export function phpValueOf(value: unknown): PhpJsonValue {
  if (value === null || value === undefined) return null;
  switch (typeof value) {
    case 'boolean':
    case 'string':
    case 'bigint':
      return value;
    case 'number':
      if (Number.isInteger(value) && Math.abs(value) < 2 ** 63) return BigInt(value);
      return value;
    case 'object': {
      const entries: PhpArray = new Map();
      if (Array.isArray(value)) {
        value.forEach((item, index) => entries.set(String(index), phpValueOf(item)));
      } else if (value instanceof Map) {
        for (const [key, item] of value as Map<unknown, unknown>) entries.set(String(key), phpValueOf(item));
      } else {
        for (const [key, item] of Object.entries(value)) {
          if (item !== undefined && typeof item !== 'function' && typeof item !== 'symbol') entries.set(key, phpValueOf(item));
        }
      }
      return entries;
    }
    default:
      return null;
  }
}

export interface PhpJsonEncodeFlags {
  /** `JSON_UNESCAPED_SLASHES`. */
  unescapedSlashes?: boolean;
  /** `JSON_UNESCAPED_UNICODE` (U+2028 and U+2029 are still escaped). */
  unescapedUnicode?: boolean;
  /** `JSON_PRESERVE_ZERO_FRACTION`: a float without a fraction keeps `.0` (`0.0`, `4096.0`), so it reads back as a float. */
  preserveZeroFraction?: boolean;
  /** `JSON_PARTIAL_OUTPUT_ON_ERROR`: a non-finite float is written `0` and a string that is not valid UTF-8 `null`, instead of failing. */
  partialOutputOnError?: boolean;
  /** The outermost array is written as an object even when it is a list (`{}` for an empty one): `JSON_FORCE_OBJECT` for that level only. */
  objectAtTop?: boolean;
}

/**
 * `json_encode($value, $flags)`; `null` where PHP fails (a non-finite float,
 * or a string that is not valid UTF-8 (an unpaired surrogate here)) unless
 * `partialOutputOnError` is given.
 */
export function phpJsonEncode(value: PhpJsonValue, flags: PhpJsonEncodeFlags = {}): string | null {
  try {
    if (flags.objectAtTop === true && value instanceof Map) return encodeObject(value, flags);
    return encode(value, flags);
  } catch (error) {
    if (error instanceof Refused) return null;
    throw error;
  }
}

/**
 * How this service writes the PHP arrays it hands out or stores (the `JSON`
 * fields for options, metadata and call options; a release's call options):
 * `json_encode($array, JSON_UNESCAPED_SLASHES | JSON_UNESCAPED_UNICODE |
 * JSON_PRESERVE_ZERO_FRACTION | JSON_PARTIAL_OUTPUT_ON_ERROR)`, the
 * outermost array always as an object. The zero fraction keeps a float a
 * float for the reader (nr_llm's own `json_encode` calls pass no
 * JSON_PRESERVE_ZERO_FRACTION and write 0.0 as `0`); the partial output
 * writes INF as `0`, so an odd row never breaks a read.
 */
export function phpObjectText(array: PhpArray): string {
  return phpJsonEncode(array, { unescapedSlashes: true, unescapedUnicode: true, preserveZeroFraction: true, partialOutputOnError: true, objectAtTop: true }) ?? '{}';
}

/**
 * The int a string key is in a PHP array (`ZEND_HANDLE_NUMERIC_STR`), or
 * null when it stays a string: decimal, no leading zero, no `+`, not `-0`,
 * within 64 bits. `"5"` is the int 5; `"05"`, `"-0"`, `"5 "` and
 * `"9223372036854775808"` stay strings.
 */
export function phpIntegerKey(key: string): bigint | null {
  if (key.length > 20 || !/^(?:0|-?[1-9][0-9]*)$/.test(key)) return null;
  const value = BigInt(key);
  return value >= INT64_MIN && value <= INT64_MAX ? value : null;
}

/**
 * `array_merge($a, $b, …)`: string keys are set in turn (a later value
 * replaces an earlier one where it stands), int keys are appended and
 * renumbered from 0 — `array_merge(['t' => 1], [5 => 'x'])` is
 * `['t' => 1, 0 => 'x']`. A new array; the arguments are not changed.
 */
export function phpArrayMerge(...arrays: PhpArray[]): PhpArray {
  const merged: PhpArray = new Map();
  let next = 0;
  for (const array of arrays) {
    for (const [key, value] of array) {
      if (phpIntegerKey(key) === null) merged.set(key, value);
      else merged.set(String(next++), value);
    }
  }
  return merged;
}

/**
 * The plain JavaScript form of a PHP value, for code that needs one (request
 * bodies, comparisons): an integer within ±(2^53 − 1) becomes a number, a
 * larger one stays a `bigint` so that it keeps its digits
 * (`{"seed":9007199254740993}`); a list becomes an array, any other array an
 * object (where integer-like keys come first, as JavaScript orders them).
 * `JSON.stringify` refuses a `bigint`: write plain values with
 * `plainJsonText`. Key order and the float/int distinction of whole floats
 * are lost; the exact form is `phpJsonEncode`.
 */
export function plainValueOf(value: PhpJsonValue): unknown {
  if (typeof value === 'bigint') return plainInteger(value);
  if (!(value instanceof Map)) return value;
  if (value.size > 0 && isPhpList(value)) return [...value.values()].map(plainValueOf);
  const object: Record<string, unknown> = {};
  for (const [key, item] of value) {
    // defineProperty: a "__proto__" key stays a plain key.
    Object.defineProperty(object, key, { value: plainValueOf(item), enumerable: true, writable: true, configurable: true });
  }
  return object;
}

const MAX_SAFE = BigInt(Number.MAX_SAFE_INTEGER);

/** A PHP integer as a plain value: a number when that holds it exactly, else the `bigint` itself. */
export function plainInteger(value: bigint): number | bigint {
  return value <= MAX_SAFE && value >= -MAX_SAFE ? Number(value) : value;
}

const BIGINT_MARKER = `pw-bigint-${crypto.randomBytes(12).toString('hex')}:`;
const QUOTED_BIGINT = new RegExp(`"${BIGINT_MARKER}(-?[0-9]+)"`, 'g');

/**
 * `JSON.stringify(value)` for plain values that may hold `bigint`s
 * (`plainValueOf`): a `bigint` is written as its digits, a JSON number
 * (Node 20 has no `JSON.rawJSON`). The one serializer for what carries call
 * options: provider request bodies and the suspended state of a run. A
 * value without a `bigint` costs one `JSON.stringify`; one with a `bigint`
 * a second pass.
 */
export function plainJsonText(value: unknown): string {
  try {
    return JSON.stringify(value);
  } catch (error) {
    // JSON.stringify throws a TypeError on a bigint; anything else it throws for (a cycle) throws again below.
    if (!(error instanceof TypeError)) throw error;
  }
  // The marker holds a per-process random part, so no string of the value can read as one.
  return JSON.stringify(value, (_key, item: unknown) => (typeof item === 'bigint' ? BIGINT_MARKER + item.toString() : item)).replace(QUOTED_BIGINT, '$1');
}

/** Whether PHP encodes the array as a list: its keys are exactly "0", "1", … in order. */
export function isPhpList(array: PhpArray): boolean {
  let index = 0;
  for (const key of array.keys()) {
    if (key !== String(index)) return false;
    index += 1;
  }
  return true;
}

function encode(value: PhpJsonValue, flags: PhpJsonEncodeFlags): string {
  if (value === null) return 'null';
  switch (typeof value) {
    case 'boolean':
      return value ? 'true' : 'false';
    case 'bigint':
      return value.toString();
    case 'number': {
      if (!Number.isFinite(value) && flags.partialOutputOnError === true) return '0';
      const text = phpFloat(value);
      return flags.preserveZeroFraction === true && !text.includes('.') ? `${text}.0` : text;
    }
    case 'string':
      try {
        return encodeString(value, flags);
      } catch (error) {
        if (error instanceof Refused && flags.partialOutputOnError === true) return 'null';
        throw error;
      }
    default: {
      if (isPhpList(value)) {
        return `[${[...value.values()].map((item) => encode(item, flags)).join(',')}]`;
      }
      return encodeObject(value, flags);
    }
  }
}

function encodeObject(value: PhpArray, flags: PhpJsonEncodeFlags): string {
  return `{${[...value].map(([key, item]) => `${encode(key, flags)}:${encode(item, flags)}`).join(',')}}`;
}

const HEX = '0123456789abcdef';

function unicodeEscape(code: number): string {
  return `\\u${HEX[(code >> 12) & 15]}${HEX[(code >> 8) & 15]}${HEX[(code >> 4) & 15]}${HEX[code & 15]}`;
}

function encodeString(text: string, flags: PhpJsonEncodeFlags): string {
  let result = '"';
  for (let index = 0; index < text.length; index += 1) {
    const code = text.charCodeAt(index);
    if (code >= 0xd800 && code <= 0xdbff) {
      const low = text.charCodeAt(index + 1);
      if (!(low >= 0xdc00 && low <= 0xdfff)) throw new Refused();
      result += flags.unescapedUnicode === true ? text.slice(index, index + 2) : unicodeEscape(code) + unicodeEscape(low);
      index += 1;
      continue;
    }
    if (code >= 0xdc00 && code <= 0xdfff) throw new Refused();
    switch (code) {
      case 0x22:
        result += '\\"';
        continue;
      case 0x5c:
        result += '\\\\';
        continue;
      case 0x2f:
        result += flags.unescapedSlashes === true ? '/' : '\\/';
        continue;
      case 0x08:
        result += '\\b';
        continue;
      case 0x0c:
        result += '\\f';
        continue;
      case 0x0a:
        result += '\\n';
        continue;
      case 0x0d:
        result += '\\r';
        continue;
      case 0x09:
        result += '\\t';
        continue;
    }
    if (code < 0x20) result += unicodeEscape(code);
    else if (code < 0x80) result += text[index];
    else if (flags.unescapedUnicode !== true || code === 0x2028 || code === 0x2029) result += unicodeEscape(code);
    else result += text[index];
  }
  return result + '"';
}

/**
 * A float as PHP writes it with `serialize_precision = -1`: the shortest
 * digits that read back; plain notation unless the decimal point would sit
 * more than 3 places left of the first digit or more than 17 right of it;
 * no `.0` on an integral value; the exponential form always has a fraction
 * (`1.0e+25`, `1.5e-7`).
 */
export function phpFloat(value: number): string {
  if (!Number.isFinite(value)) throw new Refused();
  if (value === 0) return Object.is(value, -0) ? '-0' : '0';
  const sign = value < 0 ? '-' : '';
  // toExponential() without an argument gives the shortest round-trip digits.
  const [mantissa, exponentText] = Math.abs(value).toExponential().split('e') as [string, string];
  const digits = mantissa.replace('.', '');
  // The decimal point sits `decimalPoint` places right of the first digit's left edge: 0.d1d2… × 10^decimalPoint.
  const decimalPoint = Number(exponentText) + 1;
  if (decimalPoint < -3 || decimalPoint > 17) {
    const exponent = decimalPoint - 1;
    const fraction = digits.length > 1 ? digits.slice(1) : '0';
    return `${sign}${digits[0]}.${fraction}e${exponent < 0 ? '-' : '+'}${Math.abs(exponent)}`;
  }
  if (decimalPoint <= 0) return `${sign}0.${'0'.repeat(-decimalPoint)}${digits}`;
  if (digits.length <= decimalPoint) return `${sign}${digits}${'0'.repeat(decimalPoint - digits.length)}`;
  return `${sign}${digits.slice(0, decimalPoint)}.${digits.slice(decimalPoint)}`;
}
