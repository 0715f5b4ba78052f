/**
 * Snippet metadata and other JSON-object columns (behaviour.md §3.1).
 *
 * Rows may have been written by TYPO3's FormEngine, by hand or by other
 * programs, so reading is forgiving: a bad value never breaks a consumer, it
 * reads as `{}`. Writing through the API is strict, so this service never
 * stores a value that another reader would have to forgive.
 */

import { MAX_INPUT_DEPTH } from '../shared/input-depth';
import { isPhpList, phpJsonDecode, type PhpArray } from '../shared/php-json';

/** A JSON object as decoded from a column: string keys, JSON values. */
export type JsonObject = Record<string, unknown>;

/**
 * Reads a text column that should hold a JSON object.
 *
 * Never throws. `null`, empty or whitespace-only text, invalid or truncated
 * JSON, a JSON scalar, `null`, an array and `{}` all read as a fresh empty
 * object; otherwise the decoded object is returned.
 */
export function readJsonObject(text: string | null | undefined): JsonObject {
  if (text === null || text === undefined) {
    return {};
  }
  let decoded: unknown;
  try {
    decoded = JSON.parse(text);
  } catch {
    return {};
  }
  if (!isJsonObject(decoded)) {
    return {};
  }
  return decoded;
}

/**
 * Reads a snippet's `metadata` column as nr_llm's
 * `PromptSnippet::getMetadataArray` does, with PHP's values and key order
 * (see shared/php-json); reading never fails and an empty array stands for
 * "no metadata":
 * - text empty after PHP's trim: empty;
 * - text PHP's `json_decode` refuses: empty; besides invalid JSON that is an
 *   unpaired UTF-16 surrogate escape (`"\ud800"`) and nesting deeper than
 *   512 levels, both of which JavaScript's parser would accept;
 * - a scalar, or a PHP list (an array, `{}`, or an object whose keys are
 *   exactly "0", "1", … in this order, such as `{"0":"x"}`): empty;
 * - otherwise the decoded array, keys in the text's order (`{"b":2,"1":"a"}`
 *   stays b, 1; `{"1":"a","0":"b"}` is no list and stays as it is).
 *
 * `phpObjectJson(readMetadata(text))` (graphql/raw-json) is its JSON form.
 */
export function readMetadata(text: string | null | undefined): PhpArray {
  // eslint-disable-next-line no-control-regex -- PHP's trim list includes NUL and vertical tab
  if (text === null || text === undefined || text.replace(/^[ \t\n\r\0\x0B]+|[ \t\n\r\0\x0B]+$/g, '') === '') {
    return new Map();
  }
  const decoded = phpJsonDecode(text);
  return decoded instanceof Map && !isPhpList(decoded) ? decoded : new Map();
}

/** Result of `parseMetadataForWrite`: the JSON text to store, or why the value is refused. */
export type MetadataWriteResult = { ok: true; json: string } | { ok: false; message: string };

const METADATA_MUST_BE_OBJECT = 'Metadata must be a JSON object, for example {"voice": "nova"}.';

/**
 * Checks metadata sent through the API and gives the JSON text to store.
 *
 * Accepted: a plain object whose values are JSON values all the way down
 * (strings, finite numbers, booleans, `null`, arrays, plain objects), and a
 * string holding the JSON text of such an object — a client that sends the
 * column's own format is not refused. `{}` is accepted and stored as `{}`.
 * An object is stored as `JSON.stringify` writes it; a string is stored as
 * given, only without the whitespace between tokens, so what JavaScript
 * cannot hold (integers beyond 2^53, `0.0`, the order of integer-like keys)
 * reaches the column unchanged.
 *
 * Refused with a message: `null`, `undefined`, arrays, scalars, strings that
 * do not parse to an object, objects holding anything JSON cannot carry
 * unchanged (`undefined`, functions, non-finite numbers, class instances such
 * as `Date`, cycles), and JSON that PHP's `json_decode` refuses where
 * JavaScript's parser does not (an unpaired surrogate escape): nr_llm would
 * read it as empty. Whether an absent field means "keep" or "clear" is the
 * caller's decision, not this function's.
 */
export function parseMetadataForWrite(value: unknown): MetadataWriteResult {
  let candidate: unknown = value;
  if (typeof value === 'string') {
    try {
      candidate = JSON.parse(value);
    } catch {
      return { ok: false, message: METADATA_MUST_BE_OBJECT + ' The text given is not valid JSON.' };
    }
  }
  if (!isJsonObject(candidate)) {
    return { ok: false, message: METADATA_MUST_BE_OBJECT };
  }
  const problem = findNonJsonValue(candidate, 'metadata', new Set(), 0);
  if (problem !== null) {
    return { ok: false, message: `${METADATA_MUST_BE_OBJECT} ${problem}` };
  }
  const json = typeof value === 'string' ? compactJsonText(value) : JSON.stringify(candidate);
  if (phpJsonDecode(json) === undefined) {
    return { ok: false, message: `${METADATA_MUST_BE_OBJECT} PHP (nr_llm) cannot decode it: a text holds an unpaired UTF-16 surrogate.` };
  }
  return { ok: true, json };
}

/** Valid JSON text without the whitespace between its tokens; everything else, strings included, as given. */
function compactJsonText(text: string): string {
  let out = '';
  let from = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const character = text[index];
    if (inString) {
      if (character === '\\') index += 1;
      else if (character === '"') inString = false;
    } else if (character === '"') {
      inString = true;
    } else if (character === ' ' || character === '\t' || character === '\n' || character === '\r') {
      out += text.slice(from, index);
      from = index + 1;
    }
  }
  return out + text.slice(from);
}

/** A plain object (not an array, not a class instance, not `null`). */
function isJsonObject(value: unknown): value is JsonObject {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return false;
  }
  const prototype: unknown = Object.getPrototypeOf(value);
  return prototype === Object.prototype || prototype === null;
}

/**
 * Describes the first value under `value` that JSON cannot represent as
 * given, or `null` when everything is a JSON value. `path` names the place
 * for the message; `ancestors` detects cycles.
 */
function findNonJsonValue(value: unknown, path: string, ancestors: Set<object>, depth: number): string | null {
  switch (typeof value) {
    case 'string':
    case 'boolean':
      return null;
    case 'number':
      return Number.isFinite(value) ? null : `${path} is not a finite number.`;
    case 'object': {
      if (value === null) {
        return null;
      }
      if (ancestors.has(value)) {
        return `${path} refers to itself.`;
      }
      if (depth >= MAX_INPUT_DEPTH) {
        return `${path} is nested more than ${MAX_INPUT_DEPTH} levels deep.`;
      }
      if (!Array.isArray(value) && !isJsonObject(value)) {
        return `${path} is not a JSON value.`;
      }
      ancestors.add(value);
      const entries: [string, unknown][] = Array.isArray(value)
        ? value.map((item, index) => [`${path}[${index}]`, item])
        : Object.entries(value).map(([key, item]) => [`${path}.${key}`, item]);
      for (const [childPath, child] of entries) {
        const problem = findNonJsonValue(child, childPath, ancestors, depth + 1);
        if (problem !== null) {
          return problem;
        }
      }
      ancestors.delete(value);
      return null;
    }
    case 'undefined':
    case 'function':
    case 'symbol':
    case 'bigint':
      return `${path} is not a JSON value.`;
  }
}
