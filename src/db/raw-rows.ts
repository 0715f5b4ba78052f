/**
 * Fast reads for the list paths: the query's rows fetched as arrays, and a
 * mapper compiled once per entity and result shape from TypeORM's own
 * metadata (column names, transformers). It yields the same entity objects as
 * `getMany()` at a fraction of the cost of TypeORM's generic hydration, which
 * dominated list queries in profiles.
 */
import type { DataSource, ObjectLiteral, SelectQueryBuilder, ValueTransformer } from 'typeorm';

type ArrayMapper<T> = (row: readonly unknown[]) => T;

interface MappedColumn {
  /** The result column: `${alias}_${databaseName}`, as TypeORM's select names it. */
  key: string;
  property: string;
  from: ((value: unknown) => unknown) | null;
}

interface EntityShape {
  prototype: object;
  columns: MappedColumn[];
}

function shapeOf(dataSource: DataSource, query: SelectQueryBuilder<ObjectLiteral>, alias: string): EntityShape {
  const target = query.expressionMap.aliases.find((candidate) => candidate.name === alias)?.target;
  const metadata = dataSource.getMetadata(target ?? '');
  const columns = metadata.columns.map((column) => {
    const transformer = column.transformer as ValueTransformer | ValueTransformer[] | undefined;
    const from = Array.isArray(transformer) ? (value: unknown) => transformer.reduceRight((v, t) => t.from(v), value) : transformer ? transformer.from.bind(transformer) : null;
    return { key: `${alias}_${column.databaseName}`, property: column.propertyName, from };
  });
  return { prototype: (metadata.target as { prototype: object }).prototype, columns };
}

/** A mapper for rows fetched as arrays, given the result's column names. */
function compileForArrays<T>(dataSource: DataSource, query: SelectQueryBuilder<ObjectLiteral>, alias: string, resultColumns: readonly string[]): ArrayMapper<T> {
  const { prototype, columns } = shapeOf(dataSource, query, alias);
  const indexed = columns.map((column) => ({ ...column, index: resultColumns.indexOf(column.key) }));
  const missing = indexed.find((column) => column.index < 0);
  if (missing) throw new Error(`The prepared query has no column ${missing.key}`);
  return (row) => {
    const entity = Object.create(prototype) as Record<string, unknown>;
    for (const column of indexed) {
      const value = row[column.index];
      entity[column.property] = column.from ? column.from(value) : value;
    }
    return entity as T;
  };
}

/** Entities of `query`, read on a pooled connection: not for queries inside a transaction. */
export async function getEntities<T extends ObjectLiteral>(dataSource: DataSource, query: SelectQueryBuilder<T>): Promise<T[]> {
  const [sql, parameters] = query.getQueryAndParameters();
  const { columns, rows } = await selectArrays(dataSource, sql, parameters);
  if (rows.length === 0) return [];
  return rows.map(arrayMapperFor<T>(dataSource, query as SelectQueryBuilder<ObjectLiteral>, query.alias, columns));
}

interface PreparedSelect {
  sql: string;
  parameters: unknown[];
  query: SelectQueryBuilder<ObjectLiteral>;
}

const prepared = new WeakMap<DataSource, Map<string, PreparedSelect>>();

/**
 * A fixed-shape list query whose SQL is generated once per `key` and reused:
 * TypeORM rebuilds the SQL text on every call, which showed up at 5–10% of a
 * list request. `key` must capture everything that changes the SQL (page, flags).
 */
function preparedSelect(dataSource: DataSource, key: string, build: () => SelectQueryBuilder<ObjectLiteral>): PreparedSelect {
  let perSource = prepared.get(dataSource);
  if (!perSource) prepared.set(dataSource, (perSource = new Map()));
  const entry = cached(perSource, key, () => {
    const query = build();
    const [sql, parameters] = query.getQueryAndParameters();
    return { sql, parameters, query };
  });
  return entry;
}

interface SqliteStatement {
  raw(toggle: boolean): SqliteStatement;
  all(...parameters: unknown[]): unknown[][];
  columns(): { name: string }[];
}

interface MysqlConnection {
  query(options: { sql: string; rowsAsArray: boolean }, values: unknown[], callback: (error: Error | null, rows: unknown[][], fields: { name: string }[]) => void): void;
  release(): void;
}

const statements = new WeakMap<object, Map<string, { statement: SqliteStatement; columns: readonly string[] }>>();
const arrayMappers = new WeakMap<DataSource, Map<string, ArrayMapper<unknown>>>();
const MAX_CACHED = 200;

function cached<V>(cache: Map<string, V>, key: string, make: () => V): V {
  let value = cache.get(key);
  if (value === undefined) {
    if (cache.size >= MAX_CACHED) cache.clear();
    cache.set(key, (value = make()));
  }
  return value;
}

/**
 * Runs a select and returns its rows as arrays. Rows as arrays skip building
 * one object with every column per row: on the configuration list (62 columns
 * with model and provider) better-sqlite3 takes 0.31 ms instead of 0.72 ms for
 * 50 rows. Values are the same as `dataSource.query` returns (same connection,
 * same driver options); the query goes to TypeORM's logger.
 */
export async function selectArrays(dataSource: DataSource, sql: string, parameters: unknown[]): Promise<{ columns: readonly string[]; rows: unknown[][] }> {
  dataSource.logger.logQuery(sql, parameters);
  const driver = dataSource.driver as unknown as { databaseConnection?: { prepare(sql: string): SqliteStatement }; obtainMasterConnection?: () => Promise<MysqlConnection> };
  const sqlite = dataSource.options.type === 'better-sqlite3' ? driver.databaseConnection : undefined;
  if (sqlite) {
    let perConnection = statements.get(sqlite);
    if (!perConnection) statements.set(sqlite, (perConnection = new Map()));
    const { statement, columns } = cached(perConnection, sql, () => {
      const prepared = sqlite.prepare(sql).raw(true);
      return { statement: prepared, columns: prepared.columns().map((column) => column.name) };
    });
    return { columns, rows: statement.all(...parameters) };
  }
  if (driver.obtainMasterConnection) {
    const connection = await driver.obtainMasterConnection();
    try {
      return await new Promise((resolve, reject) =>
        connection.query({ sql, rowsAsArray: true }, parameters, (error, rows, fields) => (error ? reject(error) : resolve({ columns: fields.map((field) => field.name), rows }))),
      );
    } finally {
      connection.release();
    }
  }
  const rows = (await dataSource.query(sql, parameters)) as Record<string, unknown>[];
  const columns = rows[0] ? Object.keys(rows[0]) : [];
  return { columns, rows: rows.map((row) => columns.map((column) => row[column])) };
}

/** The mapper of `alias`'s entity for a result with these columns (compiled once per shape). */
function arrayMapperFor<T>(dataSource: DataSource, query: SelectQueryBuilder<ObjectLiteral>, alias: string, columns: readonly string[]): ArrayMapper<T> {
  let perSource = arrayMappers.get(dataSource);
  if (!perSource) arrayMappers.set(dataSource, (perSource = new Map()));
  const table = query.expressionMap.aliases.find((candidate) => candidate.name === alias)?.metadata.tableName;
  return cached(perSource, `${table}:${alias}:${columns.join(',')}`, () => compileForArrays(dataSource, query, alias, columns)) as ArrayMapper<T>;
}

/** `getEntities` for a fixed-shape query, with its SQL prepared once per key. */
export async function getPreparedEntities<T extends ObjectLiteral>(dataSource: DataSource, key: string, build: () => SelectQueryBuilder<T>): Promise<T[]> {
  const entry = preparedSelect(dataSource, key, build as () => SelectQueryBuilder<ObjectLiteral>);
  const { columns, rows } = await selectArrays(dataSource, entry.sql, entry.parameters);
  if (rows.length === 0) return [];
  return rows.map(arrayMapperFor<T>(dataSource, entry.query, entry.query.alias, columns));
}

/**
 * Rows of a fixed-shape query with LEFT JOINed entities (joined with `leftJoin` +
 * `addSelect`): for each row, the main entity and each joined one (null when the
 * join found nothing). The SQL is prepared once per key.
 */
export async function getPreparedEntityRows<T extends ObjectLiteral>(
  dataSource: DataSource,
  key: string,
  build: () => SelectQueryBuilder<T>,
  joined: readonly string[],
): Promise<{ main: T; joined: (ObjectLiteral | null)[] }[]> {
  const entry = preparedSelect(dataSource, key, build as () => SelectQueryBuilder<ObjectLiteral>);
  const { columns, rows } = await selectArrays(dataSource, entry.sql, entry.parameters);
  if (rows.length === 0) return [];
  const main = arrayMapperFor<T>(dataSource, entry.query, entry.query.alias, columns);
  const others = joined.map((alias) => ({ uid: columns.indexOf(`${alias}_uid`), map: arrayMapperFor<ObjectLiteral>(dataSource, entry.query, alias, columns) }));
  return rows.map((row) => ({
    main: main(row),
    joined: others.map(({ uid, map }) => (row[uid] === null || row[uid] === undefined ? null : map(row))),
  }));
}

/**
 * A select whose SQL text depends only on its shape (which conditions, how
 * many tags, the page size), not on the values it compares with: the filtered
 * keyset lists. TypeORM generates its SQL once per shape; each call binds its
 * own values. Values are text, numbers or NULL, bound as they are.
 */
export interface ShapedSelect<T extends ObjectLiteral> {
  /** Everything that changes the SQL text; the lengths of array values are added to it. */
  shape: string;
  /** The named parameters (`:name`, `:...names`) `build` uses, with this call's values. */
  values: Record<string, unknown>;
  build: () => SelectQueryBuilder<T>;
}

interface PreparedShape {
  sql: string;
  /** Which value each placeholder takes, in order: a name, and an index into an array value. */
  order: { name: string; index: number | null }[];
  query: SelectQueryBuilder<ObjectLiteral>;
}

const shapes = new WeakMap<DataSource, Map<string, PreparedShape>>();
const PLACEHOLDER = '\uE000promptwire:';
const PLACEHOLDER_PATTERN = /^\uE000promptwire:([A-Za-z0-9_.]+):(\d*)$/;

/**
 * The SQL of a shape, generated once: the query is built with a marker in
 * place of each value, so the order in which the driver binds the values
 * (which TypeORM decides, expanding arrays) can be read back from the markers.
 */
function preparedShape(dataSource: DataSource, select: ShapedSelect<ObjectLiteral>): PreparedShape {
  let perSource = shapes.get(dataSource);
  if (!perSource) shapes.set(dataSource, (perSource = new Map()));
  const arrays = Object.entries(select.values).map(([name, value]) => (Array.isArray(value) ? `${name}[${value.length}]` : name));
  return cached(perSource, `${select.shape}|${arrays.join(',')}`, () => {
    const query = select.build();
    const markers = Object.fromEntries(
      Object.entries(select.values).map(([name, value]) => [name, Array.isArray(value) ? value.map((_, index) => `${PLACEHOLDER}${name}:${index}`) : `${PLACEHOLDER}${name}:`]),
    );
    query.setParameters(markers);
    const [sql, parameters] = query.getQueryAndParameters();
    const order = parameters.map((parameter) => {
      const match = typeof parameter === 'string' ? PLACEHOLDER_PATTERN.exec(parameter) : null;
      if (!match) throw new Error(`The shaped query "${select.shape}" binds a value it was not given`);
      return { name: match[1], index: match[2] === '' ? null : Number(match[2]) };
    });
    return { sql, order, query };
  });
}

function boundValues(shape: PreparedShape, values: Record<string, unknown>): unknown[] {
  return shape.order.map(({ name, index }) => (index === null ? values[name] : (values[name] as unknown[])[index]));
}

/** `getEntityRowsWithKeys` for a shaped select: its SQL generated once per shape. */
export async function getShapedEntityRows<T extends ObjectLiteral>(
  dataSource: DataSource,
  select: ShapedSelect<T>,
  joined: readonly string[],
  keys: readonly string[],
): Promise<{ main: T; joined: (ObjectLiteral | null)[]; key: unknown[] }[]> {
  const shape = preparedShape(dataSource, select as ShapedSelect<ObjectLiteral>);
  const { columns, rows } = await selectArrays(dataSource, shape.sql, boundValues(shape, select.values));
  if (rows.length === 0) return [];
  const main = arrayMapperFor<T>(dataSource, shape.query, shape.query.alias, columns);
  const others = joined.map((alias) => ({ uid: columns.indexOf(`${alias}_uid`), map: arrayMapperFor<ObjectLiteral>(dataSource, shape.query, alias, columns) }));
  const keyIndexes = keys.map((key) => {
    const index = columns.indexOf(key);
    if (index < 0) throw new Error(`The query has no column ${key}`);
    return index;
  });
  return rows.map((row) => ({
    main: main(row),
    joined: others.map(({ uid, map }) => (row[uid] === null || row[uid] === undefined ? null : map(row))),
    key: keyIndexes.map((index) => row[index]),
  }));
}

/** The rows of a shaped select as arrays of raw values (a count, an existence check). */
export async function getShapedArrays(dataSource: DataSource, select: ShapedSelect<ObjectLiteral>): Promise<unknown[][]> {
  const shape = preparedShape(dataSource, select);
  return (await selectArrays(dataSource, shape.sql, boundValues(shape, select.values))).rows;
}
