/**
 * Fast reads for the hot list paths: `getRawMany()` plus a mapper compiled
 * once per entity from TypeORM's own metadata (column names, transformers).
 * It yields the same entity objects as `getMany()` at a fraction of the cost
 * of TypeORM's generic hydration, which dominated list queries in profiles.
 */
import type { DataSource, ObjectLiteral, SelectQueryBuilder, ValueTransformer } from 'typeorm';

type Mapper<T> = (raw: Record<string, unknown>) => T;
type ArrayMapper<T> = (row: readonly unknown[]) => T;

const mappers = new WeakMap<DataSource, Map<string, Mapper<unknown>>>();

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

function compile<T>(dataSource: DataSource, query: SelectQueryBuilder<ObjectLiteral>, alias = query.alias): Mapper<T> {
  const { prototype, columns } = shapeOf(dataSource, query, alias);
  return (raw) => {
    const entity = Object.create(prototype) as Record<string, unknown>;
    for (const column of columns) {
      const value = raw[column.key];
      entity[column.property] = column.from ? column.from(value) : value;
    }
    return entity as T;
  };
}

function mapperFor<T>(dataSource: DataSource, query: SelectQueryBuilder<ObjectLiteral>, alias: string): Mapper<T> {
  let perSource = mappers.get(dataSource);
  if (!perSource) mappers.set(dataSource, (perSource = new Map()));
  const target = query.expressionMap.aliases.find((candidate) => candidate.name === alias)?.metadata.tableName;
  const key = `${target}:${alias}`;
  let mapper = perSource.get(key) as Mapper<T> | undefined;
  if (!mapper) perSource.set(key, (mapper = compile<T>(dataSource, query, alias) as Mapper<unknown> as Mapper<T>));
  return mapper;
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

export async function getEntities<T extends ObjectLiteral>(dataSource: DataSource, query: SelectQueryBuilder<T>): Promise<T[]> {
  const mapper = mapperFor<T>(dataSource, query as SelectQueryBuilder<ObjectLiteral>, query.alias);
  const rows = await query.getRawMany<Record<string, unknown>>();
  return rows.map(mapper);
}

interface PreparedSelect {
  sql: string;
  parameters: unknown[];
  query: SelectQueryBuilder<ObjectLiteral>;
  /** Array mappers per alias, compiled on the first result (they need its column names). */
  arrayMappers?: Map<string, ArrayMapper<unknown>>;
  /** The better-sqlite3 statement, prepared on first use (SQLite only). */
  statement?: SqliteStatement;
}

const prepared = new WeakMap<DataSource, Map<string, PreparedSelect>>();
const MAX_PREPARED = 200;

/**
 * A fixed-shape list query whose SQL is generated once per `key` and reused:
 * TypeORM rebuilds the SQL text on every call, which showed up at 5–10% of a
 * list request. `key` must capture everything that changes the SQL (page, flags).
 */
function preparedSelect(dataSource: DataSource, key: string, build: () => SelectQueryBuilder<ObjectLiteral>): PreparedSelect {
  let perSource = prepared.get(dataSource);
  if (!perSource) prepared.set(dataSource, (perSource = new Map()));
  let entry = perSource.get(key);
  if (!entry) {
    const query = build();
    const [sql, parameters] = query.getQueryAndParameters();
    if (perSource.size >= MAX_PREPARED) perSource.clear();
    perSource.set(key, (entry = { sql, parameters, query }));
  }
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

/**
 * Runs a prepared select and returns its rows as arrays. Rows as arrays skip
 * building one object with every column per row: on the configuration list
 * (62 columns with model and provider) better-sqlite3 takes 0.31 ms instead of
 * 0.72 ms for 50 rows. Values are the same as `dataSource.query` returns
 * (same connection, same driver options); the query goes to TypeORM's logger.
 */
async function selectArrays(dataSource: DataSource, entry: PreparedSelect): Promise<{ columns: readonly string[]; rows: unknown[][] }> {
  dataSource.logger.logQuery(entry.sql, entry.parameters);
  const driver = dataSource.driver as unknown as { databaseConnection?: { prepare(sql: string): SqliteStatement }; obtainMasterConnection?: () => Promise<MysqlConnection> };
  if (dataSource.options.type === 'better-sqlite3' && driver.databaseConnection) {
    entry.statement ??= driver.databaseConnection.prepare(entry.sql).raw(true);
    const rows = entry.statement.all(...entry.parameters);
    return { columns: entry.statement.columns().map((column) => column.name), rows };
  }
  if (driver.obtainMasterConnection) {
    const connection = await driver.obtainMasterConnection();
    try {
      return await new Promise((resolve, reject) =>
        connection.query({ sql: entry.sql, rowsAsArray: true }, entry.parameters, (error, rows, fields) =>
          error ? reject(error) : resolve({ columns: fields.map((field) => field.name), rows }),
        ),
      );
    } finally {
      connection.release();
    }
  }
  const rows = (await dataSource.query(entry.sql, entry.parameters)) as Record<string, unknown>[];
  const columns = rows[0] ? Object.keys(rows[0]) : [];
  return { columns, rows: rows.map((row) => columns.map((column) => row[column])) };
}

function arrayMapperFor<T>(dataSource: DataSource, entry: PreparedSelect, alias: string, columns: readonly string[]): ArrayMapper<T> {
  entry.arrayMappers ??= new Map();
  let mapper = entry.arrayMappers.get(alias);
  if (!mapper) entry.arrayMappers.set(alias, (mapper = compileForArrays(dataSource, entry.query, alias, columns)));
  return mapper as ArrayMapper<T>;
}

/** `getEntities` for a fixed-shape query, with its SQL prepared once per key. */
export async function getPreparedEntities<T extends ObjectLiteral>(dataSource: DataSource, key: string, build: () => SelectQueryBuilder<T>): Promise<T[]> {
  const entry = preparedSelect(dataSource, key, build as () => SelectQueryBuilder<ObjectLiteral>);
  const { columns, rows } = await selectArrays(dataSource, entry);
  if (rows.length === 0) return [];
  return rows.map(arrayMapperFor<T>(dataSource, entry, entry.query.alias, columns));
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
  const { columns, rows } = await selectArrays(dataSource, entry);
  if (rows.length === 0) return [];
  const main = arrayMapperFor<T>(dataSource, entry, entry.query.alias, columns);
  const others = joined.map((alias) => ({ uid: columns.indexOf(`${alias}_uid`), map: arrayMapperFor<ObjectLiteral>(dataSource, entry, alias, columns) }));
  return rows.map((row) => ({
    main: main(row),
    joined: others.map(({ uid, map }) => (row[uid] === null || row[uid] === undefined ? null : map(row))),
  }));
}
