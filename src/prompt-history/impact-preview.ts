/**
 * The impact of a snippet edit before it is made: for every configuration
 * whose effective prompt would change, the prompt before and after and a
 * unified diff. Only the tags the snippet carries before or after the edit
 * can change a selection, so only configurations selecting one of them are
 * composed twice; every other tag lookup reads the library as it is.
 */
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import { effectiveSystemPrompt, type SelectableSnippet } from '../prompt/effective-prompt';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import { insertInListOrder } from '../prompt/list-order';
import { normalizeTag, parseSelectionTags, parseTags } from '../prompt/tags';
import type { PromptLibrary } from './prompt-library';
import { unifiedDiff } from './version-state';

export interface PromptImpact {
  configuration: ConfigurationEntity;
  before: string;
  after: string;
  diff: string;
}

export function previewSnippetImpact(library: PromptLibrary, before: PromptSnippetEntity, after: PromptSnippetEntity): PromptImpact[] {
  const touched = new Set([...parseTags(before.tags), ...parseTags(after.tags)]);
  const afterTags = new Set(parseTags(after.tags));
  const afterActive = after.isActive && !after.deleted;
  const changedLookups = new Map<string, readonly SelectableSnippet[]>();
  const activeByTagAfter = (tag: string): readonly SelectableSnippet[] => {
    const wanted = normalizeTag(tag);
    const current = library.active.activeByTag(wanted);
    if (!touched.has(wanted)) return current;
    let list = changedLookups.get(wanted);
    if (!list) {
      const rows = current.filter((row) => row.uid !== before.uid);
      list = afterActive && afterTags.has(wanted) ? insertInListOrder(rows, after, library.collation) : rows;
      changedLookups.set(wanted, list);
    }
    return list;
  };
  const impacts: PromptImpact[] = [];
  for (const configuration of library.configurationsSelecting(touched)) {
    const was = library.effectiveSystemPrompt(configuration);
    const will = effectiveSystemPrompt(configuration.systemPrompt, parseSelectionTags(configuration.snippetTags), activeByTagAfter);
    if (was !== will) impacts.push({ configuration, before: was, after: will, diff: unifiedDiff(was, will, `${configuration.identifier} (now)`, `${configuration.identifier} (after the change)`) });
  }
  return impacts;
}
