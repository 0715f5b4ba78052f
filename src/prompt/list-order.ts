/**
 * The order of snippets within a tag: nr_llm asks its database for
 * `ORDER BY sorting, name`, so names compare by the table's collation, not by
 * code points. On MariaDB/MySQL that is TYPO3's `utf8mb4_unicode_ci` (`a`
 * before `B`, case and accents ignored, trailing spaces ignored); on SQLite
 * `BINARY` (`B` before `a`). Lists read from the database keep its order; this
 * comparator is only for placing a row the database has not seen yet (an
 * edit being previewed). Equal names fall back to the uid.
 */
import { compareByteOrder } from './tags';

export type NameCollation = (left: string, right: string) => number;

/** SQLite's BINARY collation: the UTF-8 bytes. */
export const binaryCollation: NameCollation = compareByteOrder;

const unicodeBase = new Intl.Collator('und', { sensitivity: 'base', usage: 'sort' });

/** `utf8mb4_unicode_ci`, approximated by the Unicode root collation at base strength, with MySQL's trailing-space padding. */
export const unicodeCaseInsensitiveCollation: NameCollation = (left, right) => Math.sign(unicodeBase.compare(left.replace(/ +$/, ''), right.replace(/ +$/, '')));

/** The collation the names of a database compare by. */
export function nameCollationOf(databaseType: string): NameCollation {
  return databaseType === 'better-sqlite3' || databaseType === 'sqlite' ? binaryCollation : unicodeCaseInsensitiveCollation;
}

export interface ListedRow {
  uid: number;
  sorting: number;
  name: string;
}

/** `sorting`, then `name` by the collation, then `uid`. */
export function listOrder(collation: NameCollation): (left: ListedRow, right: ListedRow) => number {
  return (left, right) => left.sorting - right.sorting || collation(left.name, right.name) || left.uid - right.uid;
}

/** `rows` (in list order) with `row` placed where the database would list it. */
export function insertInListOrder<T extends ListedRow>(rows: readonly T[], row: T, collation: NameCollation): T[] {
  const compare = listOrder(collation);
  const position = rows.findIndex((candidate) => compare(row, candidate) < 0);
  return position < 0 ? [...rows, row] : [...rows.slice(0, position), row, ...rows.slice(position)];
}
