/**
 * Snippet metadata and other JSON-object columns (behaviour.md §3.1).
 *
 * Rows may have been written by TYPO3's FormEngine, by hand or by other
 * programs, so reading is forgiving: a bad value never breaks a consumer, it
 * reads as `{}`. Writing through the API is strict, so this service never
 * stores a value that another reader would have to forgive.
 */

import { MAX_INPUT_DEPTH } from '../shared/input-depth';

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
 * `PromptSnippet::getMetadataArray` does; reading never fails and `{}`
 * stands for "no metadata":
 * - text empty after PHP's trim: `{}`;
 * - text PHP's `json_decode` refuses: `{}`; besides invalid JSON that is an
 *   unpaired UTF-16 surrogate escape (`"\ud800"`) and nesting deeper than
 *   512 levels, both of which JavaScript's parser would accept;
 * - a scalar, or a PHP list (an array, `{}`, or an object whose keys are
 *   exactly "0", "1", … in order, such as `{"0":"x"}`): `{}`;
 * - otherwise the decoded object.
 */
export function readMetadata(text: string | null | undefined): JsonObject {
  // eslint-disable-next-line no-control-regex -- PHP's trim list includes NUL and vertical tab
  if (text === null || text === undefined || text.replace(/^[ \t\n\r\0\x0B]+|[ \t\n\r\0\x0B]+$/g, '') === '') {
    return {};
  }
  if (!phpCanDecode(text)) {
    return {};
  }
  const decoded = readJsonObject(text);
  return isPhpList(decoded) ? {} : decoded;
}

/** PHP's default `json_decode` depth. */
const PHP_JSON_MAX_DEPTH = 512;

/**
 * Whether PHP's `json_decode` accepts what JavaScript's parser accepts here:
 * it refuses an unpaired surrogate escape and nesting deeper than 512 levels.
 * (Invalid JSON is refused by both and left to the parser.)
 */
function phpCanDecode(text: string): boolean {
  let depth = 0;
  let inString = false;
  for (let index = 0; index < text.length; index++) {
    const character = text[index];
    if (inString) {
      if (character === '"') inString = false;
      else if (character === '\\') {
        if (text[index + 1] === 'u') {
          const code = parseInt(text.slice(index + 2, index + 6), 16);
          if (code >= 0xdc00 && code <= 0xdfff) return false;
          if (code >= 0xd800 && code <= 0xdbff) {
            const next = text.slice(index + 6, index + 8) === '\\u' ? parseInt(text.slice(index + 8, index + 12), 16) : NaN;
            if (!(next >= 0xdc00 && next <= 0xdfff)) return false;
            index += 6;
          }
          index += 5;
        } else {
          index += 1;
        }
      }
      continue;
    }
    if (character === '"') inString = true;
    else if (character === '{' || character === '[') {
      depth += 1;
      if (depth > PHP_JSON_MAX_DEPTH) return false;
    } else if (character === '}' || character === ']') depth -= 1;
  }
  return true;
}

/**
 * A decoded object PHP would hold as a list: no keys, or exactly "0", "1", …
 * (JavaScript lists integer keys in ascending order whatever the text's order,
 * so `{"1":"a","0":"b"}`, which PHP keeps, reads as a list here.)
 */
function isPhpList(object: JsonObject): boolean {
  return Object.keys(object).every((key, index) => key === String(index));
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
 *
 * Refused with a message: `null`, `undefined`, arrays, scalars, strings that
 * do not parse to an object, and objects holding anything JSON cannot carry
 * unchanged (`undefined`, functions, non-finite numbers, class instances such
 * as `Date`, cycles). Whether an absent field means "keep" or "clear" is the
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
  return { ok: true, json: JSON.stringify(candidate) };
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
