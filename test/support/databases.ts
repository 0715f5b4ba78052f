/**
 * Every end-to-end suite runs on SQLite, and on MySQL/MariaDB when
 * TEST_MYSQL_URL is set. CI sets REQUIRE_MYSQL_TESTS=1 so that a missing
 * database fails instead of silently skipping.
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import type { DatabaseConfig } from '../../src/config';

export type TestDialect = 'sqlite' | 'mysql';

const mysqlUrl = process.env.TEST_MYSQL_URL?.trim() || null;
if (!mysqlUrl && process.env.REQUIRE_MYSQL_TESTS === '1') {
  throw new Error('REQUIRE_MYSQL_TESTS=1 but TEST_MYSQL_URL is not set: the MySQL tests would be skipped.');
}

export const testDialects: TestDialect[] = mysqlUrl ? ['sqlite', 'mysql'] : ['sqlite'];

export interface TestDatabase {
  dialect: TestDialect;
  config: DatabaseConfig;
  /** Runs raw SQL against the database (fixtures written "by another program"). */
  query(sql: string, params?: unknown[]): Promise<unknown>;
  drop(): Promise<void>;
}

/** A fresh, empty database of the given dialect, private to the caller. */
export async function createTestDatabase(dialect: TestDialect): Promise<TestDatabase> {
  const name = `pw_test_${process.pid}_${crypto.randomBytes(4).toString('hex')}`;
  if (dialect === 'sqlite') {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'promptwire-test-'));
    const file = path.join(directory, `${name}.sqlite`);
    // better-sqlite3 is loaded lazily so that only SQLite suites need it.
    const Database = (await import('better-sqlite3')).default;
    let handle: InstanceType<typeof Database> | null = null;
    const open = () => (handle ??= new Database(file));
    return {
      dialect,
      config: { kind: 'sqlite', file, dataDirectory: directory },
      async query(sql, params = []) {
        const statement = open().prepare(sql);
        return statement.reader ? statement.all(...(params as unknown[])) : statement.run(...(params as unknown[]));
      },
      async drop() {
        handle?.close();
        fs.rmSync(directory, { recursive: true, force: true });
      },
    };
  }
  if (!mysqlUrl) throw new Error('TEST_MYSQL_URL is not set');
  const admin = await mysql.createConnection(mysqlUrl);
  await admin.query(`CREATE DATABASE \`${name}\` CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await admin.end();
  const url = new URL(mysqlUrl);
  url.pathname = `/${name}`;
  let connection: mysql.Connection | null = null;
  return {
    dialect,
    config: { kind: 'mysql', url: url.toString() },
    async query(sql, params = []) {
      connection ??= await mysql.createConnection(url.toString());
      const [rows] = await connection.query(sql, params);
      return rows;
    },
    async drop() {
      await connection?.end();
      const cleanup = await mysql.createConnection(mysqlUrl);
      await cleanup.query(`DROP DATABASE IF EXISTS \`${name}\``);
      await cleanup.end();
    },
  };
}
