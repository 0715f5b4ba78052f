/**
 * The SQL of the snippet list read page by page: filters, keyset pages in
 * the list's order (sorting, then name by the table's collation, then uid)
 * and the count, all from the same conditions. Each query's SQL is generated
 * once per shape of filter (raw-rows' shaped selects).
 */
import type { DataSource } from 'typeorm';
import type { Dialect } from '../db/data-source';
import { afterPosition, atOrBeforePosition, type KeyColumn, type KeyKind, type KeysetSource, positionOf, type SqlCondition } from '../db/keyset';
import { filteredSelect, searchCondition } from '../db/list-filters';
import { getEntities, getPreparedEntities, getShapedArrays, getShapedEntityRows } from '../db/raw-rows';
import { liveRowsInListOrder } from '../db/record-rules';
import { PromptSnippetEntity } from './snippet.entity';
import { SNIPPET_SEARCH_FIELDS } from './snippet-search';
import { type TaggedListColumns, taggedListConditions, type TaggedListFilter } from './tagged-list-filter';

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
const COLUMNS: TaggedListColumns = { tags: 's.tags', isActive: 's.is_active', hidden: 's.hidden', search: SEARCH_COLUMNS };
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

  /** The live snippet with this uid. */
  findLive(uid: number): Promise<PromptSnippetEntity | null> {
    return this.dataSource.getRepository(PromptSnippetEntity).findOne({ where: { uid, deleted: false } });
  }

  /** The oldest live snippet whose identifier is exactly `identifier`. */
  findLiveByIdentifier(identifier: string): Promise<PromptSnippetEntity | null> {
    return this.dataSource.getRepository(PromptSnippetEntity).findOne({ where: { identifier, deleted: false }, order: { uid: 'ASC' } });
  }

  /** The live snippets whose lower-cased identifier is one of `lowered`, oldest first. */
  findLiveByLoweredIdentifiers(lowered: readonly string[]): Promise<PromptSnippetEntity[]> {
    return this.dataSource
      .getRepository(PromptSnippetEntity)
      .createQueryBuilder('s')
      .where('s.deleted = 0')
      .andWhere('LOWER(s.identifier) IN (:...lowered)', { lowered: [...lowered] })
      .orderBy('s.uid', 'ASC')
      .getMany();
  }

  /** The `tags` text of every live snippet (hidden and inactive included), oldest first. */
  async liveTags(): Promise<string[]> {
    const rows = await this.dataSource.getRepository(PromptSnippetEntity).createQueryBuilder('s').select(['s.uid', 's.tags']).where('s.deleted = 0').orderBy('s.uid', 'ASC').getMany();
    return rows.map((row) => row.tags);
  }

  /** One offset page of the non-deleted snippets in list order, those `search` finds when given. */
  offsetPage(limit: number, offset: number, search: string | null): Promise<PromptSnippetEntity[]> {
    const page = () => liveRowsInListOrder(this.dataSource, PromptSnippetEntity, 's').limit(limit).offset(offset);
    if (!search) return getPreparedEntities(this.dataSource, `snippets:page:${limit}:${offset}`, page);
    const found = searchCondition(SEARCH_COLUMNS, search, 'pattern');
    return getEntities(this.dataSource, page().andWhere(found.sql, found.parameters));
  }

  /** The non-deleted snippets that pass `filter`, in list order, as a keyset source. */
  listed(filter: TaggedListFilter): KeysetSource<PromptSnippetEntity> {
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

  private conditions(filter: TaggedListFilter): SqlCondition[] {
    return taggedListConditions(this.dialect, COLUMNS, filter);
  }

}
