/**
 * The SQL of the configuration list read page by page (filters, keyset pages
 * in list order with each configuration's model and provider joined, the
 * count), and of configurations read by uid in one query.
 */
import type { DataSource } from 'typeorm';
import type { Dialect } from '../db/data-source';
import { afterPosition, atOrBeforePosition, type KeyColumn, type KeyKind, type KeysetSource, positionOf, type SqlCondition } from '../db/keyset';
import { filteredSelect } from '../db/list-filters';
import { getShapedArrays, getShapedEntityRows } from '../db/raw-rows';
import { ModelEntity } from '../providers/model.entity';
import { ProviderEntity } from '../providers/provider.entity';
import { type TaggedListColumns, taggedListConditions, type TaggedListFilter } from '../snippets/tagged-list-filter';
import { ConfigurationEntity } from './configuration.entity';

/** A listed configuration with the model and provider it names (null when deleted or unset). */
export interface ListedConfiguration {
  configuration: ConfigurationEntity;
  model: ModelEntity | null;
  provider: ProviderEntity | null;
}

/** The columns the list's filter reads. */
const COLUMNS: TaggedListColumns = { tags: 'c.snippet_tags', isActive: 'c.is_active', hidden: 'c.hidden', search: ['c.identifier', 'c.name', 'c.description'] };

/** The name a cursor of this list carries. */
export const CONFIGURATION_LIST = 'configurations';

/** The list order of `liveRowsInListOrder`, as a keyset. */
const ORDER: readonly KeyColumn[] = [
  { column: 'c.sorting', direction: 'ASC' },
  { column: 'c.name', direction: 'ASC' },
  { column: 'c.uid', direction: 'ASC' },
];
const KEYS = ['c_sorting', 'c_name', 'c_uid'];
export const CONFIGURATION_KEY_KINDS: readonly KeyKind[] = ['value', 'value', 'integer'];

export class ConfigurationRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
  ) {}

  /** The non-deleted configurations that pass `filter`, in list order, as a keyset source. */
  listed(filter: TaggedListFilter): KeysetSource<ListedConfiguration> {
    const conditions = this.conditions(filter);
    const rows = () => this.dataSource.getRepository(ConfigurationEntity).createQueryBuilder('c').where('c.deleted = 0');
    return {
      read: async (after, limit) => {
        const page = () => {
          const query = rows()
            .leftJoin(ModelEntity, 'm', 'm.uid = c.model_uid AND m.deleted = 0')
            .leftJoin(ProviderEntity, 'p', 'p.uid = m.provider_uid AND p.deleted = 0')
            .addSelect('m')
            .addSelect('p');
          for (const { column, direction } of ORDER) query.addOrderBy(column, direction);
          return query.limit(limit);
        };
        const select = filteredSelect(`configurations:page:${limit}`, page, after ? [...conditions, afterPosition(ORDER, after, 'after')] : conditions);
        return (await getShapedEntityRows(this.dataSource, select, ['m', 'p'], KEYS)).map(({ main, joined: [model, provider], key }) => ({
          row: { configuration: main, model: (model as ModelEntity | null) ?? null, provider: (provider as ProviderEntity | null) ?? null },
          position: positionOf(key),
        }));
      },
      count: async () => {
        const [[count] = []] = await getShapedArrays(this.dataSource, filteredSelect('configurations:count', () => rows().select('COUNT(*)', 'count'), conditions));
        return Number(count ?? 0);
      },
      existsAtOrBefore: async (position) => {
        const select = filteredSelect('configurations:before', () => rows().select('c.uid', 'uid').limit(1), [...conditions, atOrBeforePosition(ORDER, position, 'before')]);
        return (await getShapedArrays(this.dataSource, select)).length > 0;
      },
    };
  }

  /** The non-deleted configurations with these uids, in one query. */
  async findByUids(uids: readonly number[]): Promise<ConfigurationEntity[]> {
    if (uids.length === 0) return [];
    return this.dataSource.getRepository(ConfigurationEntity).createQueryBuilder('c').where('c.deleted = 0').andWhere('c.uid IN (:...uids)', { uids: [...uids] }).getMany();
  }

  /**
   * nr_llm's default configuration: the first active one marked default,
   * neither deleted nor hidden (as Extbase reads it), in list order.
   */
  findActiveDefault(): Promise<ConfigurationEntity | null> {
    return this.dataSource
      .getRepository(ConfigurationEntity)
      .createQueryBuilder('c')
      .where('c.deleted = 0 AND c.hidden = 0 AND c.is_active = 1 AND c.is_default = 1')
      .orderBy('c.sorting', 'ASC')
      .addOrderBy('c.uid', 'ASC')
      .getOne();
  }

  private conditions(filter: TaggedListFilter): SqlCondition[] {
    return taggedListConditions(this.dialect, COLUMNS, filter);
  }

}
