/**
 * Builds the TypeORM data source for the configured database: embedded SQLite
 * (better-sqlite3) or MySQL 8 / MariaDB (mysql2). The schema only ever changes
 * through the committed migrations; `synchronize` stays off.
 */
import fs from 'node:fs';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { DataSource, type DataSourceOptions, type EntityManager, type MixedList } from 'typeorm';
import type { DatabaseConfig } from '../config';
import { DatabaseBusyError, isDatabaseBusy } from '../shared/errors';
import { KeyedMutex } from '../shared/keyed-mutex';
import { registerSqliteTagFunction } from '../snippets/tag-match-sql';
import { isMediumTextColumn } from './columns';
import { allEntities } from './entities';
import { mysqlOwnMigrations, mysqlTypo3Migrations } from './migrations/mysql';
import { sqliteOwnMigrations, sqliteTypo3Migrations } from './migrations/sqlite';
import { type CheckpointedConnection, type SqliteCheckpointer, type SqliteCheckpointerOptions, startSqliteCheckpointer } from './sqlite-checkpointer';

export type Dialect = 'sqlite' | 'mysql' | 'mariadb';
export type SchemaMode = 'own' | 'shared';

export const MIGRATIONS_TABLE = 'promptwire_migrations';

export interface DataSourceSetup {
  database: DatabaseConfig;
  schemaMode: SchemaMode;
  /** SQLite: the longest one statement may wait for another process's write lock (it blocks the event loop). Default 100. */
  sqliteBusyTimeoutMs?: number;
  /** SQLite: how long a transaction waits, asynchronously, for the write lock before a retryable error. Default 5000. */
  sqliteLockWaitMs?: number;
  /** Log every SQL statement through this callback (used by the query-count test). */
  onQuery?: (sql: string) => void;
  /**
   * SQLite files: checkpoint the WAL in a worker thread (see sqlite-checkpointer.ts).
   * Whoever asks for it stops the returned checkpointer before destroying the data source.
   */
  sqliteCheckpoints?: SqliteCheckpointerOptions;
}

export interface OpenedDataSource {
  dataSource: DataSource;
  dialect: Dialect;
  /** Running when `sqliteCheckpoints` was asked for and the database is an SQLite file, else null. */
  checkpointer: SqliteCheckpointer | null;
}

/** MySQL and MariaDB need different TypeORM drivers for a drift-free schema diff (stack-notes.md). */
export async function detectMysqlFlavour(url: string): Promise<'mysql' | 'mariadb'> {
  const connection = await mysql.createConnection(url);
  try {
    const [rows] = await connection.query('SELECT VERSION() AS version');
    const version = String((rows as { version: string }[])[0]?.version ?? '');
    return /mariadb/i.test(version) ? 'mariadb' : 'mysql';
  } finally {
    await connection.end();
  }
}

export async function createDataSource(setup: DataSourceSetup): Promise<OpenedDataSource> {
  const { database, schemaMode } = setup;
  const logger = setup.onQuery
    ? {
        logQuery: (query: string) => setup.onQuery?.(query),
        logQueryError: () => undefined,
        logQuerySlow: () => undefined,
        logSchemaBuild: () => undefined,
        logMigration: () => undefined,
        log: () => undefined,
      }
    : undefined;

  let options: DataSourceOptions;
  let dialect: Dialect;
  if (database.kind === 'sqlite') {
    if (database.file !== ':memory:') fs.mkdirSync(path.dirname(database.file), { recursive: true });
    dialect = 'sqlite';
    options = {
      type: 'better-sqlite3',
      database: database.file,
      enableWAL: database.file !== ':memory:',
      prepareDatabase: (db: { pragma(sql: string): unknown } & Parameters<typeof registerSqliteTagFunction>[0]) => {
        // The longest one statement may block the event loop waiting for another process's write (see takeSqliteWriteLock).
        db.pragma(`busy_timeout = ${setup.sqliteBusyTimeoutMs ?? 100}`);
        db.pragma('synchronous = NORMAL');
        // Tag filters in SQL call the tag rules themselves (tag-match-sql.ts).
        registerSqliteTagFunction(db);
      },
      entities: allEntities,
      migrations: migrationsFor('sqlite', schemaMode),
      migrationsTableName: MIGRATIONS_TABLE,
      synchronize: false,
      logging: setup.onQuery ? ['query'] : false,
      logger,
    };
  } else {
    dialect = await detectMysqlFlavour(database.url);
    options = {
      type: dialect,
      url: database.url,
      charset: 'utf8mb4_unicode_ci',
      supportBigNumbers: true,
      poolSize: 10,
      entities: allEntities,
      migrations: migrationsFor('mysql', schemaMode),
      migrationsTableName: MIGRATIONS_TABLE,
      synchronize: false,
      logging: setup.onQuery ? ['query'] : false,
      logger,
    };
  }

  const dataSource = new DataSource(options);
  await dataSource.initialize();
  if (dialect !== 'sqlite') applyMysqlColumnTypes(dataSource, dialect);
  else serializeTransactions(dataSource, setup.sqliteLockWaitMs ?? 5000);
  let checkpointer: SqliteCheckpointer | null = null;
  if (database.kind === 'sqlite' && database.file !== ':memory:' && setup.sqliteCheckpoints) {
    checkpointer = await startSqliteCheckpointer(sqliteConnectionOf(dataSource), database.file, setup.sqliteCheckpoints);
  }
  return { dataSource, dialect, checkpointer };
}

function migrationsFor(dialect: 'sqlite' | 'mysql', schemaMode: SchemaMode): MixedList<Function> {
  const [typo3, own] = dialect === 'sqlite' ? [sqliteTypo3Migrations, sqliteOwnMigrations] : [mysqlTypo3Migrations, mysqlOwnMigrations];
  return schemaMode === 'own' ? [...typo3, ...own] : [...own];
}

/**
 * Widen the TYPO3 `mediumtext` columns, which SQLite has no name for (see
 * `MediumTextColumn`), and give the `tx_nrllm_*` indexes the names nr_llm's
 * ext_tables.sql gives them (`parent`, `identifier`, …). Index names are per
 * table in MySQL but per database in SQLite, so the entities carry them with
 * the table name in front and MySQL drops it.
 */
function applyMysqlColumnTypes(dataSource: DataSource, dialect: 'mysql' | 'mariadb'): void {
  for (const metadata of dataSource.entityMetadatas) {
    // MySQL 8 has no integer display widths (`int(11)` reads back as `int`); MariaDB keeps them, as nr_llm's DDL writes them.
    if (dialect === 'mysql') for (const column of metadata.columns) column.width = undefined;
    if (metadata.tableName.startsWith('tx_nrllm_')) {
      for (const index of metadata.indices) {
        if (index.name.startsWith(`${metadata.tableName}_`)) index.name = index.name.slice(metadata.tableName.length + 1);
      }
    }
    for (const column of metadata.columns) {
      const owner = typeof column.target === 'function' ? column.target.name : metadata.targetName;
      if (isMediumTextColumn(owner, column.propertyName) || isMediumTextColumn(metadata.targetName, column.propertyName)) {
        column.type = 'mediumtext';
      }
    }
  }
}

/**
 * TypeORM's better-sqlite3 driver runs every query on one shared connection, so
 * two transactions in flight at once would nest as savepoints of each other and
 * commit or roll back each other's work. On SQLite, transactions therefore run
 * one at a time. (Code inside a transaction uses its own manager, never
 * `dataSource.transaction` again, so this cannot deadlock.)
 *
 * Each transaction also takes the database's write lock first thing (see
 * `takeSqliteWriteLock`): a check and the write that depends on it (identifier
 * uniqueness) are then atomic across processes sharing the file, and a
 * transaction never fails half-way because another process wrote since its
 * first read.
 */
function serializeTransactions(dataSource: DataSource, lockWaitMs: number): void {
  const manager = dataSource.manager;
  const original = manager.transaction.bind(manager) as (...args: unknown[]) => Promise<unknown>;
  const lock = new KeyedMutex();
  const database = sqliteConnectionOf(dataSource);
  manager.transaction = ((...args: unknown[]) => {
    // transaction(work) or transaction(isolationLevel, work); DataSource.transaction passes both slots, the second maybe undefined.
    const [isolationLevel, work] = (typeof args[0] === 'function' ? [undefined, args[0]] : [args[0], args[1]]) as [unknown, (manager: EntityManager) => Promise<unknown>];
    const locked = async (inner: EntityManager) => {
      await takeSqliteWriteLock(database, lockWaitMs);
      return work(inner);
    };
    return lock.run('transaction', () => (isolationLevel === undefined ? original(locked) : original(isolationLevel, locked)));
  }) as typeof manager.transaction;
}

interface SqliteHandle extends CheckpointedConnection {
  prepare(sql: string): { run(): unknown };
}

/** The better-sqlite3 connection TypeORM's driver runs every query on. */
function sqliteConnectionOf(dataSource: DataSource): SqliteHandle {
  return (dataSource.driver as unknown as { databaseConnection: SqliteHandle }).databaseConnection;
}

/**
 * Takes SQLite's write lock inside the transaction just begun, without
 * blocking the event loop: better-sqlite3 is synchronous, so waiting through
 * `busy_timeout` would freeze every client while another process writes.
 * Each attempt fails at once when the lock is held (busy_timeout 0 for that
 * one statement); the wait between attempts is asynchronous. After
 * `lockWaitMs` the request gets a retryable error and nothing was written.
 *
 * The attempt is a write that changes nothing, on the service's own
 * migrations table (never a TYPO3 table).
 */
function driverCode(error: unknown): unknown {
  return (error as { code?: unknown } | null)?.code;
}

async function takeSqliteWriteLock(database: SqliteHandle, lockWaitMs: number): Promise<void> {
  const deadline = Date.now() + lockWaitMs;
  let statement: { run(): unknown };
  try {
    statement = database.prepare(`UPDATE ${MIGRATIONS_TABLE} SET id = id WHERE 0`);
  } catch {
    return; // no migrations table yet (a database being set up): nothing to share it with either
  }
  for (let attempt = 0; ; attempt++) {
    const busyTimeout = database.pragma('busy_timeout', { simple: true });
    database.pragma('busy_timeout = 0');
    try {
      statement.run();
      return;
    } catch (error) {
      if (!isDatabaseBusy(error)) throw error;
      // The transaction read a snapshot while it waited (the connection is shared, and other
      // work ran on it meanwhile) and another process has committed since: that snapshot can
      // never take the lock. The transaction has done nothing yet, so it starts again.
      if (driverCode(error) === 'SQLITE_BUSY_SNAPSHOT') {
        database.prepare('ROLLBACK').run();
        database.prepare('BEGIN').run();
      }
      if (Date.now() >= deadline) throw new DatabaseBusyError(`Another process has held the database's write lock for over ${lockWaitMs} ms; nothing was changed. Try again shortly.`);
    } finally {
      database.pragma(`busy_timeout = ${Number(busyTimeout)}`);
    }
    await new Promise((resolve) => setTimeout(resolve, Math.min(50, 5 * 2 ** Math.min(attempt, 4)) + Math.random() * 5));
  }
}
