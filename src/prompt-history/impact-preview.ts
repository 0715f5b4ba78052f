/**
 * The impact of a snippet edit before it is made: for every configuration
 * whose effective prompt would change, the prompt before and after and a
 * unified diff.
 *
 * Only configurations whose prompt the edit can change are composed, found
 * through the library's index: an edit of the text alone (tags, place, state
 * and identifier unchanged) can only change the prompts the snippet is in now
 * (`usedBy`); any other edit only those of configurations selecting a tag the
 * snippet carries before or after it. Each is composed by the one rule
 * (src/prompt/effective-prompt.ts) twice: over the library as it is, and over the
 * library with the edited row in place of the stored one. The edited row
 * takes the stored row's place in the database's list order unless its
 * sorting or name changed; only then is it placed by the collation
 * comparator of list-order.ts.
 */
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import { appendSnippetBlock, effectiveSystemPrompt, joinSnippetBlocks, type SelectableSnippet } from '../prompt/effective-prompt';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import { insertInListOrder } from '../prompt/list-order';
import { isActiveSnippet } from '../prompt/snippet-index';
import { normalizeTag, parseSelectionTags, parseTags } from '../prompt/tags';
import type { PromptLibrary } from './prompt-library';
import { unifiedDiff } from './version-state';

export interface PromptImpact {
  configuration: ConfigurationEntity;
  before: string;
  after: string;
  diff: string;
}

export function previewSnippetImpact(library: PromptLibrary, stored: PromptSnippetEntity, after: PromptSnippetEntity): PromptImpact[] {
  // The row as the library composes it now (the stored row when the library does not hold it: deleted, or not read yet).
  const before = library.snippet(stored.uid) ?? stored;
  const beforeTags = new Set(parseTags(before.tags));
  const afterTags = new Set(parseTags(after.tags));
  const touched = new Set([...beforeTags, ...afterTags]);
  const beforeLive = library.snippet(stored.uid) !== undefined;
  const afterLive = !after.deleted;
  // The edited row keeps its place in the list order (sorting, then name): it goes where the stored one is.
  const samePlace = beforeLive && afterLive && before.sorting === after.sorting && before.name === after.name;
  // Nothing the selection reads changes, only the text: only the prompts holding the snippet can change.
  const textOnly = samePlace && sameTags(beforeTags, afterTags) && isActiveSnippet(before) === isActiveSnippet(after) && before.hidden === after.hidden && before.identifier === after.identifier;

  const changedLists = new Map<string, readonly SelectableSnippet[]>();
  const activeByTagAfter = (tag: string): readonly SelectableSnippet[] => {
    const wanted = normalizeTag(tag);
    if (!touched.has(wanted)) return library.activeByTag(wanted);
    let list = changedLists.get(wanted);
    if (!list) {
      // The tag's live rows (active or not) in list order, with the edited row for the stored one, then the active ones.
      const rows: PromptSnippetEntity[] = library.liveByTag(wanted).filter((row) => row.uid !== before.uid);
      if (afterLive && afterTags.has(wanted)) {
        const rank = samePlace ? library.rankOf(before.uid) : undefined;
        if (rank !== undefined) {
          const at = rows.findIndex((row) => (library.rankOf(row.uid) ?? Number.MAX_SAFE_INTEGER) > rank);
          rows.splice(at < 0 ? rows.length : at, 0, after);
        } else rows.splice(0, rows.length, ...insertInListOrder(rows, after, library.collation));
      }
      list = rows.filter(isActiveSnippet);
      changedLists.set(wanted, list);
    }
    return list;
  };

  // Blocks of the library's rows are remembered; the edited row's is made once.
  let afterBlock: string | undefined;
  const blockOf = (snippet: SelectableSnippet): string => (snippet === after ? (afterBlock ??= library.snippetBlock(after)) : library.snippetBlock(snippet as PromptSnippetEntity));

  const impacts: PromptImpact[] = [];
  for (const configuration of textOnly ? library.usedBy(before) : library.configurationsSelecting(touched)) {
    const was = library.effectiveSystemPrompt(configuration);
    let will: string;
    if (textOnly) {
      // After a text-only edit every list keeps its rows, order, hidden flags and identifiers, so the
      // selection (selectSnippets) is the current one with the edited row in place of the stored one:
      // its blocks are the current ones with the edited row's block in that place.
      const at = library.selectedSnippets(configuration).findIndex((row) => row.uid === before.uid);
      // (usedBy lists only configurations selecting it; one that does not keeps its prompt.)
      if (at < 0) continue;
      const blocks = [...library.selectedBlocks(configuration)];
      blocks[at] = blockOf(after);
      will = appendSnippetBlock(configuration.systemPrompt, joinSnippetBlocks(blocks));
    } else will = effectiveSystemPrompt(configuration.systemPrompt, parseSelectionTags(configuration.snippetTags), activeByTagAfter, blockOf);
    if (was !== will) impacts.push({ configuration, before: was, after: will, diff: unifiedDiff(was, will, `${configuration.identifier} (now)`, `${configuration.identifier} (after the change)`) });
  }
  return impacts;
}

function sameTags(left: ReadonlySet<string>, right: ReadonlySet<string>): boolean {
  return left.size === right.size && [...left].every((tag) => right.has(tag));
}
