/**
 * Composition of labelled prompt blocks (behaviour.md §3.4).
 *
 * This is the one place that knows the byte format of a composed snippet:
 * `LABEL + ":\n" + text`, blocks separated by a blank line. A TYPO3 site
 * composing the same rows with `PromptSnippetComposer` must produce the same
 * bytes, so nothing here may change case, collapse whitespace inside the text
 * or reorder the pairs.
 */

import { trimWhitespace } from './tags';

/** One entry to compose: the label printed before the colon and the fragment text. */
export interface SnippetPair {
  label: string;
  snippet: string | null | undefined;
}

/**
 * Composes an ordered list of (label, snippet) pairs into one prompt section.
 *
 * - a missing snippet (`null` / `undefined`) is skipped;
 * - the text is trimmed of space, tab, newline, carriage return, NUL and
 *   vertical tab only (PHP `trim`), never of other Unicode spaces;
 * - text that is empty after trimming is skipped;
 * - each remaining pair becomes `label + ":\n" + text`, the label as given;
 * - blocks are joined with `"\n\n"`; nothing to compose gives `""`.
 *
 * Multi-line text is kept exactly as it is inside its block.
 */
export function composeSnippets(pairs: readonly SnippetPair[]): string {
  const blocks: string[] = [];
  for (const pair of pairs) {
    if (pair.snippet === null || pair.snippet === undefined) {
      continue;
    }
    const text = trimWhitespace(pair.snippet);
    if (text === '') {
      continue;
    }
    blocks.push(pair.label + ':\n' + text);
  }
  return blocks.join('\n\n');
}
