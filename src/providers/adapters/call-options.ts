/**
 * Call options (behaviour.md §5) as the adapters read them. The base options
 * are always present in a configuration's call, so their neutral values
 * (`top_p` 1, penalties 0) are treated as "not asked for" and not sent:
 * several models reject parameters they do not support even at their neutral
 * value, and the warning for an unsupported setting should mean something.
 */
import type { CallOptions } from './types';

/** Keys every adapter handles itself, or that are not for the provider at all. */
const HANDLED_KEYS: ReadonlySet<string> = new Set([
  'model',
  'temperature',
  'top_p',
  'frequency_penalty',
  'presence_penalty',
  'max_tokens',
  'timeout',
  'captureRaw',
  // The loop turns the system prompt into message 0 (behaviour.md §8); the key only documents it.
  'system_prompt',
  // Read by `jsonOutputOf`; each adapter writes its own JSON mode.
  'response_schema',
]);

/** What a call asks of the answer's form: JSON (nr_llm's `response_format: "json"`), perhaps to a schema. */
export interface JsonOutput {
  /** The JSON Schema the answer should match; null: any JSON. */
  schema: Record<string, unknown> | null;
}

/**
 * nr_llm's `response_format: "json"` (ADR-128), with the schema a task run
 * adds as `response_schema`: each adapter turns it into its wire's native
 * JSON mode. Null when the call does not ask for JSON this way (an object
 * `response_format` from a configuration's options passes through as it is).
 */
export function jsonOutputOf(options: CallOptions): JsonOutput | null {
  if (options.response_format !== 'json') return null;
  const schema = options.response_schema;
  return { schema: typeof schema === 'object' && schema !== null && !Array.isArray(schema) ? (schema as Record<string, unknown>) : null };
}

export interface Sampling {
  temperature?: number;
  topP?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  /** A `bigint` when the option was an integer beyond 2^53: sent with its digits, as given. */
  maxTokens?: number | bigint;
}

export function readSampling(options: CallOptions, warnings: string[]): Sampling {
  const sampling: Sampling = {};
  const temperature = numberOption(options, 'temperature', warnings);
  if (temperature !== undefined) sampling.temperature = temperature;
  const topP = numberOption(options, 'top_p', warnings);
  if (topP !== undefined && topP !== 1) sampling.topP = topP;
  const frequencyPenalty = numberOption(options, 'frequency_penalty', warnings);
  if (frequencyPenalty !== undefined && frequencyPenalty !== 0) sampling.frequencyPenalty = frequencyPenalty;
  const presencePenalty = numberOption(options, 'presence_penalty', warnings);
  if (presencePenalty !== undefined && presencePenalty !== 0) sampling.presencePenalty = presencePenalty;
  const maxTokens = options.max_tokens;
  if (typeof maxTokens === 'bigint') {
    if (maxTokens > 0n) sampling.maxTokens = maxTokens;
  } else {
    const value = numberOption(options, 'max_tokens', warnings);
    if (value !== undefined && value > 0) sampling.maxTokens = Math.floor(value);
  }
  return sampling;
}

/**
 * The configuration's extra options a provider knows, renamed to its wire
 * names. `accepted` maps an option key to the wire key; `'any'` passes every
 * key unchanged (a custom OpenAI-compatible server may know anything). Keys
 * the provider does not know are not sent and produce a warning. Values go
 * as they are: an integer beyond 2^53 is a `bigint` and reaches the body
 * with its digits (`HttpChatAdapter` writes it with `plainJsonText`).
 */
export function passThrough(
  options: CallOptions,
  accepted: ReadonlyMap<string, string> | 'any',
  providerLabel: string,
  warnings: string[],
): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [key, value] of Object.entries(options)) {
    if (HANDLED_KEYS.has(key) || value === undefined || (key === 'response_format' && value === 'json')) continue;
    const wireKey = accepted === 'any' ? key : accepted.get(key);
    if (wireKey === undefined) {
      warnings.push(`${key} is not supported by ${providerLabel}`);
      continue;
    }
    out[wireKey] = value;
  }
  return out;
}

/** Builds the map for `passThrough` from wire keys that keep their name and [option, wire] renames. */
export function acceptedKeys(sameName: readonly string[], renamed: ReadonlyArray<readonly [string, string]> = []): ReadonlyMap<string, string> {
  const map = new Map<string, string>();
  for (const key of sameName) map.set(key, key);
  for (const [option, wire] of renamed) map.set(option, wire);
  return map;
}

/** A number option; an integer beyond 2^53 (a `bigint`) is read as the nearest number: these settings are compared and clamped. */
function numberOption(options: CallOptions, key: string, warnings: string[]): number | undefined {
  const value = options[key];
  if (value === undefined || value === null) return undefined;
  if (typeof value === 'number' && Number.isFinite(value)) return value;
  if (typeof value === 'bigint') return Number(value);
  warnings.push(`${key} must be a number and was not sent`);
  return undefined;
}
