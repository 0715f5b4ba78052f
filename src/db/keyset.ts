/**
 * Keyset pages: a list read after a position in its order, not after a
 * number of rows, so that rows inserted or deleted between two pages neither
 * repeat nor skip any other row.
 *
 * A position is the raw values of the list's sort key, exactly as the
 * database returned them, ending with a unique column (`uid`). The condition
 * "after this position" is written in SQL and compared by the database, with
 * the columns' own collation: the next page follows exactly the order the
 * list's ORDER BY gives (on MySQL `utf8mb4_unicode_ci`, case-insensitive,
 * trailing spaces ignored; on SQLite the bytes). The values stay raw because
 * a row written by another program may hold what the entity would read
 * differently (text in an integer column on SQLite sorts after every number,
 * yet reads as 0).
 *
 * A cursor carries the list's name and the position, as base64url JSON: it
 * is opaque to clients, checked when it comes back, and stays valid when its
 * own row is deleted.
 */
import { BadUserInputError } from '../shared/errors';
import { MAX_PAGE_SIZE } from './record-rules';

export type SortDirection = 'ASC' | 'DESC';

export interface KeyColumn {
  /** The column as the query names it (`s.sorting`). */
  column: string;
  direction: SortDirection;
  /** A column that may hold NULL. NULL sorts first ascending and last descending, on SQLite and MySQL alike. */
  nullable?: boolean;
}

/** One value of a sort key, as the database returned it. */
export type KeyValue = number | string | null;

/** A row's place in a list: one value per key column. */
export type Position = readonly KeyValue[];

/** A piece of SQL with its named parameters (TypeORM's `:name`). */
export interface SqlCondition {
  sql: string;
  parameters: Record<string, unknown>;
}

/** The rows of a list strictly after `position`, in its order. */
export function afterPosition(columns: readonly KeyColumn[], position: Position, prefix: string): SqlCondition {
  return keysetCondition(columns, position, prefix, 'after');
}

/** The rows of a list at `position` or before it: what `afterPosition` leaves out. */
export function atOrBeforePosition(columns: readonly KeyColumn[], position: Position, prefix: string): SqlCondition {
  return keysetCondition(columns, position, prefix, 'atOrBefore');
}

/**
 * "After": for some key column i, every earlier column equals the position's
 * value and column i lies beyond it. "At or before" is the rest: some column
 * lies behind it with the earlier ones equal, or every column is equal.
 * Written out rather than as a row-value comparison, which cannot follow
 * mixed directions or NULLs.
 */
function keysetCondition(columns: readonly KeyColumn[], position: Position, prefix: string, side: 'after' | 'atOrBefore'): SqlCondition {
  if (position.length !== columns.length) throw new Error(`A position of ${columns.length} values was expected, got ${position.length}`);
  const parameters: Record<string, unknown> = {};
  const name = (index: number) => `${prefix}_${index}`;
  columns.forEach((_, index) => {
    if (position[index] !== null) parameters[name(index)] = position[index];
  });
  const equal = (index: number) => {
    const { column } = columns[index];
    return position[index] === null ? `${column} IS NULL` : `${column} = :${name(index)}`;
  };
  const beyond = (index: number, forward: boolean) => {
    const { column, direction, nullable } = columns[index];
    const value = position[index];
    // Moving up the values (ASC forward, DESC backward) or down them.
    const upward = (direction === 'ASC') === forward;
    if (value === null) return upward ? `${column} IS NOT NULL` : '1 = 0';
    return upward ? `${column} > :${name(index)}` : nullable ? `(${column} < :${name(index)} OR ${column} IS NULL)` : `${column} < :${name(index)}`;
  };
  const branches = columns.map((_, index) => [...columns.slice(0, index).map((__, earlier) => equal(earlier)), beyond(index, side === 'after')].join(' AND '));
  if (side === 'atOrBefore') branches.push(columns.map((_, index) => equal(index)).join(' AND '));
  return { sql: `(${branches.map((branch) => `(${branch})`).join(' OR ')})`, parameters };
}

/** What a cursor's position must hold: `integer` for the unique column, `value` for any other key. */
export type KeyKind = 'integer' | 'value';

/** The longest cursor accepted: a position with a 255-character name, escaped, fits several times. */
export const MAX_CURSOR_LENGTH = 4096;
/** The longest text value a cursor may carry (names are at most 255 characters). */
const MAX_CURSOR_TEXT = 1000;

export function encodeCursor(list: string, position: Position): string {
  return Buffer.from(JSON.stringify([list, ...position]), 'utf8').toString('base64url');
}

/**
 * The position a cursor of `list` holds. A cursor that is not one this
 * service wrote, or was written for another list, is BAD_USER_INPUT naming
 * `field`.
 */
export function decodeCursor(list: string, kinds: readonly KeyKind[], cursor: string, field = 'after'): Position {
  const malformed = () => new BadUserInputError(`${field} is not a cursor of this list: pass a cursor (endCursor or an edge's cursor) of the same list unchanged`, field);
  if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw malformed();
  const bytes = Buffer.from(cursor, 'base64url');
  if (bytes.toString('base64url') !== cursor) throw malformed();
  let decoded: unknown;
  try {
    decoded = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(bytes));
  } catch {
    throw malformed();
  }
  if (!Array.isArray(decoded) || decoded.length === 0 || typeof decoded[0] !== 'string') throw malformed();
  const [owner, ...values] = decoded as [string, ...unknown[]];
  if (owner !== list) throw new BadUserInputError(`${field} is a cursor of another list (${owner.slice(0, 40)}), not of ${list}`, field);
  if (values.length !== kinds.length) throw malformed();
  return values.map((value, index) => {
    if (kinds[index] === 'integer') {
      if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw malformed();
      return value;
    }
    if (value === null) return null;
    if (typeof value === 'number' && Number.isFinite(value)) return value;
    if (typeof value === 'string' && value.length <= MAX_CURSOR_TEXT) return value;
    throw malformed();
  });
}

/** `first` of a connection: 0 to MAX_PAGE_SIZE rows, like `limit`. */
export function checkFirst(first: number, field = 'first'): number {
  if (!Number.isInteger(first) || first < 0 || first > MAX_PAGE_SIZE) throw new BadUserInputError(`${field} must be between 0 and ${MAX_PAGE_SIZE}`, field);
  return first;
}

/** One row of a page with its place in the list. */
export interface KeyedRow<T> {
  row: T;
  position: Position;
}

/** A page of a list read by keyset, and what a client may further ask of it. */
export interface KeysetPage<T> {
  /** Each row with its cursor, encoded when asked for (a page of nodes without edges needs none). */
  rows: { row: T; cursor: () => string }[];
  /** Whether rows follow this page (one more row was read to know). */
  hasNextPage: boolean;
  /** Whether the list has rows at or before the `after` position; read only when asked. */
  hasPreviousPage: () => Promise<boolean>;
  /** The rows of the whole filtered list, counted in SQL; read only when asked, once. */
  totalCount: () => Promise<number>;
}

export interface KeysetSource<T> {
  /** Up to `limit` rows after `after` (from the start when null), in list order, with their positions. */
  read(after: Position | null, limit: number): Promise<KeyedRow<T>[]>;
  count(): Promise<number>;
  existsAtOrBefore(position: Position): Promise<boolean>;
}

/** Reads one page of `first` rows after `after` from `source`. */
export async function readKeysetPage<T>(list: string, source: KeysetSource<T>, first: number, after: Position | null): Promise<KeysetPage<T>> {
  const rows = await source.read(after, first + 1);
  const page = rows.slice(0, first);
  return {
    rows: page.map(({ row, position }) => ({ row, cursor: () => encodeCursor(list, position) })),
    hasNextPage: rows.length > first,
    hasPreviousPage: once(() => (after === null ? Promise.resolve(false) : source.existsAtOrBefore(after))),
    totalCount: once(() => source.count()),
  };
}

function once<T>(read: () => Promise<T>): () => Promise<T> {
  let result: Promise<T> | null = null;
  return () => (result ??= read());
}

/** A position from raw driver values: numbers and text as they are, anything else as text (a BLOB as UTF-8), missing as NULL. */
export function positionOf(raw: readonly unknown[]): Position {
  return raw.map((value) => {
    if (value === null || value === undefined) return null;
    if (typeof value === 'number' || typeof value === 'string') return value;
    if (typeof value === 'bigint') return Number.isSafeInteger(Number(value)) ? Number(value) : value.toString();
    if (Buffer.isBuffer(value)) return value.toString('utf8');
    return String(value);
  });
}
