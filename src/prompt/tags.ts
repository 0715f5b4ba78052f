/**
 * Tag rules (behaviour.md §2).
 *
 * Tags are a free vocabulary stored as CSV in `tx_nrllm_promptsnippet.tags`
 * and `tx_nrllm_configuration.snippet_tags`. A TYPO3 site reads the same
 * columns with PHP (`explode`, `trim`, `strtolower`), so every rule here
 * reproduces PHP's byte-level behaviour rather than JavaScript's Unicode-aware
 * one: the two readers must agree on which snippet a tag selects.
 */

/**
 * The characters PHP's `trim()` removes by default: space, tab, newline,
 * carriage return, NUL and vertical tab. Deliberately not
 * `String.prototype.trim`, which also strips no-break spaces and other Unicode
 * spaces: a TYPO3 site trims with PHP, and both must agree byte for byte.
 */
const TRIMMED_CHARACTERS = ' \t\n\r\0\x0B';

/** The most characters `varchar(255)` holds; MySQL counts characters, not bytes. */
export const TAGS_COLUMN_MAX_CHARACTERS = 255;

/** Trims `text` the way PHP's `trim()` does (see `TRIMMED_CHARACTERS`). */
export function trimWhitespace(text: string): string {
  let start = 0;
  let end = text.length;
  while (start < end && TRIMMED_CHARACTERS.includes(text.charAt(start))) {
    start += 1;
  }
  while (end > start && TRIMMED_CHARACTERS.includes(text.charAt(end - 1))) {
    end -= 1;
  }
  return text.slice(start, end);
}

/**
 * Lower-cases the ASCII letters `A`–`Z` only, as PHP 8's `strtolower` does.
 * `Ä` stays `Ä`: `String.prototype.toLowerCase` would fold it, and a tag that
 * TYPO3 keeps distinct must stay distinct here.
 */
export function lowerCaseAscii(text: string): string {
  // Hot path (every tag of every snippet on each lookup): most tags are already lower-case.
  return HAS_ASCII_UPPER.test(text) ? text.replace(ASCII_UPPER_RUNS, (letters) => letters.toLowerCase()) : text;
}

const HAS_ASCII_UPPER = /[A-Z]/;
const ASCII_UPPER_RUNS = /[A-Z]+/g;

/**
 * Normalises one tag: PHP-trimmed, ASCII letters lower-cased. The result may
 * be `''`, which is never a tag. Used for stored tags and for a query argument
 * alike (`STYLE` and `' style '` both become `style`).
 */
export function normalizeTag(tag: string): string {
  return lowerCaseAscii(trimWhitespace(tag));
}

/**
 * A snippet's tag list: split on `,`, each piece normalised, empty pieces
 * dropped, order kept, duplicates kept (that is what `getTagList()` returns
 * in TYPO3). A missing column reads as no tags.
 */
export function parseTags(csv: string | null | undefined): string[] {
  if (csv === null || csv === undefined || csv === '') {
    return [];
  }
  const tags: string[] = [];
  for (const piece of csv.split(',')) {
    const tag = normalizeTag(piece);
    if (tag !== '') {
      tags.push(tag);
    }
  }
  return tags;
}

/**
 * A configuration's `snippet_tags` selection: like `parseTags`, but a repeated
 * tag is dropped, keeping its first occurrence, so each tag is looked up once
 * and the selection order is the order of first appearance.
 */
export function parseSelectionTags(csv: string | null | undefined): string[] {
  return [...new Set(parseTags(csv))];
}

/**
 * Whether the CSV tag list contains `tag`: token equality after normalising
 * both sides, never a substring (`style` does not match `lifestyle`). A tag
 * that normalises to `''` matches nothing.
 */
export function hasTag(csv: string | null | undefined, tag: string): boolean {
  const wanted = normalizeTag(tag);
  if (wanted === '') {
    return false;
  }
  return parseTags(csv).includes(wanted);
}

/**
 * The CSV to store for a tag list: each tag normalised, empty ones dropped,
 * order and duplicates kept, joined with `,` (no spaces). It does not check
 * for commas inside a tag or for the column length: use
 * `validateTagsForWrite` on input from callers.
 */
export function serializeTags(tags: readonly string[]): string {
  return tags.map(normalizeTag).filter((tag) => tag !== '').join(',');
}

/** Result of `validateTagsForWrite`: the CSV to store, or why the tags are refused. */
export type TagsWriteResult = { ok: true; csv: string } | { ok: false; message: string };

/**
 * Checks a tag list sent through the API and gives the CSV to store.
 *
 * - a tag containing `,` is refused: it would silently become two tags;
 * - tags empty after trimming are dropped (so `[]` and `['  ']` store `''`);
 * - the stored CSV may hold at most 255 characters (the `varchar(255)`
 *   column counts characters, so this counts Unicode code points), else the
 *   write is refused rather than truncated by the database.
 */
export function validateTagsForWrite(tags: readonly string[]): TagsWriteResult {
  for (const tag of tags) {
    if (tag.includes(',')) {
      return { ok: false, message: `A tag may not contain a comma: "${tag}".` };
    }
  }
  const csv = serializeTags(tags);
  const length = [...csv].length;
  if (length > TAGS_COLUMN_MAX_CHARACTERS) {
    return {
      ok: false,
      message: `Tags are too long: ${length} characters joined with commas, at most ${TAGS_COLUMN_MAX_CHARACTERS} allowed.`,
    };
  }
  return { ok: true, csv };
}

/**
 * Orders two strings by their UTF-8 bytes, which is Unicode code point order.
 * Plain `<` compares UTF-16 code units and puts a character above U+FFFF
 * before U+E000–U+FFFF; `localeCompare` depends on the locale. Neither is byte
 * order.
 */
export function compareByteOrder(left: string, right: string): number {
  const leftCodePoints = codePoints(left);
  const rightCodePoints = codePoints(right);
  const shared = Math.min(leftCodePoints.length, rightCodePoints.length);
  for (let index = 0; index < shared; index += 1) {
    const difference = leftCodePoints[index] - rightCodePoints[index];
    if (difference !== 0) {
      return difference < 0 ? -1 : 1;
    }
  }
  return Math.sign(leftCodePoints.length - rightCodePoints.length);
}

function codePoints(text: string): number[] {
  return Array.from(text, (character) => character.codePointAt(0) ?? 0);
}

/**
 * The tag vocabulary: every tag of the given CSV columns (missing ones read as
 * no tags), normalised, each once, in the order nr_llm's tag picker lists
 * them (`SnippetTagItems`): the tags are the keys of a PHP array sorted with
 * `ksort`. The caller decides which rows count (all non-deleted snippets) and
 * in which order they come (it only decides between tags PHP finds equal,
 * `01` and `1`, which keep their first appearance).
 */
export function tagVocabulary(csvs: Iterable<string | null | undefined>): string[] {
  const vocabulary = new Set<string>();
  for (const csv of csvs) {
    for (const tag of parseTags(csv)) {
      vocabulary.add(tag);
    }
  }
  // Array.prototype.sort is stable, as PHP 8's sort is.
  return [...vocabulary].sort(comparePhpArrayKeys);
}

/**
 * PHP 8's `ksort` order of two array keys. A string that is a canonical
 * decimal integer (`"10"`, `"-3"`, not `"01"` or `"+1"`) is stored as an int
 * key. Two ints compare as numbers; an int and a numeric string (`"01"`,
 * `"1.5"`, `"1e3"`) as numbers too; an int and any other string as text
 * (the int written out); two strings as numbers when both are numeric,
 * otherwise byte by byte. So `10,9,01,1` lists as `01, 1, 9, 10`.
 */
export function comparePhpArrayKeys(left: string, right: string): number {
  const leftInt = isPhpIntegerKey(left);
  const rightInt = isPhpIntegerKey(right);
  if (leftInt && rightInt) return compareIntegers(left, right);
  if ((leftInt || isPhpNumericString(left)) && (rightInt || isPhpNumericString(right))) {
    return Math.sign(Number(left) - Number(right));
  }
  return compareByteOrder(left, right);
}

const PHP_INT_MAX = 9223372036854775807n;

/** Whether PHP turns this string array key into an integer key. */
export function isPhpIntegerKey(key: string): boolean {
  if (!/^(0|-?[1-9][0-9]*)$/.test(key)) return false;
  const value = BigInt(key);
  return value <= PHP_INT_MAX && value >= -PHP_INT_MAX - 1n;
}

/** PHP 8's numeric strings: optional leading and trailing whitespace, a sign, digits with a dot or an exponent. */
function isPhpNumericString(text: string): boolean {
  return /^[ \t\n\r\v\f]*[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?[ \t\n\r\v\f]*$/.test(text);
}

function compareIntegers(left: string, right: string): number {
  const difference = BigInt(left) - BigInt(right);
  return difference < 0n ? -1 : difference > 0n ? 1 : 0;
}
