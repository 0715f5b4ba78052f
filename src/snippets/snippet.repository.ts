/**
 * The SQL of the snippet list read page by page: filters, keyset pages in
 * the list's order (sorting, then name by the table's collation, then uid)
 * and the count, all from the same conditions. Each query's SQL is generated
 * once per shape of filter (raw-rows' shaped selects).
 */
import type { DataSource } from 'typeorm';
import type { Dialect } from '../db/data-source';
import { afterPosition, atOrBeforePosition, type KeyColumn, type KeyKind, type KeysetSource, positionOf, type SqlCondition } from '../db/keyset';
import { filteredSelect, flagCondition, searchCondition } from '../db/list-filters';
import { getEntities, getPreparedEntities, getShapedArrays, getShapedEntityRows } from '../db/raw-rows';
import { liveRowsInListOrder } from '../db/record-rules';
import { PromptSnippetEntity } from './snippet.entity';
import { SNIPPET_SEARCH_FIELDS } from './snippet-search';
import { tagCondition, type TagMatchMode } from './tag-match-sql';

export interface SnippetListFilter {
  /** Normalised by the tag rules; [] = no tag filter. */
  tags: readonly string[];
  tagsMatch: TagMatchMode;
  isActive: boolean | null;
  hidden: boolean | null;
  search: string | null;
}

/** The name a cursor of this list carries. */
export const SNIPPET_LIST = 'snippets';

/** The list order of `liveRowsInListOrder`, as a keyset. */
const ORDER: readonly KeyColumn[] = [
  { column: 's.sorting', direction: 'ASC' },
  { column: 's.name', direction: 'ASC' },
  { column: 's.uid', direction: 'ASC' },
];
const KEYS = ['s_sorting', 's_name', 's_uid'];
const SEARCH_COLUMNS = SNIPPET_SEARCH_FIELDS.map((field) => `s.${field}`);
export const SNIPPET_KEY_KINDS: readonly KeyKind[] = ['value', 'value', 'integer'];

export class SnippetRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
  ) {}

  /**
   * Every active, non-deleted snippet in list order: the SQL form of
   * isActiveSnippet (`is_active = 1`, as nr_llm's lookup reads it). One
   * prepared query; the order is the database's (`ORDER BY sorting, name`,
   * names by the table's collation).
   */
  allActive(): Promise<PromptSnippetEntity[]> {
    return getPreparedEntities(this.dataSource, 'snippets:active', () => liveRowsInListOrder(this.dataSource, PromptSnippetEntity, 's').andWhere('s.is_active = 1'));
  }

  /** One offset page of the non-deleted snippets in list order, those `search` finds when given. */
  offsetPage(limit: number, offset: number, search: string | null): Promise<PromptSnippetEntity[]> {
    const page = () => liveRowsInListOrder(this.dataSource, PromptSnippetEntity, 's').limit(limit).offset(offset);
    if (!search) return getPreparedEntities(this.dataSource, `snippets:page:${limit}:${offset}`, page);
    const found = searchCondition(SEARCH_COLUMNS, search, 'pattern');
    return getEntities(this.dataSource, page().andWhere(found.sql, found.parameters));
  }

  /** The non-deleted snippets that pass `filter`, in list order, as a keyset source. */
  listed(filter: SnippetListFilter): KeysetSource<PromptSnippetEntity> {
    const conditions = this.conditions(filter);
    const rows = () => this.dataSource.getRepository(PromptSnippetEntity).createQueryBuilder('s').where('s.deleted = 0');
    return {
      read: async (after, limit) => {
        const page = () => {
          const query = rows();
          for (const { column, direction } of ORDER) query.addOrderBy(column, direction);
          return query.limit(limit);
        };
        const select = filteredSelect(`snippets:page:${limit}`, page, after ? [...conditions, afterPosition(ORDER, after, 'after')] : conditions);
        return (await getShapedEntityRows(this.dataSource, select, [], KEYS)).map(({ main, key }) => ({ row: main, position: positionOf(key) }));
      },
      count: async () => {
        const [[count] = []] = await getShapedArrays(this.dataSource, filteredSelect('snippets:count', () => rows().select('COUNT(*)', 'count'), conditions));
        return Number(count ?? 0);
      },
      existsAtOrBefore: async (position) => {
        const select = filteredSelect('snippets:before', () => rows().select('s.uid', 'uid').limit(1), [...conditions, atOrBeforePosition(ORDER, position, 'before')]);
        return (await getShapedArrays(this.dataSource, select)).length > 0;
      },
    };
  }

  private conditions(filter: SnippetListFilter): SqlCondition[] {
    const conditions: SqlCondition[] = [];
    const tags = tagCondition(this.dialect, 's.tags', filter.tags, filter.tagsMatch, 'tag');
    if (tags) conditions.push(tags);
    if (filter.isActive !== null) conditions.push(flagCondition(this.dialect, 's.is_active', filter.isActive));
    if (filter.hidden !== null) conditions.push(flagCondition(this.dialect, 's.hidden', filter.hidden));
    if (filter.search) conditions.push(searchCondition(SEARCH_COLUMNS, filter.search, 'search'));
    return conditions;
  }
}
