/**
 * Why each snippet is or is not in a configuration's prompt: the selection of
 * behaviour.md §4.1 with its provenance. The parts are exactly what
 * `selectSnippets` selects (the same function decides), each with the tags
 * that matched it and the block it adds; `dropped` lists the snippets the tags
 * matched that are not in the prompt, with the reason.
 */
import { type SelectableSnippet, selectSnippets, snippetBlock } from './effective-prompt';
import { isActiveSnippet } from './snippet-index';

export type DropReason = 'INACTIVE' | 'HIDDEN' | 'DUPLICATE';

export interface ComposableSnippet extends SelectableSnippet {
  isActive: boolean;
}

export interface CompositionPart<S> {
  snippet: S;
  matchedTags: string[];
  /** The block this snippet adds (`Name:\ntext`); "" when its text is empty. */
  text: string;
}

export interface DroppedSnippet<S> {
  snippet: S;
  matchedTags: string[];
  reason: DropReason;
}

export interface Composition<S> {
  parts: CompositionPart<S>[];
  dropped: DroppedSnippet<S>[];
}

/**
 * `tags` as `parseSelectionTags` gives them; `liveByTag(tag)` returns every
 * non-deleted snippet carrying the tag, active or not, in sorting-then-name
 * order (the tag lookup of §3.3 without its `is_active` filter).
 */
export function composeWithProvenance<S extends ComposableSnippet>(tags: readonly string[], liveByTag: (tag: string) => readonly S[]): Composition<S> {
  const selected = selectSnippets(tags, (tag) => liveByTag(tag).filter(isActiveSnippet)) as S[];
  const partOf = new Map<S, CompositionPart<S>>(selected.map((snippet) => [snippet, { snippet, matchedTags: [], text: snippetBlock(snippet) }]));
  const droppedOf = new Map<S, DroppedSnippet<S>>();
  for (const tag of tags) {
    for (const snippet of liveByTag(tag)) {
      const part = partOf.get(snippet);
      if (part) {
        if (!part.matchedTags.includes(tag)) part.matchedTags.push(tag);
        continue;
      }
      let dropped = droppedOf.get(snippet);
      if (!dropped) {
        const reason: DropReason = !isActiveSnippet(snippet) ? 'INACTIVE' : snippet.hidden ? 'HIDDEN' : 'DUPLICATE';
        droppedOf.set(snippet, (dropped = { snippet, matchedTags: [], reason }));
      }
      if (!dropped.matchedTags.includes(tag)) dropped.matchedTags.push(tag);
    }
  }
  return { parts: [...partOf.values()], dropped: [...droppedOf.values()] };
}
