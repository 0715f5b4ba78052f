import { phpJsonDecode, phpJsonEncode, type PhpArray, type PhpJsonValue } from '../shared/php-json';

/**
 * Which keys of a configuration's `options` JSON an EDITOR may set.
 *
 * `options` is merged over the typed parameters of every call (call-options),
 * so a key there can override what an ADMIN chose: `options.model` would
 * call another model than the configuration's, at another price. EDITORs
 * therefore set only generation parameters, listed here; every other key is
 * the ADMIN's: an EDITOR's write must leave it exactly as stored (not add,
 * change or remove it). ADMINs set any key.
 */
export const EDITOR_OPTION_KEYS: readonly string[] = [
  'temperature',
  'top_p',
  'top_k',
  'max_tokens',
  'max_completion_tokens',
  'frequency_penalty',
  'presence_penalty',
  'stop',
  'seed',
  'response_format',
  'reasoning_effort',
];

/**
 * The `options` column as the EDITOR check reads it: the entries of a JSON
 * object, with PHP's values (an integer beyond 2^53 keeps its digits, `1.0`
 * stays a float); anything else (no text, invalid JSON, a list, a scalar)
 * reads as no entries.
 */
export function optionEntries(text: string | null | undefined): PhpArray {
  if (text === null || text === undefined || !/^[ \t\n\r]*\{/.test(text)) return new Map();
  const decoded = phpJsonDecode(text);
  return decoded instanceof Map ? decoded : new Map();
}

/**
 * The first key an EDITOR may not change between `before` and `after`, or
 * null when the write is the EDITOR's to make. Values are compared as
 * nr_llm sends them (`phpJsonEncode`), so `9007199254740993` and
 * `9007199254740992` are two values, as they are on the wire.
 */
export function adminOnlyOptionChanged(before: PhpArray, after: PhpArray): string | null {
  for (const key of new Set([...before.keys(), ...after.keys()])) {
    if (EDITOR_OPTION_KEYS.includes(key)) continue;
    const was = before.get(key);
    const is = after.get(key);
    if (was === undefined || is === undefined || exactText(was) !== exactText(is)) return key;
  }
  return null;
}

function exactText(value: PhpJsonValue): string | null {
  return phpJsonEncode(value, { preserveZeroFraction: true, unescapedSlashes: true, unescapedUnicode: true });
}
