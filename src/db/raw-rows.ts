/**
 * Fast reads for the hot list paths: `getRawMany()` plus a mapper compiled
 * once per entity from TypeORM's own metadata (column names, transformers).
 * It yields the same entity objects as `getMany()` at a fraction of the cost
 * of TypeORM's generic hydration, which dominated list queries in profiles.
 */
import type { DataSource, ObjectLiteral, SelectQueryBuilder, ValueTransformer } from 'typeorm';

type Mapper<T> = (raw: Record<string, unknown>) => T;

const mappers = new WeakMap<DataSource, Map<string, Mapper<unknown>>>();

function compile<T>(dataSource: DataSource, query: SelectQueryBuilder<T & ObjectLiteral>): Mapper<T> {
  const alias = query.alias;
  const metadata = dataSource.getMetadata(query.expressionMap.mainAlias?.target ?? '');
  const columns = metadata.columns.map((column) => {
    const transformer = column.transformer as ValueTransformer | ValueTransformer[] | undefined;
    const from = Array.isArray(transformer) ? (value: unknown) => transformer.reduceRight((v, t) => t.from(v), value) : transformer ? transformer.from.bind(transformer) : null;
    return { key: `${alias}_${column.databaseName}`, property: column.propertyName, from };
  });
  const prototype = (metadata.target as { prototype: object }).prototype;
  return (raw) => {
    const entity = Object.create(prototype) as Record<string, unknown>;
    for (const column of columns) {
      const value = raw[column.key];
      entity[column.property] = column.from ? column.from(value) : value;
    }
    return entity as T;
  };
}

export async function getEntities<T extends ObjectLiteral>(dataSource: DataSource, query: SelectQueryBuilder<T>): Promise<T[]> {
  let perSource = mappers.get(dataSource);
  if (!perSource) mappers.set(dataSource, (perSource = new Map()));
  const key = `${query.expressionMap.mainAlias?.metadata.tableName}:${query.alias}`;
  let mapper = perSource.get(key) as Mapper<T> | undefined;
  if (!mapper) perSource.set(key, (mapper = compile<T>(dataSource, query) as Mapper<unknown> as Mapper<T>));
  const rows = await query.getRawMany<Record<string, unknown>>();
  return rows.map(mapper);
}
