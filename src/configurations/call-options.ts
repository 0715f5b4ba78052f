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

import { appendSnippetBlock } from './effective-prompt';

/** Used when neither the configuration nor the model sets a timeout. */
export const DEFAULT_TIMEOUT_SECONDS = 120;

/** The configuration columns the call options are built from. */
export interface CallOptionsConfiguration {
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
  /** The decoded `options` column (see `readJsonObject`). */
  options: Record<string, unknown>;
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
  /** Per-call options; a `system_prompt` here replaces the configuration's before the append. */
  overrides?: Record<string, unknown>;
  /** The composed snippet block of the configuration (`composeSnippetBlock`); `""` for none. */
  snippetBlock: string;
}

/**
 * Builds the options of one call made with a configuration.
 *
 * 1. Base: `temperature`, `top_p`, `frequency_penalty`, `presence_penalty`
 *    always; `max_tokens` only when > 0; `system_prompt` only when non-empty;
 *    `model` = the model's `model_id` (left out without a model or with an
 *    empty `model_id`, as TYPO3 does); `translator` when set; `timeout` =
 *    the configuration's when > 0, else the model's `default_timeout` as it
 *    is (0 included), else (no model) 120.
 * 2. The configuration's `options` object is merged over the base.
 * 3. The per-call overrides are merged over that, and a `provider` key is
 *    removed (nr_llm puts the adapter type there and drops it again; an
 *    options key of that name goes with it).
 * 4. The snippet block is appended to `system_prompt` (a non-string value
 *    counts as `""`); the key is written only if the text changed, so an
 *    empty block leaves the options exactly as merged.
 * 5. A `max_tokens` that is missing, `null` or an integer ≤ 0 becomes the
 *    model's `max_output_tokens` when that is > 0, else the key is removed.
 *    Values of other types (a string, a fraction) are left alone, as PHP's
 *    `is_int` leaves them.
 *
 * Keys keep insertion order (base order, then new keys in merge order).
 */
export function buildCallOptions(input: CallOptionsInput): Record<string, unknown> {
  const { configuration, model } = input;

  const base: Record<string, unknown> = {
    temperature: configuration.temperature,
    top_p: configuration.topP,
    frequency_penalty: configuration.frequencyPenalty,
    presence_penalty: configuration.presencePenalty,
  };
  if (configuration.maxTokens > 0) {
    base.max_tokens = configuration.maxTokens;
  }
  if (configuration.systemPrompt !== '') {
    base.system_prompt = configuration.systemPrompt;
  }
  if (model !== null && model.modelId !== '') {
    base.model = model.modelId;
  }
  if (configuration.translator !== '') {
    base.translator = configuration.translator;
  }
  base.timeout = effectiveTimeout(configuration.timeout, model);

  const options: Record<string, unknown> = { ...base, ...configuration.options, ...(input.overrides ?? {}) };
  delete options.provider;

  const currentPrompt = typeof options.system_prompt === 'string' ? options.system_prompt : '';
  const effectivePrompt = appendSnippetBlock(currentPrompt, input.snippetBlock);
  if (effectivePrompt !== currentPrompt) {
    options.system_prompt = effectivePrompt;
  }

  applyMaxTokensFallback(options, model);
  return options;
}

/**
 * Step 5 of `buildCallOptions`, in place: a `max_tokens` that is missing,
 * `null` or an integer ≤ 0 becomes the model's `max_output_tokens` when that
 * is > 0, else the key is removed.
 */
export function applyMaxTokensFallback(options: Record<string, unknown>, model: Pick<CallOptionsModel, 'maxOutputTokens'> | null): void {
  const maxTokens = options.max_tokens;
  if (maxTokens === undefined || maxTokens === null || (typeof maxTokens === 'number' && Number.isInteger(maxTokens) && maxTokens <= 0)) {
    if (model !== null && model.maxOutputTokens > 0) {
      options.max_tokens = model.maxOutputTokens;
    } else {
      delete options.max_tokens;
    }
  }
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
