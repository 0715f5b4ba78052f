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

/** The first key an EDITOR may not change between `before` and `after`, or null when the write is the EDITOR's to make. */
export function adminOnlyOptionChanged(before: Record<string, unknown>, after: Record<string, unknown>): string | null {
  for (const key of new Set([...Object.keys(before), ...Object.keys(after)])) {
    if (EDITOR_OPTION_KEYS.includes(key)) continue;
    if (!(key in before) || !(key in after) || JSON.stringify(before[key]) !== JSON.stringify(after[key])) return key;
  }
  return null;
}
