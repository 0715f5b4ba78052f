/**
 * The effective system prompt of a configuration (behaviour.md §4).
 *
 * The configuration's own prompt (or a per-call override of it) comes first;
 * the snippets its `snippet_tags` select are appended behind it as one block
 * of labelled sections. This is the one insertion point for every path that
 * calls a model with a configuration, and its bytes must equal what a TYPO3
 * site composes from the same rows.
 */

import { composeSnippets } from './snippet-text';
import { lowerCaseAscii, trimWhitespace } from './tags';

/** What the selection needs to know about a snippet row. */
export interface SelectableSnippet {
  uid: number;
  identifier: string;
  name: string;
  snippet: string;
  hidden: boolean;
}

/**
 * The tag lookup of behaviour.md §3.3: active, non-deleted snippets carrying
 * the tag, hidden ones included, ordered by sorting then name.
 */
export type ActiveByTag = (tag: string) => readonly SelectableSnippet[];

/**
 * The key that makes two rows "the same snippet" for the selection: the
 * identifier, trimmed and lower-cased; the uid where the identifier is blank.
 * The two kinds live in separate namespaces so an identifier `"7"` never
 * collides with the uid 7.
 */
function selectionKey(snippet: SelectableSnippet): string {
  const identifier = lowerCaseAscii(trimWhitespace(snippet.identifier));
  return identifier !== '' ? 'identifier:' + identifier : 'uid:' + String(snippet.uid);
}

/**
 * Selects the snippets a configuration's tags pick (§4.1).
 *
 * For each tag in order, for each snippet `activeByTag` returns in order: a
 * hidden snippet is dropped (hiding is the editorial switch that takes a
 * snippet out of every configuration); a snippet whose identifier was
 * already selected is dropped, so a snippet carrying two selected tags is
 * composed once, in the place of its first tag. A hidden snippet does not
 * count as selected. `tags` is expected as `parseSelectionTags` gives it.
 */
export function selectSnippets(tags: readonly string[], activeByTag: ActiveByTag): SelectableSnippet[] {
  const selected: SelectableSnippet[] = [];
  const seen = new Set<string>();
  for (const tag of tags) {
    for (const snippet of activeByTag(tag)) {
      if (snippet.hidden) {
        continue;
      }
      const key = selectionKey(snippet);
      if (seen.has(key)) {
        continue;
      }
      seen.add(key);
      selected.push(snippet);
    }
  }
  return selected;
}

/**
 * The block one snippet adds (§4.2): its text composed with its `name` as
 * the label; `""` when the text is empty after trimming.
 */
export function snippetBlock(snippet: Pick<SelectableSnippet, 'name' | 'snippet'>): string {
  return composeSnippets([{ label: snippet.name, snippet: snippet.snippet }]);
}

/**
 * What `snippetBlock` gives for a snippet, possibly remembered: a caller
 * composing the same rows many times (the prompt library) passes a memo of
 * `snippetBlock`, never anything else.
 */
export type SnippetBlockOf<S> = (snippet: S) => string;

/**
 * Composes the selected snippets into one block (§4.2).
 *
 * Each snippet is composed on its own with its `name` as the label, so two
 * snippets sharing a name both appear (TYPO3's composer keys sections by
 * label, which is why it is called once per snippet there). Snippets whose
 * text is empty after trimming give no block; the rest are joined with
 * `"\n\n"`. No snippet gives `""`.
 */
export function composeSnippetBlock<S extends Pick<SelectableSnippet, 'name' | 'snippet'>>(selected: readonly S[], blockOf: SnippetBlockOf<S> = snippetBlock): string {
  return joinSnippetBlocks(selected.map((snippet) => blockOf(snippet)));
}

/**
 * The second half of `composeSnippetBlock`: the blocks of the selected
 * snippets (`snippetBlock` of each, in order) joined with `"\n\n"`, empty
 * ones left out. A caller holding the blocks of a selection (the prompt
 * library) composes through this, never otherwise.
 */
export function joinSnippetBlocks(blocks: readonly string[]): string {
  return (blocks.includes('') ? blocks.filter((block) => block !== '') : blocks).join('\n\n');
}

/**
 * Appends a snippet block to a system prompt (§4.3).
 *
 * An empty block leaves the prompt byte-identical (a configuration without
 * tags behaves as if the feature did not exist); an empty prompt becomes the
 * block alone; otherwise `prompt + "\n\n" + block`, the prompt first. "Empty"
 * means the empty string: a whitespace-only prompt is kept and the block
 * follows it, as in TYPO3.
 */
export function appendSnippetBlock(prompt: string, block: string): string {
  if (block === '') {
    return prompt;
  }
  if (prompt === '') {
    return block;
  }
  return prompt + '\n\n' + block;
}

/**
 * The effective system prompt: `prompt` (the configuration's, or a per-call
 * override that replaced it) with the block of the snippets `tags` select
 * appended. `""` means "send no system prompt".
 */
export function effectiveSystemPrompt(prompt: string, tags: readonly string[], activeByTag: ActiveByTag, blockOf?: SnippetBlockOf<SelectableSnippet>): string {
  return selectionPrompt(prompt, selectSnippets(tags, activeByTag), blockOf);
}

/** The effective system prompt of snippets already selected (`selectSnippets`): `prompt` with their block appended. */
export function selectionPrompt<S extends SelectableSnippet>(prompt: string, selected: readonly S[], blockOf?: SnippetBlockOf<S>): string {
  return appendSnippetBlock(prompt, composeSnippetBlock(selected, blockOf));
}

/**
 * Whether a caller-supplied message list already holds a `system` message,
 * anywhere in the list. Such a list is sent unchanged: the configuration's
 * prompt and its snippet block are not added (the pre-existing rule of §4,
 * decided before the composition is read).
 */
export function messagesHaveSystem(messages: readonly { role: string }[]): boolean {
  return messages.some((message) => message.role === 'system');
}
