import { binaryCollation, insertInListOrder, listOrder, nameCollationOf, unicodeCaseInsensitiveCollation } from './list-order';

const row = (uid: number, name: string, sorting = 0) => ({ uid, name, sorting });

describe('the order of snippets within a tag', () => {
  it('on MySQL/MariaDB (utf8mb4_unicode_ci) ignores case: names B (uid 1) and a (uid 2) list as a, B', () => {
    expect([row(1, 'B'), row(2, 'a')].sort(listOrder(unicodeCaseInsensitiveCollation)).map((r) => r.name)).toEqual(['a', 'B']);
    expect(nameCollationOf('mariadb')).toBe(unicodeCaseInsensitiveCollation);
  });

  it('on SQLite (BINARY) compares bytes: B, a', () => {
    expect([row(2, 'a'), row(1, 'B')].sort(listOrder(binaryCollation)).map((r) => r.name)).toEqual(['B', 'a']);
    expect(nameCollationOf('better-sqlite3')).toBe(binaryCollation);
  });

  it('sorting comes first, equal names fall back to the uid, trailing spaces do not count on MySQL', () => {
    expect([row(3, 'a', 5), row(2, 'z', 1), row(1, 'A ', 5)].sort(listOrder(unicodeCaseInsensitiveCollation)).map((r) => r.uid)).toEqual([2, 1, 3]);
  });

  it('places an edited row where the database would, keeping the others as the database listed them', () => {
    const listed = [row(1, 'a'), row(2, 'C')];
    expect(insertInListOrder(listed, row(3, 'b'), unicodeCaseInsensitiveCollation).map((r) => r.uid)).toEqual([1, 3, 2]);
    expect(insertInListOrder(listed, row(3, 'b'), binaryCollation).map((r) => r.uid)).toEqual([1, 2, 3]);
  });
});
