/**
 * What a snippet text search reads: the same fields in SQL (SnippetRepository,
 * through searchCondition) and in code (snippetMatchesSearch, through
 * textMatchesSearch).
 */
import { textMatchesSearch } from '../db/list-filters';
import type { PromptSnippetEntity } from './snippet.entity';

/** The searched fields, in order; the columns carry the same names. */
export const SNIPPET_SEARCH_FIELDS = ['identifier', 'name', 'description', 'tags', 'snippet'] as const;

export type SearchableSnippet = Pick<PromptSnippetEntity, (typeof SNIPPET_SEARCH_FIELDS)[number]>;

/** `search` found, case-insensitively, in a snippet's identifier, name, description, tags or text. */
export function snippetMatchesSearch(row: SearchableSnippet, search: string): boolean {
  return textMatchesSearch(
    SNIPPET_SEARCH_FIELDS.map((field) => row[field]),
    search,
  );
}
