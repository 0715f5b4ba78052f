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
 * A cursor carries the list's name and the position as JSON, signed with a
 * key of the server's (see `PagingCursors`), in base64url: it is opaque to
 * clients, refused when it comes back altered, and stays valid when its own
 * row is deleted.
 */
import crypto from 'node:crypto';
import { BadUserInputError } from '../shared/errors';
import { deriveKey } from '../shared/secret-box';
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

/** The answer to every cursor the server did not write for this list: edited, truncated, another server's, an older release's. */
export const INVALID_CURSOR_MESSAGE = 'The cursor is not valid: ask for the first page again (without `after`) and use the cursors it returns.';

/** Names the cursor key among the keys derived from the server's secret; changing it refuses every cursor given out before. */
const CURSOR_KEY_LABEL = 'promptwire.paging-cursor.v1';
/** Bytes of HMAC-SHA256 a cursor carries: 128 bits, half of it (RFC 2104 §5), to keep cursors short. */
const TAG_BYTES = 16;

/**
 * Writes and reads the cursors of every list. A cursor is one base64url
 * string of two parts: the JSON `[list, ...position]`, then the first 16
 * bytes of its HMAC-SHA256 under a key derived from the server's secret
 * (SECRET_KEY, or the SQLite key file) with a fixed label. The key is the
 * same on every instance of one database and after a restart, and is not the
 * key that encrypts provider keys. A cursor whose signature does not match is
 * refused before its JSON is read.
 */
export class PagingCursors {
  private readonly key: Buffer;

  constructor(secret: string) {
    this.key = deriveKey(secret, CURSOR_KEY_LABEL);
  }

  encode(list: string, position: Position): string {
    const payload = Buffer.from(JSON.stringify([list, ...position]), 'utf8');
    return Buffer.concat([payload, this.tag(payload)]).toString('base64url');
  }

  /**
   * The position a cursor of `list` holds. A cursor this server did not sign,
   * or signed for another list, is BAD_USER_INPUT naming `field`.
   */
  decode(list: string, kinds: readonly KeyKind[], cursor: string, field = 'after'): Position {
    const invalid = () => new BadUserInputError(INVALID_CURSOR_MESSAGE, field);
    if (cursor.length === 0 || cursor.length > MAX_CURSOR_LENGTH || !/^[A-Za-z0-9_-]+$/.test(cursor)) throw invalid();
    const bytes = Buffer.from(cursor, 'base64url');
    if (bytes.toString('base64url') !== cursor || bytes.length <= TAG_BYTES) throw invalid();
    const payload = bytes.subarray(0, bytes.length - TAG_BYTES);
    if (!crypto.timingSafeEqual(bytes.subarray(bytes.length - TAG_BYTES), this.tag(payload))) throw invalid();
    // Signed here, so written by this service; the checks below hold against a change of the format.
    let decoded: unknown;
    try {
      decoded = JSON.parse(new TextDecoder('utf-8', { fatal: true }).decode(payload));
    } catch {
      throw invalid();
    }
    if (!Array.isArray(decoded) || decoded.length === 0 || typeof decoded[0] !== 'string') throw invalid();
    const [owner, ...values] = decoded as [string, ...unknown[]];
    if (owner !== list) throw new BadUserInputError(`${field} is a cursor of another list (${owner.slice(0, 40)}), not of ${list}`, field);
    if (values.length !== kinds.length) throw invalid();
    return values.map((value, index) => {
      if (kinds[index] === 'integer') {
        if (typeof value !== 'number' || !Number.isSafeInteger(value)) throw invalid();
        return value;
      }
      if (value === null) return null;
      if (typeof value === 'number' && Number.isFinite(value)) return value;
      if (typeof value === 'string' && value.length <= MAX_CURSOR_TEXT) return value;
      throw invalid();
    });
  }

  /** Reads one page of `first` rows of `list` from `source`, after the cursor `after` (from the start without one). */
  readPage<T>(list: string, kinds: readonly KeyKind[], source: KeysetSource<T>, first: number, after: string | null | undefined): Promise<KeysetPage<T>> {
    const position = after === undefined || after === null ? null : this.decode(list, kinds, after);
    return readKeysetPage(source, first, position, (rowPosition) => this.encode(list, rowPosition));
  }

  private tag(payload: Buffer): Buffer {
    return crypto.createHmac('sha256', this.key).update(payload).digest().subarray(0, TAG_BYTES);
  }
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

/** Reads one page of `first` rows after `after` from `source`, each row's cursor written by `encode` when asked for. */
export async function readKeysetPage<T>(source: KeysetSource<T>, first: number, after: Position | null, encode: (position: Position) => string): Promise<KeysetPage<T>> {
  const rows = await source.read(after, first + 1);
  const page = rows.slice(0, first);
  return {
    rows: page.map(({ row, position }) => ({ row, cursor: () => encode(position) })),
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
