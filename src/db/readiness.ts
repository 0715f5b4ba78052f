/**
 * Whether the database this service opened still serves it, for `/readyz`.
 *
 * `SELECT 1` is not enough: it touches no table, so it answers on a MySQL
 * connection whose database was dropped, and on an SQLite handle whose file
 * was deleted (the process keeps reading the unlinked file; nothing written
 * from then on survives a restart or is seen by another process). So the
 * check reads a table the service always has, and on SQLite also checks that
 * the path still names the file that was opened.
 */
import fs from 'node:fs';
import type { DataSource } from 'typeorm';
import { ApiTokenEntity } from '../auth/api-token.entity';
import type { DatabaseConfig } from '../config';

/** Resolves with null when the database is ready, else with why not (for the log). */
export type ReadinessCheck = () => Promise<string | null>;

export function createReadinessCheck(dataSource: DataSource, database: DatabaseConfig): ReadinessCheck {
  const table = dataSource.getMetadata(ApiTokenEntity).tablePath;
  const file = database.kind === 'sqlite' && database.file !== ':memory:' ? database.file : null;
  const opened = file ? fileIdentity(file) : null;
  return async () => {
    if (file) {
      const now = fileIdentity(file);
      if (now === null) return `the database file ${file} is gone`;
      if (opened !== null && now !== opened) return `the database file ${file} was replaced`;
    }
    try {
      await dataSource.query(`SELECT 1 FROM ${dataSource.driver.escape(table)} WHERE 1 = 0`);
      return null;
    } catch (error) {
      return error instanceof Error ? error.message : String(error);
    }
  };
}

function fileIdentity(file: string): string | null {
  try {
    const stat = fs.statSync(file);
    return `${stat.dev}:${stat.ino}`;
  } catch {
    return null;
  }
}
