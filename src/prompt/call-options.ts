/**
 * Call options of a configuration, as nr_llm's
 * `ConfigurationCallPlanner::callOptions` and
 * `LlmConfiguration::toOptionsArray` build them.
 *
 * The merge order is the contract: typed columns, then the configuration's
 * `options` JSON, then per-call overrides, then the snippet block appended to
 * whatever system prompt won, then the `max_tokens` fallback. Changing the
 * order changes which value a caller's override beats.
 */

import { phpArrayMerge, phpJsonDecode, type PhpArray, type PhpJsonValue } from '../shared/php-json';
import { appendSnippetBlock } from './effective-prompt';

/** Used when neither the configuration nor the model sets a timeout. */
export const DEFAULT_TIMEOUT_SECONDS = 120;

/** The configuration columns the call options are built from. */
export interface CallOptionsConfiguration {
  /** PHP floats (nr_llm's typed properties), as are topP and the penalties. */
  temperature: number;
  topP: number;
  frequencyPenalty: number;
  presencePenalty: number;
  /** 0 = unset. */
  maxTokens: number;
  systemPrompt: string;
  /** Seconds; 0 = the model's default. */
  timeout: number;
  /** A translation service; part of the options when not ''. */
  translator: string;
  /** The decoded `options` column (`readOptions`). */
  options: PhpArray;
}

/** The model columns the call options read; `null` when the configuration has no model. */
export interface CallOptionsModel {
  modelId: string;
  /** Seconds. */
  defaultTimeout: number;
  /** 0 = unknown. */
  maxOutputTokens: number;
}

export interface CallOptionsInput {
  configuration: CallOptionsConfiguration;
  model: CallOptionsModel | null;
  /** Per-call options, PHP-typed; a `system_prompt` here replaces the configuration's before the append. */
  overrides?: PhpArray;
  /** The composed snippet block of the configuration (`composeSnippetBlock`); `""` for none. */
  snippetBlock: string;
}

/**
 * Reads a configuration's `options` column as nr_llm's
 * `LlmConfiguration::getOptionsArray` does: `''` (or NULL) and whatever
 * `json_decode` refuses or decodes to a scalar read as an empty array; any
 * array is kept as decoded, a list (`["a"]`) included. Never throws.
 */
export function readOptions(text: string | null | undefined): PhpArray {
  if (text === null || text === undefined || text === '') return new Map();
  const decoded = phpJsonDecode(text);
  return decoded instanceof Map ? decoded : new Map();
}

/**
 * Builds the options of one call made with a configuration, with PHP's
 * values and key order (nr_llm's `LlmConfiguration::toOptionsArray` and
 * `ConfigurationCallPlanner::callOptions`).
 *
 * 1. Base: `temperature`, `top_p`, `frequency_penalty`, `presence_penalty`
 *    (floats) always; `max_tokens` only when > 0; `system_prompt` only when
 *    non-empty; `model` = the model's `model_id` (left out without a model or
 *    with an empty `model_id`, as TYPO3 does); `translator` when set;
 *    `timeout` = the configuration's when > 0, else the model's
 *    `default_timeout` as it is (0 included), else (no model) 120.
 * 2. `array_merge(base, options)`: the configuration's `options` array is
 *    merged over the base; its string keys replace base values in place or
 *    are appended, its int keys are appended and renumbered from 0
 *    (`["a"]` and `{"5":"a"}` both add `"0":"a"` at the end).
 * 3. `array_merge(that, overrides)`, then a `provider` key is removed
 *    (nr_llm puts the adapter type there and drops it again; an options key
 *    of that name goes with it).
 * 4. The snippet block is appended to `system_prompt` (a non-string value
 *    counts as `""`); the key is written only if the text changed, so an
 *    empty block leaves the options exactly as merged.
 * 5. A `max_tokens` that is missing, `null` or an int ≤ 0 becomes the
 *    model's `max_output_tokens` when that is > 0, else the key is removed.
 *    Values of other types (a string, a float such as `0.0`) are left alone,
 *    as PHP's `is_int` leaves them.
 */
export function buildCallOptions(input: CallOptionsInput): PhpArray {
  const { configuration, model } = input;

  const base: PhpArray = new Map<string, PhpJsonValue>()
    .set('temperature', phpFloat(configuration.temperature))
    .set('top_p', phpFloat(configuration.topP))
    .set('frequency_penalty', phpFloat(configuration.frequencyPenalty))
    .set('presence_penalty', phpFloat(configuration.presencePenalty));
  if (configuration.maxTokens > 0) {
    base.set('max_tokens', phpInt(configuration.maxTokens));
  }
  if (configuration.systemPrompt !== '') {
    base.set('system_prompt', configuration.systemPrompt);
  }
  if (model !== null && model.modelId !== '') {
    base.set('model', model.modelId);
  }
  if (configuration.translator !== '') {
    base.set('translator', configuration.translator);
  }
  base.set('timeout', phpInt(effectiveTimeout(configuration.timeout, model)));

  const options = phpArrayMerge(phpArrayMerge(base, configuration.options), input.overrides ?? new Map());
  options.delete('provider');

  const current = options.get('system_prompt');
  const currentPrompt = typeof current === 'string' ? current : '';
  const effectivePrompt = appendSnippetBlock(currentPrompt, input.snippetBlock);
  if (effectivePrompt !== currentPrompt) {
    options.set('system_prompt', effectivePrompt);
  }

  applyMaxTokensFallback(options, model);
  return options;
}

/**
 * Step 5 of `buildCallOptions`, in place: a `max_tokens` that is missing,
 * `null` or an int ≤ 0 becomes the model's `max_output_tokens` when that is
 * > 0, else the key is removed. A float (`0.0`) or a string is left alone,
 * as PHP's `is_int` leaves it.
 */
export function applyMaxTokensFallback(options: PhpArray, model: Pick<CallOptionsModel, 'maxOutputTokens'> | null): void {
  const maxTokens = options.get('max_tokens');
  if (maxTokens === undefined || maxTokens === null || (typeof maxTokens === 'bigint' && maxTokens <= 0n)) {
    if (model !== null && model.maxOutputTokens > 0) {
      options.set('max_tokens', phpInt(model.maxOutputTokens));
    } else {
      options.delete('max_tokens');
    }
  }
}

/** A column value as a PHP int (columns are read as whole numbers; anything else counts as 0). */
function phpInt(value: number): bigint {
  return Number.isFinite(value) ? BigInt(Math.trunc(value)) : 0n;
}

/** A decimal column as a PHP float; a NULL cell stays null. */
function phpFloat(value: number | null): PhpJsonValue {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

/**
 * `LlmConfiguration::getEffectiveTimeout`: the configuration's timeout when
 * > 0, else the model's `default_timeout` whatever it is (a model with 0
 * gives 0), else, without a model, 120 seconds.
 */
export function effectiveTimeout(configurationTimeout: number, model: Pick<CallOptionsModel, 'defaultTimeout'> | null): number {
  if (configurationTimeout > 0) {
    return configurationTimeout;
  }
  if (model !== null) {
    return model.defaultTimeout;
  }
  return DEFAULT_TIMEOUT_SECONDS;
}
