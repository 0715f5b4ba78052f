/**
 * Builds the TypeORM data source for the configured database: embedded SQLite
 * (better-sqlite3) or MySQL 8 / MariaDB (mysql2). The schema only ever changes
 * through the committed migrations; `synchronize` stays off.
 */
import fs from 'node:fs';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { DataSource, type DataSourceOptions, type MixedList } from 'typeorm';
import type { DatabaseConfig } from '../config';
import { KeyedMutex } from '../shared/keyed-mutex';
import { isMediumTextColumn } from './columns';
import { allEntities } from './entities';
import { mysqlOwnMigrations, mysqlTypo3Migrations } from './migrations/mysql';
import { sqliteOwnMigrations, sqliteTypo3Migrations } from './migrations/sqlite';

export type Dialect = 'sqlite' | 'mysql' | 'mariadb';
export type SchemaMode = 'own' | 'shared';

export const MIGRATIONS_TABLE = 'promptwire_migrations';

export interface DataSourceSetup {
  database: DatabaseConfig;
  schemaMode: SchemaMode;
  /** Log every SQL statement through this callback (used by the query-count test). */
  onQuery?: (sql: string) => void;
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

export async function createDataSource(setup: DataSourceSetup): Promise<{ dataSource: DataSource; dialect: Dialect }> {
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
      prepareDatabase: (db: { pragma(sql: string): unknown }) => {
        db.pragma('busy_timeout = 5000');
        db.pragma('synchronous = NORMAL');
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
  if (dialect !== 'sqlite') applyMysqlColumnTypes(dataSource);
  else serializeTransactions(dataSource);
  return { dataSource, dialect };
}

function migrationsFor(dialect: 'sqlite' | 'mysql', schemaMode: SchemaMode): MixedList<Function> {
  const [typo3, own] = dialect === 'sqlite' ? [sqliteTypo3Migrations, sqliteOwnMigrations] : [mysqlTypo3Migrations, mysqlOwnMigrations];
  return schemaMode === 'own' ? [...typo3, ...own] : [...own];
}

/** Widen the TYPO3 `mediumtext` columns, which SQLite has no name for (see `MediumTextColumn`). */
function applyMysqlColumnTypes(dataSource: DataSource): void {
  for (const metadata of dataSource.entityMetadatas) {
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
 */
function serializeTransactions(dataSource: DataSource): void {
  const manager = dataSource.manager;
  const original = manager.transaction.bind(manager) as (...args: unknown[]) => Promise<unknown>;
  const lock = new KeyedMutex();
  manager.transaction = ((...args: unknown[]) => lock.run('transaction', () => original(...args))) as typeof manager.transaction;
}
