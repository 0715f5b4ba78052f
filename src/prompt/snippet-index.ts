/**
 * The active snippets of one request (or one library snapshot), indexed by
 * normalised tag once, so that any number of tag lookups (50 configurations ×
 * their tags) cost a map read. Each tag's list keeps the rows' order (list
 * order: sorting, then name in the database's collation) and holds a snippet
 * once. Pure: built from plain rows, no database.
 */
import type { SelectableSnippet } from './effective-prompt';
import { normalizeTag, parseTags } from './tags';

/**
 * The "active snippet" rule of behaviour.md §3.3: a live snippet composes
 * when it is active (`is_active`); hidden ones are included (they are only
 * left out of the snippet tools). Every path that keeps the active snippets
 * of a list asks this function; the SQL form is SnippetRepository.allActive.
 */
export function isActiveSnippet(snippet: { readonly isActive: boolean }): boolean {
  return snippet.isActive;
}

/**
 * The snippets the snippet tools offer (search_snippets, get_snippet): the
 * ones a configuration could compose — active (`isActiveSnippet`), visible
 * (`hidden = 0`) and not deleted. Every path that offers snippets asks this.
 */
export function isOfferedSnippet(snippet: { readonly isActive: boolean; readonly hidden: boolean; readonly deleted?: boolean }): boolean {
  return isActiveSnippet(snippet) && !snippet.hidden && snippet.deleted !== true;
}

/** A snippet row as the index needs it: selectable, with its `tags` column. */
export interface IndexedSnippet extends SelectableSnippet {
  tags: string;
}

export class ActiveSnippetIndex<S extends IndexedSnippet = IndexedSnippet> {
  private readonly byTag = new Map<string, S[]>();
  private readonly selections = new Map<string, readonly S[]>();

  constructor(readonly rows: readonly S[]) {
    for (const row of rows) {
      for (const tag of new Set(parseTags(row.tags))) {
        const list = this.byTag.get(tag);
        if (list) list.push(row);
        else this.byTag.set(tag, [row]);
      }
    }
  }

  /**
   * Memoises a selection by the configuration's `snippet_tags` text: within a
   * request many configurations share the same tags, and the selection only
   * depends on them and on this index.
   */
  selection(snippetTags: string, select: () => readonly S[]): readonly S[] {
    let selected = this.selections.get(snippetTags);
    if (!selected) this.selections.set(snippetTags, (selected = select()));
    return selected;
  }

  /** `activeByTag` of behaviour.md §3.3 over this index. */
  activeByTag(tag: string): readonly S[] {
    const wanted = normalizeTag(tag);
    return wanted === '' ? [] : (this.byTag.get(wanted) ?? []);
  }
}
