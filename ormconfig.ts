/**
 * The data source the TypeORM CLI uses (`npx typeorm -d dist/ormconfig.js migration:show`).
 * It reads the same DATABASE_URL / SCHEMA_MODE as the server. MySQL needs a
 * known flavour up front here, so set DATABASE_FLAVOUR=mariadb for MariaDB.
 */
import 'reflect-metadata';
import { DataSource } from 'typeorm';
import { loadConfig } from './src/config';
import { allEntities } from './src/db/entities';
import { MIGRATIONS_TABLE } from './src/db/data-source';
import { mysqlOwnMigrations, mysqlTypo3Migrations } from './src/db/migrations/mysql';
import { sqliteOwnMigrations, sqliteTypo3Migrations } from './src/db/migrations/sqlite';

const config = loadConfig({ ...process.env, SECRET_KEY: process.env.SECRET_KEY ?? 'cli-does-not-decrypt-keys' });
const own = config.schemaMode === 'own';

export default config.database.kind === 'sqlite'
  ? new DataSource({
      type: 'better-sqlite3',
      database: config.database.file,
      entities: allEntities,
      migrations: own ? [...sqliteTypo3Migrations, ...sqliteOwnMigrations] : sqliteOwnMigrations,
      migrationsTableName: MIGRATIONS_TABLE,
      synchronize: false,
    })
  : new DataSource({
      type: process.env.DATABASE_FLAVOUR === 'mariadb' ? 'mariadb' : 'mysql',
      url: config.database.url,
      charset: 'utf8mb4_unicode_ci',
      entities: allEntities,
      migrations: own ? [...mysqlTypo3Migrations, ...mysqlOwnMigrations] : mysqlOwnMigrations,
      migrationsTableName: MIGRATIONS_TABLE,
      synchronize: false,
    });
