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
  const a = ensureNewline(before);
  const b = ensureNewline(after);
  const shared = sharedLines(a, b);
  const patch = structuredPatch(fromLabel, toLabel, a.slice(shared.start, a.length - shared.end), b.slice(shared.start, b.length - shared.end), undefined, undefined, { context: CONTEXT });
  for (const hunk of patch.hunks) {
    hunk.oldStart += shared.linesBefore;
    hunk.newStart += shared.linesBefore;
  }
  return formatPatch(patch);
}

/**
 * The characters to cut at the start and at the end of both texts: whole
 * lines they share, less the `CONTEXT` lines next to the first and last
 * difference. `linesBefore` is the number of lines cut at the start.
 */
function sharedLines(a: string, b: string): { start: number; end: number; linesBefore: number } {
  // Both texts end with a newline or are empty, so the last piece of each split is "" and not a line.
  const aLines = a.split('\n');
  const bLines = b.split('\n');
  const aCount = aLines.length - 1;
  const bCount = bLines.length - 1;
  const shortest = Math.min(aCount, bCount);
  let prefix = 0;
  while (prefix < shortest && aLines[prefix] === bLines[prefix]) prefix += 1;
  let suffix = 0;
  while (suffix < shortest - prefix && aLines[aCount - 1 - suffix] === bLines[bCount - 1 - suffix]) suffix += 1;
  const linesBefore = Math.max(0, prefix - CONTEXT);
  const linesAfter = Math.max(0, suffix - CONTEXT);
  let start = 0;
  for (let line = 0; line < linesBefore; line += 1) start += aLines[line]!.length + 1;
  let end = 0;
  for (let line = aCount - linesAfter; line < aCount; line += 1) end += aLines[line]!.length + 1;
  return { start, end, linesBefore };
}

/** A last line without a newline would show as "\ No newline at end of file": noise for prompt text. */
function ensureNewline(text: string): string {
  return text === '' || text.endsWith('\n') ? text : text + '\n';
}
