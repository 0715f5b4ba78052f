/**
 * Writes whose values travel as parameters, never in the SQL text: the
 * performance trick behind a run's own writes (its row, lease, request,
 * provenance, status and END), in this one module.
 *
 * Why: TypeORM's SQLite driver writes a number parameter into the SQL text
 * (`… WHERE "uid" = 71`, `"started_at" = 1796533771`), so each statement
 * naming a run's uid or a timestamp is new to SQLite. better-sqlite3
 * prepares it again (parsed and planned: 0.05–0.15 ms), and TypeORM's
 * statement cache, first in first out, lets each such statement push out
 * one that every run uses, which is then prepared again too. Measured over
 * 400 runs of the conversation bench: 10 prepares a run where 0 are needed.
 * Here the SQL is made once per entity and set of columns, from TypeORM's
 * metadata, with `?` for every value; values are converted as TypeORM
 * converts them (`preparePersistentValue`: the columns' transformers,
 * booleans, dates). On MySQL the same statements save TypeORM's query
 * building; a large value goes out as `large-values` sends it.
 */
import type { DataSource, EntityManager, EntityTarget, ObjectLiteral, QueryRunner } from 'typeorm';
import type { ColumnMetadata } from 'typeorm/metadata/ColumnMetadata';
import { writeWithValues, writeWithValuesResult } from './large-values';

interface Statement {
  sql: string;
  /** The columns whose values the parameters carry, in order. */
  columns: ColumnMetadata[];
}

export class ParameterWrites {
  private readonly statements = new Map<string, Statement>();

  constructor(private readonly dataSource: DataSource) {}

  /** Inserts one row; the id the database generated for it (0 when none). */
  async insert<T extends ObjectLiteral>(manager: EntityManager | null, entity: EntityTarget<T>, values: Partial<T>): Promise<number> {
    const keys = Object.keys(values);
    const statement = this.statement(entity, 'insert', keys, [], (table, columns) => `INSERT INTO ${table} (${columns.map((c) => this.q(c.databaseName)).join(', ')}) VALUES (${columns.map(() => '?').join(', ')})`);
    const parameters = this.parameters(statement.columns, keys.map((key) => values[key]));
    return this.run(manager, async (runner) => (await writeWithValuesResult(runner, statement.sql, parameters)).insertId);
  }

  /** Sets `values` on the rows that match `where` (equality on each key); how many rows matched. */
  async update<T extends ObjectLiteral>(manager: EntityManager | null, entity: EntityTarget<T>, where: Partial<T>, values: Partial<T>): Promise<number> {
    const keys = Object.keys(values);
    const whereKeys = Object.keys(where);
    const statement = this.statement(entity, 'update', keys, whereKeys, (table, columns, conditions) => `UPDATE ${table} SET ${columns.map((c) => `${this.q(c.databaseName)} = ?`).join(', ')} WHERE ${conditions}`);
    const parameters = this.parameters(statement.columns, [...keys.map((key) => values[key]), ...whereKeys.map((key) => where[key])]);
    return this.run(manager, (runner) => writeWithValues(runner, statement.sql, parameters));
  }

  /** Deletes the rows that match `where` (equality on each key); how many. */
  async delete<T extends ObjectLiteral>(manager: EntityManager | null, entity: EntityTarget<T>, where: Partial<T>): Promise<number> {
    const whereKeys = Object.keys(where);
    const statement = this.statement(entity, 'delete', [], whereKeys, (table, _columns, conditions) => `DELETE FROM ${table} WHERE ${conditions}`);
    const parameters = this.parameters(statement.columns, whereKeys.map((key) => where[key]));
    return this.run(manager, (runner) => writeWithValues(runner, statement.sql, parameters));
  }

  private statement(entity: EntityTarget<ObjectLiteral>, kind: string, keys: readonly string[], whereKeys: readonly string[], build: (table: string, columns: ColumnMetadata[], conditions: string) => string): Statement {
    const metadata = this.dataSource.getMetadata(entity);
    const key = `${metadata.name}\u0000${kind}\u0000${keys.join(',')}\u0000${whereKeys.join(',')}`;
    let statement = this.statements.get(key);
    if (!statement) {
      const columnOf = (property: string) => {
        const column = metadata.findColumnWithPropertyName(property);
        if (!column) throw new Error(`${metadata.name} has no column for "${property}"`);
        return column;
      };
      const columns = keys.map(columnOf);
      const whereColumns = whereKeys.map(columnOf);
      if (kind !== 'insert' && whereColumns.length === 0) throw new Error(`a ${kind} of ${metadata.name} names the rows it changes`);
      const conditions = whereColumns.map((c) => `${this.q(c.databaseName)} = ?`).join(' AND ');
      statement = { sql: build(this.q(metadata.tablePath), columns, conditions), columns: [...columns, ...whereColumns] };
      this.statements.set(key, statement);
    }
    return statement;
  }

  /** The values as TypeORM would store them; `undefined` as null (the binary protocol has no undefined). */
  private parameters(columns: readonly ColumnMetadata[], values: readonly unknown[]): unknown[] {
    return values.map((value, index) => {
      const stored: unknown = this.dataSource.driver.preparePersistentValue(value, columns[index]!);
      return stored === undefined ? null : stored;
    });
  }

  private async run<R>(manager: EntityManager | null, work: (runner: QueryRunner) => Promise<R>): Promise<R> {
    const own = manager?.queryRunner ? null : this.dataSource.createQueryRunner();
    try {
      return await work(manager?.queryRunner ?? own!);
    } finally {
      await own?.release();
    }
  }

  private q(name: string): string {
    return this.dataSource.driver.escape(name);
  }
}
