/**
 * The filter of the two tagged lists (snippetsConnection,
 * configurationsConnection): one request shape, one check, one filter and
 * one set of SQL conditions, each list naming only its columns.
 */
import type { Dialect } from '../db/data-source';
import type { SqlCondition } from '../db/keyset';
import { flagCondition, searchCondition } from '../db/list-filters';
import { BadUserInputError } from '../shared/errors';
import { tagCondition, type TagMatchMode } from './tag-match-sql';

/**
 * The longest `search` text. Far more than any name or phrase; the same on
 * both databases (SQLite refuses LIKE patterns beyond 50,000 bytes outright).
 */
export const MAX_SEARCH_LENGTH = 1000;

/** The most tags one list filter names: each is one condition on every row. */
export const MAX_FILTER_TAGS = 50;

/** One page of a tagged list (snippets, configurations) as a client asks for it (`…Connection`). */
export interface TaggedListPageRequest {
  first: number;
  after?: string | null;
  tags?: readonly string[] | null;
  tagsMatch?: TagMatchMode | null;
  isActive?: boolean | null;
  hidden?: boolean | null;
  search?: string | null;
}

/** A tagged list's filter, checked; null = that filter is not given. */
export interface TaggedListFilter {
  /** Normalised by the tag rules; [] = no tag filter. */
  tags: readonly string[];
  tagsMatch: TagMatchMode;
  isActive: boolean | null;
  hidden: boolean | null;
  search: string | null;
}

/** The columns of one tagged list the filter reads. */
export interface TaggedListColumns {
  tags: string;
  isActive: string;
  hidden: string;
  search: readonly string[];
}

/** Validates `search` as every list does. */
export function checkSearch(search: string | null | undefined, field = 'search'): string | null {
  if (search === undefined || search === null || search === '') return null;
  if (search.length > MAX_SEARCH_LENGTH) throw new BadUserInputError(`${field} must be at most ${MAX_SEARCH_LENGTH} characters (got ${search.length})`, field);
  return search;
}

/** Validates a list filter's tags: at most MAX_FILTER_TAGS. Each is matched by the tag rules; one that normalises to '' matches nothing. */
export function checkFilterTags(tags: readonly string[] | null | undefined, field = 'tags'): readonly string[] {
  if (!tags) return [];
  if (tags.length > MAX_FILTER_TAGS) throw new BadUserInputError(`${field} may name at most ${MAX_FILTER_TAGS} tags (got ${tags.length})`, field);
  return tags;
}

/** The checked filter of a page request; filters combine with AND. */
export function taggedListFilterOf(request: TaggedListPageRequest): TaggedListFilter {
  return {
    tags: checkFilterTags(request.tags),
    tagsMatch: request.tagsMatch ?? 'ANY',
    isActive: request.isActive ?? null,
    hidden: request.hidden ?? null,
    search: checkSearch(request.search),
  };
}

/** The filter's SQL conditions over `columns`, in one order (the shape of the list's queries). */
export function taggedListConditions(dialect: Dialect, columns: TaggedListColumns, filter: TaggedListFilter): SqlCondition[] {
  const conditions: SqlCondition[] = [];
  const tags = tagCondition(dialect, columns.tags, filter.tags, filter.tagsMatch, 'tag');
  if (tags) conditions.push(tags);
  if (filter.isActive !== null) conditions.push(flagCondition(dialect, columns.isActive, filter.isActive));
  if (filter.hidden !== null) conditions.push(flagCondition(dialect, columns.hidden, filter.hidden));
  if (filter.search) conditions.push(searchCondition(columns.search, filter.search, 'search'));
  return conditions;
}
