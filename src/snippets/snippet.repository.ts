/**
 * The SQL of the snippet list read page by page: filters, keyset pages in
 * the list's order (sorting, then name by the table's collation, then uid)
 * and the count, all from one filtered query.
 */
import type { DataSource, SelectQueryBuilder } from 'typeorm';
import type { Dialect } from '../db/data-source';
import { afterPosition, atOrBeforePosition, type KeyColumn, type KeyKind, type KeysetSource, positionOf } from '../db/keyset';
import { flagCondition, searchCondition } from '../db/list-filters';
import { getEntityRowsWithKeys } from '../db/raw-rows';
import { PromptSnippetEntity } from './snippet.entity';
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
export const SNIPPET_KEY_KINDS: readonly KeyKind[] = ['value', 'value', 'integer'];

export class SnippetRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
  ) {}

  /** The non-deleted snippets that pass `filter`, in list order, as a keyset source. */
  listed(filter: SnippetListFilter): KeysetSource<PromptSnippetEntity> {
    return {
      read: async (after, limit) => {
        const query = this.filtered(filter);
        if (after) {
          const condition = afterPosition(ORDER, after, 'after');
          query.andWhere(condition.sql, condition.parameters);
        }
        for (const { column, direction } of ORDER) query.addOrderBy(column, direction);
        const rows = await getEntityRowsWithKeys(this.dataSource, query.limit(limit), [], KEYS);
        return rows.map(({ main, key }) => ({ row: main, position: positionOf(key) }));
      },
      count: async () => {
        const row = await this.filtered(filter).select('COUNT(*)', 'count').getRawOne<{ count: number | string }>();
        return Number(row?.count ?? 0);
      },
      existsAtOrBefore: async (position) => {
        const condition = atOrBeforePosition(ORDER, position, 'before');
        const row = await this.filtered(filter).select('s.uid', 'uid').andWhere(condition.sql, condition.parameters).limit(1).getRawOne();
        return row !== undefined;
      },
    };
  }

  private filtered(filter: SnippetListFilter): SelectQueryBuilder<PromptSnippetEntity> {
    const query = this.dataSource.getRepository(PromptSnippetEntity).createQueryBuilder('s').where('s.deleted = 0');
    const tags = tagCondition(this.dialect, 's.tags', filter.tags, filter.tagsMatch, 'tag');
    if (tags) query.andWhere(tags.sql, tags.parameters);
    if (filter.isActive !== null) query.andWhere(flagCondition(this.dialect, 's.is_active', filter.isActive));
    if (filter.hidden !== null) query.andWhere(flagCondition(this.dialect, 's.hidden', filter.hidden));
    if (filter.search) {
      const search = searchCondition(['s.identifier', 's.name', 's.description', 's.tags', 's.snippet'], filter.search, 'search');
      query.andWhere(search.sql, search.parameters);
    }
    return query;
  }
}
