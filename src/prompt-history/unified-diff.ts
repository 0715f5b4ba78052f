/**
 * Unified diffs of long texts whose change is small: an effective prompt of
 * 300 snippets (50 KB) edited in one snippet. The diff library compares
 * every line from the first on (and splits both texts into lines first),
 * which costs milliseconds per prompt and dominated the impact preview's
 * profile. Here the lines both texts share at the start and at the end are
 * cut off before diffing, keeping the context lines a hunk shows, and the
 * hunks' line numbers are moved back by the lines cut — the trimming GNU diff
 * does too. The result is a unified diff of the two texts with the same
 * hunks; only where a change could be aligned in more than one equally short
 * way may it pick another of them.
 */
import { formatPatch, structuredPatch } from 'diff';

/** Context lines around each change, as `diff -u` shows them. */
const CONTEXT = 3;

/** A unified diff of two texts; `""` when they are equal. */
export function unifiedDiff(before: string, after: string, fromLabel: string, toLabel: string): string {
  if (before === after) return '';
  const a = lined(before);
  const b = lined(after);
  const shared = sharedLines(a, b);
  const patch = structuredPatch(fromLabel, toLabel, sliceOf(a, shared.start, a.length - shared.end), sliceOf(b, shared.start, b.length - shared.end), undefined, undefined, { context: CONTEXT });
  for (const hunk of patch.hunks) {
    hunk.oldStart += shared.linesBefore;
    hunk.newStart += shared.linesBefore;
  }
  return formatPatch(patch);
}

/**
 * A text as diffed: with a newline after its last line (a last line without
 * one would show as "\ No newline at end of file": noise for prompt text).
 * That newline is not appended (which would copy a 50 kB prompt once more
 * for every diff) but stands at `text.length` when `added` is set: `length`
 * counts it, and the helpers below read it.
 */
interface Lined {
  text: string;
  added: boolean;
  length: number;
}

function lined(text: string): Lined {
  const added = text !== '' && !text.endsWith('\n');
  return { text, added, length: text.length + (added ? 1 : 0) };
}

function charAt(lined: Lined, index: number): number {
  return index < lined.text.length ? lined.text.charCodeAt(index) : NEWLINE;
}

/** The first newline at or after `from`; -1 when there is none. */
function newlineFrom(lined: Lined, from: number): number {
  const found = lined.text.indexOf('\n', from);
  return found < 0 && lined.added && from <= lined.text.length ? lined.text.length : found;
}

function sliceOf(lined: Lined, from: number, to: number): string {
  return to <= lined.text.length ? lined.text.slice(from, to) : lined.text.slice(from) + '\n';
}

/**
 * The characters to cut at the start and at the end of both texts: whole
 * lines they share, less the `CONTEXT` lines next to the first and last
 * difference. `linesBefore` is the number of lines cut at the start.
 *
 * Neither text is split into lines: the characters both share at the start
 * and at the end are found by comparing slices (memory compares, not a
 * character at a time), and only the newlines inside them are visited. A
 * line is shared at the start when all of it, its newline included, is; at
 * the end it must also begin a line in both texts. The shared end is sought
 * only behind the lines shared at the start (as comparing line by line from
 * both ends, the ends never overlap).
 */
function sharedLines(a: Lined, b: Lined): { start: number; end: number; linesBefore: number } {
  // Every line ends with its newline (the last one's may be the added one).
  const shortest = Math.min(a.length, b.length);
  let prefixChars = commonPrefixLength(a.text, b.text, Math.min(a.text.length, b.text.length));
  // Past the end of the shorter stored text only added newlines remain to compare.
  if (prefixChars === Math.min(a.text.length, b.text.length)) while (prefixChars < shortest && charAt(a, prefixChars) === charAt(b, prefixChars)) prefixChars += 1;
  // Each newline in the shared start closes a shared line; the ends of the last CONTEXT + 1 of them are kept (a ring).
  let prefix = 0;
  const lineEnds = [0, 0, 0, 0];
  for (let at = newlineFrom(a, 0); at >= 0 && at < prefixChars; at = newlineFrom(a, at + 1)) {
    lineEnds[prefix % (CONTEXT + 1)] = at + 1;
    prefix += 1;
  }
  const linesBefore = Math.max(0, prefix - CONTEXT);
  // The end of line `linesBefore`, and of line `prefix`: where the shared start ends.
  const start = linesBefore === 0 ? 0 : lineEnds[(linesBefore - 1) % (CONTEXT + 1)]!;
  const prefixEnd = prefix === 0 ? 0 : lineEnds[(prefix - 1) % (CONTEXT + 1)]!;

  // The shared end, sought behind the shared start only: both texts end with a newline (unless
  // empty), then the stored texts are compared before it.
  const limit = shortest - prefixEnd;
  const suffixChars = limit === 0 ? 0 : 1 + commonSuffixLength(a.text, a.length - 1, b.text, b.length - 1, limit - 1);
  const aTail = a.length - suffixChars;
  const bTail = b.length - suffixChars;
  // The first line lying wholly in the shared end: at its start if that begins a line in both texts, else after its first newline.
  const beginsLine = (aTail === 0 || charAt(a, aTail - 1) === NEWLINE) && (bTail === 0 || charAt(b, bTail - 1) === NEWLINE);
  let cut = beginsLine ? aTail : newlineFrom(a, aTail) + 1;
  // Its first CONTEXT lines stay as context; the lines after them are cut (none when it has CONTEXT lines or fewer).
  for (let line = 0; line < CONTEXT && cut < a.length; line += 1) cut = newlineFrom(a, cut) + 1;
  return { start, end: a.length - cut, linesBefore };
}

const NEWLINE = 10;
/** Characters of the smallest slice compared; the first difference is then sought a character at a time. */
const CHUNK = 64;

/**
 * The length of the longest common start of `a` and `b`, at most `limit`:
 * slices of doubling size while they are equal, then halving ones around the
 * first difference, then single characters.
 */
function commonPrefixLength(a: string, b: string, limit: number): number {
  let at = 0;
  let size = CHUNK;
  while (at + size <= limit && a.slice(at, at + size) === b.slice(at, at + size)) {
    at += size;
    size *= 2;
  }
  // The first difference (or the limit) lies in [at, at + size).
  while (size > CHUNK) {
    size /= 2;
    if (at + size <= limit && a.slice(at, at + size) === b.slice(at, at + size)) at += size;
  }
  while (at < limit && a.charCodeAt(at) === b.charCodeAt(at)) at += 1;
  return at;
}

/** The length of the longest common end of `a` before `aEnd` and `b` before `bEnd`, at most `limit` (as `commonPrefixLength`). */
function commonSuffixLength(a: string, aEnd: number, b: string, bEnd: number, limit: number): number {
  const same = (from: number, size: number) => a.slice(aEnd - from - size, aEnd - from) === b.slice(bEnd - from - size, bEnd - from);
  let at = 0;
  let size = CHUNK;
  while (at + size <= limit && same(at, size)) {
    at += size;
    size *= 2;
  }
  while (size > CHUNK) {
    size /= 2;
    if (at + size <= limit && same(at, size)) at += size;
  }
  while (at < limit && a.charCodeAt(aEnd - 1 - at) === b.charCodeAt(bEnd - 1 - at)) at += 1;
  return at;
}
