/**
 * The performance trick for writes that carry a large value (a run step's
 * payload: a REQUEST with a long conversation's history, an answer, a tool
 * result): on MySQL such a statement goes out as a prepared statement, so
 * the value travels as bytes in the binary protocol instead of being escaped
 * character by character into the SQL text on the client. mysql2's escaping
 * cost 1.6 ms for an 88 kB JSON payload, the prepared statement 0.65 ms, on
 * the same connection (bench/conversations.ts shows it on a turn with 500
 * stored turns). Small values, and SQLite, take TypeORM's own path.
 *
 * The statement runs on the query runner's connection (inside the caller's
 * transaction when there is one) and goes to TypeORM's logger as any query.
 */
import type { QueryRunner } from 'typeorm';

/** Values longer than this (UTF-16 code units) take the prepared statement on MySQL. */
export const LARGE_VALUE_CHARS = 8 * 1024;

interface PreparingConnection {
  execute(sql: string, values: unknown[], callback: (error: Error | null, result: { affectedRows?: number; insertId?: number }) => void): void;
}

interface MysqlRunner {
  connect(): Promise<PreparingConnection>;
}

/** Whether any of the values is a string long enough to be worth a prepared statement. */
export function carriesLargeValue(parameters: readonly unknown[]): boolean {
  return parameters.some((value) => typeof value === 'string' && value.length > LARGE_VALUE_CHARS);
}

/**
 * Runs a write and returns how many rows it affected. `parameters` must not
 * hold `undefined` (the binary protocol has no such value; pass null).
 */
export async function writeWithValues(runner: QueryRunner, sql: string, parameters: readonly unknown[]): Promise<number> {
  return (await writeWithValuesResult(runner, sql, parameters)).affected;
}

/** `writeWithValues`, with the id an INSERT generated (0: none). */
export async function writeWithValuesResult(runner: QueryRunner, sql: string, parameters: readonly unknown[]): Promise<{ affected: number; insertId: number }> {
  const mysql = runner.connection.options.type === 'mysql' || runner.connection.options.type === 'mariadb';
  if (!mysql || !carriesLargeValue(parameters)) {
    const result = (await runner.query(sql, [...parameters], true)) as { affected?: number; raw?: unknown };
    return { affected: result.affected ?? 0, insertId: insertedId(result.raw) };
  }
  runner.connection.logger.logQuery(sql, [...parameters], runner);
  const connection = await (runner as unknown as MysqlRunner).connect();
  return new Promise((resolve, reject) => {
    connection.execute(sql, [...parameters], (error, result) => (error ? reject(error) : resolve({ affected: result.affectedRows ?? 0, insertId: Number(result.insertId ?? 0) })));
  });
}

/** The id an INSERT generated, from a driver's raw answer: better-sqlite3 answers the new rowid, mysql2 an object with insertId (0: none). */
export function insertedId(raw: unknown): number {
  if (typeof raw === 'number' || typeof raw === 'bigint') return Number(raw);
  const id = (raw as { insertId?: unknown } | null | undefined)?.insertId;
  return id === undefined || id === null ? 0 : Number(id);
}
