/**
 * JSON text that a response carries byte for byte.
 *
 * A `JSON` scalar field may return a `RawJson` (the scalar passes it on
 * unchanged); every GraphQL answer this server writes is serialised with
 * `stringifyResponse`, which puts the text in verbatim. So values JavaScript
 * cannot hold exactly (integers beyond 2^53, `0.0` against `0`, PHP's key
 * order) reach the client as they were encoded (see shared/php-json).
 *
 * Anything serialised with plain `JSON.stringify` instead gets the parsed
 * text: the same JSON, with JavaScript's losses.
 */
import crypto from 'node:crypto';
import { phpJsonEncode, type PhpArray, type PhpJsonEncodeFlags } from '../shared/php-json';

/** Texts of the RawJson values met by the `stringifyResponse` call in progress (JSON.stringify is synchronous). */
let collected: string[] | null = null;

const NONCE = crypto.randomBytes(12).toString('hex');
const MARKER = `pw-raw-json-${NONCE}-`;
const QUOTED_MARKER = new RegExp(`"${MARKER}(\\d+)"`, 'g');

export class RawJson {
  /** `text` must be one valid JSON value; it is not checked here. */
  constructor(readonly text: string) {}

  toJSON(): unknown {
    if (collected === null) return JSON.parse(this.text);
    collected.push(this.text);
    return MARKER + String(collected.length - 1);
  }
}

/** `JSON.stringify(value)`, with every RawJson inside written as its text. */
export function stringifyResponse(value: unknown): string {
  const outer = collected;
  const texts: string[] = [];
  collected = texts;
  let json: string;
  try {
    json = JSON.stringify(value);
  } finally {
    collected = outer;
  }
  if (texts.length === 0) return json;
  return json.replace(QUOTED_MARKER, (_marker, index: string) => texts[Number(index)]);
}

/**
 * How the API writes PHP values: `json_encode($value, JSON_UNESCAPED_SLASHES |
 * JSON_UNESCAPED_UNICODE | JSON_PRESERVE_ZERO_FRACTION |
 * JSON_PARTIAL_OUTPUT_ON_ERROR)`. The zero fraction keeps a float a float for
 * the reader (nr_llm's own `json_encode` calls would write 0.0 as `0`); the
 * partial output writes INF as `0`, so an odd row never breaks a read.
 */
export const API_JSON_FLAGS: PhpJsonEncodeFlags = { unescapedSlashes: true, unescapedUnicode: true, preserveZeroFraction: true, partialOutputOnError: true };

/** A PHP array as a `JSON` field writes it: always a JSON object, PHP's values and key order (shared/php-json). */
export function phpObjectJson(array: PhpArray): RawJson {
  return new RawJson(phpJsonEncode(array, { ...API_JSON_FLAGS, objectAtTop: true }) ?? '{}');
}
