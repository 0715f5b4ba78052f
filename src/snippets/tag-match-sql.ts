/**
 * Tag filters in SQL, by exactly the rule of `hasTag`: the CSV split on
 * commas, each piece trimmed as PHP trims and lower-cased in ASCII only,
 * compared whole (`style` never matches `lifestyle`, ` STYLE ` matches
 * `style`, `Äpfel` does not match `äpfel`). Done in SQL so that a filtered
 * list pages and counts in the database.
 *
 * SQLite calls `hasTag` itself, registered on the connection as a function.
 * MySQL/MariaDB match a regular expression built from the wanted tag, on the
 * column as binary-collated text (so only the ASCII letters the pattern
 * spells both ways ignore case): the pattern allows PHP's trimmed characters
 * around the tag, between commas or the ends of the text.
 */
import type { Dialect } from '../db/data-source';
import type { SqlCondition } from '../db/keyset';
import { hasTag, normalizeTag } from '../prompt/tags';

/** The SQLite function the tag filters call: `promptwire_has_tag(csv, tag)` is 1 when `hasTag(csv, tag)`. */
export const SQLITE_HAS_TAG_FUNCTION = 'promptwire_has_tag';

interface SqliteFunctionHost {
  function(name: string, options: { deterministic: boolean }, implementation: (...args: unknown[]) => unknown): unknown;
}

/** Registers `SQLITE_HAS_TAG_FUNCTION` on a better-sqlite3 connection. Odd column values (numbers, NULL) read as text or no tags. */
export function registerSqliteTagFunction(database: SqliteFunctionHost): void {
  database.function(SQLITE_HAS_TAG_FUNCTION, { deterministic: true }, (csv, tag) => {
    const text = csv === null || csv === undefined ? null : typeof csv === 'string' ? csv : Buffer.isBuffer(csv) ? csv.toString('utf8') : String(csv);
    return hasTag(text, typeof tag === 'string' ? tag : '') ? 1 : 0;
  });
}

/** PHP's trimmed characters (space, tab, newline, carriage return, NUL, vertical tab), as a regular-expression class. */
const TRIMMED = '[\\x20\\x09\\x0A\\x0D\\x00\\x0B]*';

/**
 * The MySQL/MariaDB pattern matching a CSV that holds `tag` (normalised as
 * `normalizeTag` does), or null for a tag that can match nothing (empty, or
 * holding a comma). Both PCRE (MariaDB) and ICU (MySQL 8) read it alike:
 * ASCII letters as a class of both cases, other ASCII characters as hex
 * escapes, anything else as itself; `\A` and `\z` are the ends of the text
 * (`$` would also match before a final line break).
 */
export function mysqlTagPattern(tag: string): string | null {
  const wanted = normalizeTag(tag);
  if (wanted === '' || wanted.includes(',')) return null;
  let body = '';
  for (const character of wanted) {
    const code = character.codePointAt(0) ?? 0;
    if (character >= 'a' && character <= 'z') body += `[${character}${character.toUpperCase()}]`;
    else if (character >= '0' && character <= '9') body += character;
    else if (code < 0x80) body += `\\x${code.toString(16).padStart(2, '0')}`;
    else body += character;
  }
  return `(\\A|,)${TRIMMED}${body}${TRIMMED}(,|\\z)`;
}

export type TagMatchMode = 'ANY' | 'ALL';

/**
 * The condition that the CSV `column` holds any (or all) of `tags`, or null
 * when `tags` is empty (no filter). A tag that can match nothing makes ALL
 * match nothing, and is left out of ANY.
 */
export function tagCondition(dialect: Dialect, column: string, tags: readonly string[], mode: TagMatchMode, prefix: string): SqlCondition | null {
  if (tags.length === 0) return null;
  const parameters: Record<string, unknown> = {};
  const matches: string[] = [];
  let impossible = false;
  tags.forEach((tag, index) => {
    const name = `${prefix}_${index}`;
    if (dialect === 'sqlite') {
      const wanted = normalizeTag(tag);
      if (wanted === '' || wanted.includes(',')) return void (impossible = true);
      parameters[name] = wanted;
      matches.push(`${SQLITE_HAS_TAG_FUNCTION}(${column}, :${name}) = 1`);
      return;
    }
    const pattern = mysqlTagPattern(tag);
    if (pattern === null) return void (impossible = true);
    parameters[name] = pattern;
    // CONVERT first: a table TYPO3 created in utf8mb3 has no utf8mb4_bin collation of its own.
    matches.push(`CONVERT(${column} USING utf8mb4) COLLATE utf8mb4_bin REGEXP :${name}`);
  });
  if (mode === 'ALL' ? impossible : matches.length === 0) return { sql: '1 = 0', parameters: {} };
  return { sql: `(${matches.join(mode === 'ALL' ? ' AND ' : ' OR ')})`, parameters };
}
