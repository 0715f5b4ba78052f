import Database from 'better-sqlite3';
import { BadUserInputError } from '../shared/errors';
import { afterPosition, atOrBeforePosition, checkFirst, INVALID_CURSOR_MESSAGE, type KeyColumn, type KeysetSource, PagingCursors, type Position, readKeysetPage } from './keyset';

function refusal(run: () => unknown): { code: string; field?: string; message: string } {
  try {
    run();
  } catch (error) {
    if (error instanceof BadUserInputError) return { code: error.code, field: error.field, message: error.message };
    throw error;
  }
  throw new Error('not refused');
}

describe('cursors', () => {
  const cursors = new PagingCursors('a secret of the server, 32 characters');
  const SNIPPET_KINDS = ['value', 'value', 'integer'] as const;
  /** The bytes of a cursor: its JSON, then its 16-byte signature. */
  const parts = (cursor: string) => {
    const bytes = Buffer.from(cursor, 'base64url');
    return { json: bytes.subarray(0, -16).toString('utf8'), tag: bytes.subarray(-16) };
  };
  const withJson = (cursor: string, json: string) => Buffer.concat([Buffer.from(json), parts(cursor).tag]).toString('base64url');

  it('carry their list and position, signed, in URL-safe base64 and read back unchanged', () => {
    const position: Position = [3, 'Ä name with "quotes" and ,', 17];
    const cursor = cursors.encode('snippets', position);
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);
    expect(parts(cursor).json).toBe(JSON.stringify(['snippets', ...position]));
    expect(cursors.decode('snippets', SNIPPET_KINDS, cursor)).toEqual(position);
    expect(cursors.decode('runs', ['value', 'integer'], cursors.encode('runs', [null, 5]))).toEqual([null, 5]);
    // The same secret gives the same key: another instance, or this one after a restart, reads it.
    expect(new PagingCursors('a secret of the server, 32 characters').decode('snippets', SNIPPET_KINDS, cursor)).toEqual(position);
  });

  it('a cursor of another list is refused naming the field', () => {
    const cursor = cursors.encode('runs', [1_700_000_000, 4]);
    expect(refusal(() => cursors.decode('snippets', SNIPPET_KINDS, cursor))).toEqual({
      code: 'BAD_USER_INPUT',
      field: 'after',
      message: expect.stringMatching(/another list \(runs\)/),
    });
  });

  const good = cursors.encode('snippets', [0, 'a', 1]);
  it.each([
    ['empty', ''],
    ['not base64url', 'abc$def'],
    ['padded', `${good}=`],
    ['truncated', good.slice(0, -2)],
    ['only a signature', parts(good).tag.toString('base64url')],
    ['unsigned, as cursors were', Buffer.from(JSON.stringify(['snippets', 0, 'a', 1])).toString('base64url')],
    ['another uid under the same signature', withJson(good, JSON.stringify(['snippets', 0, 'a', 2]))],
    ['another name under the same signature', withJson(good, JSON.stringify(['snippets', 0, 'b', 1]))],
    ["another server's", new PagingCursors('another secret of another server').encode('snippets', [0, 'a', 1])],
    ['not UTF-8', Buffer.from([0xff, 0xfe, 0x22]).toString('base64url')],
    ['too few values', cursors.encode('snippets', [0, 'a'])],
    ['a fractional uid', cursors.encode('snippets', [0, 'a', 1.5])],
    ['a text uid', cursors.encode('snippets', [0, 'a', '1'])],
    ['a huge text', cursors.encode('snippets', [0, 'x'.repeat(1001), 1])],
    ['too long', 'A'.repeat(5000)],
  ])('a cursor this server did not write for the list (%s) is BAD_USER_INPUT on the field, saying what to do', (_case, cursor) => {
    expect(refusal(() => cursors.decode('snippets', SNIPPET_KINDS, cursor, 'after'))).toEqual({ code: 'BAD_USER_INPUT', field: 'after', message: INVALID_CURSOR_MESSAGE });
  });

  it('first is 0 to 500, like limit', () => {
    expect(checkFirst(0)).toBe(0);
    expect(checkFirst(500)).toBe(500);
    for (const first of [-1, 501, 1.5]) expect(refusal(() => checkFirst(first))).toEqual({ code: 'BAD_USER_INPUT', field: 'first', message: 'first must be between 0 and 500' });
  });
});

describe('keyset conditions, checked by SQLite against its own ORDER BY', () => {
  // Mixed directions, a nullable column, duplicates, and text in an integer column (which sorts after every number).
  const rows: [number | string | null, string | null, number][] = [];
  const sortings: (number | string | null)[] = [null, 0, 1, 1, 2, 'text', -3, 2.5];
  const names: (string | null)[] = [null, 'a', 'B', 'b', 'a ', 'é', 'a'];
  let uid = 0;
  for (const sorting of sortings) for (const name of names) rows.push([sorting, name, (uid += 1)]);

  const orders: Record<string, KeyColumn[]> = {
    'ascending (sorting, name, uid)': [
      { column: 'sorting', direction: 'ASC', nullable: true },
      { column: 'name', direction: 'ASC', nullable: true },
      { column: 'uid', direction: 'ASC' },
    ],
    'descending (sorting, uid) as the run list': [
      { column: 'sorting', direction: 'DESC', nullable: true },
      { column: 'uid', direction: 'DESC' },
    ],
    'mixed (sorting DESC, name ASC, uid DESC)': [
      { column: 'sorting', direction: 'DESC', nullable: true },
      { column: 'name', direction: 'ASC', nullable: true },
      { column: 'uid', direction: 'DESC' },
    ],
  };

  let database: Database.Database;
  beforeAll(() => {
    database = new Database(':memory:');
    database.exec('CREATE TABLE t (uid INTEGER PRIMARY KEY, sorting INT, name VARCHAR(20))');
    const insert = database.prepare('INSERT INTO t (uid, sorting, name) VALUES (?, ?, ?)');
    for (const [sorting, name, id] of rows) insert.run(id, sorting, name);
  });
  afterAll(() => database.close());

  it.each(Object.entries(orders))('%s: after a row are exactly the rows ORDER BY puts after it; the rest are at or before it', (_name, columns) => {
    const orderBy = columns.map((column) => `${column.column} ${column.direction}`).join(', ');
    const select = database.prepare(`SELECT ${columns.map((column) => column.column).join(', ')} FROM t ORDER BY ${orderBy}`).raw(true);
    const ordered = select.all() as (number | string | null)[][];
    const uidIndex = columns.findIndex((column) => column.column === 'uid');
    ordered.forEach((position, index) => {
      const after = afterPosition(columns, position, 'p');
      const before = atOrBeforePosition(columns, position, 'q');
      const afterUids = (database.prepare(`SELECT uid FROM t WHERE ${after.sql} ORDER BY ${orderBy}`).raw(true).all(after.parameters) as number[][]).map(([id]) => id);
      const beforeUids = (database.prepare(`SELECT uid FROM t WHERE ${before.sql} ORDER BY ${orderBy}`).raw(true).all(before.parameters) as number[][]).map(([id]) => id);
      expect(afterUids).toEqual(ordered.slice(index + 1).map((row) => row[uidIndex]));
      expect(beforeUids).toEqual(ordered.slice(0, index + 1).map((row) => row[uidIndex]));
    });
  });
});

describe('a keyset page', () => {
  const source = (rows: number[]): KeysetSource<number> & { counted: number } => {
    const tracked = {
      counted: 0,
      read: async (after: Position | null, limit: number) =>
        rows.filter((row) => after === null || row > (after[0] as number)).slice(0, limit).map((row) => ({ row, position: [row] })),
      count: async () => {
        tracked.counted += 1;
        return rows.length;
      },
      existsAtOrBefore: async (position: Position) => rows.some((row) => row <= (position[0] as number)),
    };
    return tracked;
  };

  it('reads one row more than asked to know whether another page follows, and counts only when asked, once', async () => {
    const rows = source([1, 2, 3, 4, 5]);
    const encode = (position: Position) => JSON.stringify(position);
    const first = await readKeysetPage(rows, 2, null, encode);
    expect(first.rows.map((row) => row.row)).toEqual([1, 2]);
    expect(first.hasNextPage).toBe(true);
    expect(await first.hasPreviousPage()).toBe(false);
    expect(rows.counted).toBe(0);
    expect(await first.totalCount()).toBe(5);
    expect(await first.totalCount()).toBe(5);
    expect(rows.counted).toBe(1);
    expect(first.rows[1].cursor()).toBe('[2]');
    const last = await readKeysetPage(rows, 3, [2], encode);
    expect(last.rows.map((row) => row.row)).toEqual([3, 4, 5]);
    expect(last.hasNextPage).toBe(false);
    expect(await last.hasPreviousPage()).toBe(true);
  });
});
