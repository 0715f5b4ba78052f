/**
 * Filter conditions shared by the lists of the editable tables, written so
 * that a row reads through the filter as the API shows it.
 */
import type { ObjectLiteral, SelectQueryBuilder } from 'typeorm';
import type { Dialect } from './data-source';
import type { SqlCondition } from './keyset';
import type { ShapedSelect } from './raw-rows';

/**
 * A tinyint switch (`is_active`, `hidden`) is on when it holds anything but
 * 0, as `flagTransformer` reads it. SQLite may hold text in the column (a row
 * written by hand): it is cast the way the transformer's `Number()` reads it,
 * so `'abc'` is off there too.
 */
export function flagCondition(dialect: Dialect, column: string, on: boolean): SqlCondition {
  const value = dialect === 'sqlite' ? `COALESCE(CAST(${column} AS REAL), 0)` : `COALESCE(${column}, 0)`;
  return { sql: on ? `${value} <> 0` : `${value} = 0`, parameters: {} };
}

/**
 * `search` found, case-insensitively, in any of the text `columns` (NULL
 * reads as ''). `!` escapes LIKE's wildcards: a backslash would need
 * different quoting in MySQL and SQLite.
 */
export function searchCondition(columns: readonly string[], search: string, parameter: string): SqlCondition {
  const pattern = `%${search.toLowerCase().replace(/[!%_]/g, (character) => `!${character}`)}%`;
  return {
    sql: `(${columns.map((column) => `LOWER(COALESCE(${column}, '')) LIKE :${parameter} ESCAPE '!'`).join(' OR ')})`,
    parameters: { [parameter]: pattern },
  };
}

/**
 * The same search in code, for rows already read: `search` found,
 * case-insensitively, in any of `texts` (null reads as '').
 */
export function textMatchesSearch(texts: readonly (string | null)[], search: string): boolean {
  const needle = search.toLowerCase();
  return texts.some((text) => (text ?? '').toLowerCase().includes(needle));
}

/**
 * A shaped select (raw-rows) over `base` with `conditions` ANDed: its shape is
 * `name` and the conditions' SQL text, its values their parameters.
 */
export function filteredSelect<T extends ObjectLiteral>(name: string, base: () => SelectQueryBuilder<T>, conditions: readonly SqlCondition[]): ShapedSelect<T> {
  return {
    shape: `${name}:${conditions.map((condition) => condition.sql).join(' AND ')}`,
    values: Object.assign({}, ...conditions.map((condition) => condition.parameters)) as Record<string, unknown>,
    build: () => {
      const query = base();
      for (const condition of conditions) query.andWhere(condition.sql, condition.parameters);
      return query;
    },
  };
}
