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
import { phpObjectText, type PhpArray } from '../shared/php-json';

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

/** A PHP array as a `JSON` field writes it: always a JSON object, PHP's values and key order (`phpObjectText`). */
export function phpObjectJson(array: PhpArray): RawJson {
  return new RawJson(phpObjectText(array));
}
