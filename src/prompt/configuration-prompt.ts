/**
 * A configuration's prompt and call options, over plain records: the one
 * place the API (effectiveSystemPrompt, selectedSnippets, callOptions), runs,
 * releases and impact previews get them from. Each step is one rule of its
 * own module: the selection (effective-prompt `selectSnippets`), the snippet
 * block and its append (`composeSnippetBlock`, `appendSnippetBlock`; a source
 * may remember a selection's block, never compose it otherwise), the call
 * options (call-options `buildCallOptions`).
 */
import type { PhpArray } from '../shared/php-json';
import { buildCallOptions, type CallOptionsModel, readOptions } from './call-options';
import { appendSnippetBlock, composeSnippetBlock, selectSnippets } from './effective-prompt';
import type { IndexedSnippet } from './snippet-index';
import { parseSelectionTags } from './tags';

/** The configuration columns the prompt rules read (`tx_nrllm_configuration`). */
export interface PromptConfiguration {
  snippetTags: string;
  systemPrompt: string;
  temperature: number;
  topP: number;
  frequencyPenalty: number;
  presencePenalty: number;
  maxTokens: number;
  timeout: number;
  translator: string | null;
  /** The `options` column as stored (JSON text or null). */
  options: string | null;
}

/**
 * What selecting a configuration's snippets reads: the tag lookup of
 * behaviour.md §3.3 and a memo of selections by `snippet_tags` text — one
 * request's `ActiveSnippetIndex`, or the prompt library the service keeps.
 */
export interface SnippetSelectionSource<S extends IndexedSnippet = IndexedSnippet> {
  activeByTag(tag: string): readonly S[];
  selection(snippetTags: string, select: () => readonly S[]): readonly S[];
  /** A memo of `snippetBlock` (effective-prompt.ts), for a source that composes the same rows many times. */
  snippetBlock?(snippet: S): string;
  /**
   * A memo of the composed block of a selection (`compose` is `composeSnippetBlock` of
   * `selection(snippetTags, …)`), kept exactly as long as that selection: for a source
   * that composes the same configurations many times (the prompt library).
   */
  selectionBlock?(snippetTags: string, compose: () => string): string;
}

/** The snippets a configuration's tags select now (behaviour.md §4.1), from one index of active snippets. */
export function selectedSnippetsOf<S extends IndexedSnippet>(configuration: Pick<PromptConfiguration, 'snippetTags'>, activeSnippets: SnippetSelectionSource<S>): readonly S[] {
  return activeSnippets.selection(configuration.snippetTags, () => {
    const tags = parseSelectionTags(configuration.snippetTags);
    return tags.length === 0 ? [] : (selectSnippets(tags, (tag) => activeSnippets.activeByTag(tag)) as S[]);
  });
}

/** The block of the snippets a configuration's tags select now (behaviour.md §4.2): `composeSnippetBlock` of `selectedSnippetsOf`. */
export function selectedSnippetBlockOf<S extends IndexedSnippet>(configuration: Pick<PromptConfiguration, 'snippetTags'>, activeSnippets: SnippetSelectionSource<S>): string {
  const compose = () => composeSnippetBlock(selectedSnippetsOf(configuration, activeSnippets), activeSnippets.snippetBlock?.bind(activeSnippets));
  return activeSnippets.selectionBlock ? activeSnippets.selectionBlock(configuration.snippetTags, compose) : compose();
}

/** The configuration's prompt (or a per-run override) with its snippet block appended (behaviour.md §4). */
export function effectiveSystemPromptOf<S extends IndexedSnippet>(configuration: Pick<PromptConfiguration, 'snippetTags' | 'systemPrompt'>, activeSnippets: SnippetSelectionSource<S>, override?: string | null): string {
  const prompt = override !== undefined && override !== null && override !== '' ? override : configuration.systemPrompt;
  return appendSnippetBlock(prompt, selectedSnippetBlockOf(configuration, activeSnippets));
}

/**
 * The call options of behaviour.md §5 for a configuration: the one place a
 * model call's options are built, with the snippet block appended to the
 * system prompt, as a PHP array (`phpJsonEncode` gives nr_llm's JSON of it,
 * `plainValueOf` a JavaScript object). `overrides` are per-call values (a
 * run's maxTokens, temperature).
 */
export function callOptionsOf<S extends IndexedSnippet>(configuration: PromptConfiguration, model: CallOptionsModel | null, activeSnippets: SnippetSelectionSource<S>, overrides: PhpArray = new Map()): PhpArray {
  return buildCallOptions({
    configuration: {
      temperature: configuration.temperature,
      topP: configuration.topP,
      frequencyPenalty: configuration.frequencyPenalty,
      presencePenalty: configuration.presencePenalty,
      maxTokens: configuration.maxTokens,
      systemPrompt: configuration.systemPrompt,
      timeout: configuration.timeout,
      translator: configuration.translator ?? '',
      options: readOptions(configuration.options),
    },
    model,
    overrides,
    snippetBlock: selectedSnippetBlockOf(configuration, activeSnippets),
  });
}
