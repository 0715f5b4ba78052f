/**
 * A `SnippetSource` over rows held in memory: the reference for the semantics
 * the database implementation must have, and the source the tool tests use.
 */

import { isOfferedSnippet } from '../../src/prompt/snippet-index';
import { compareByteOrder, hasTag, parseTags } from '../../src/prompt/tags';
import { snippetMatchesSearch } from '../../src/snippets/snippet-search';
import type { SnippetDocument, SnippetSearchFilter, SnippetSource } from '../../src/runs/tools/snippet-tools';

/** The columns of a `tx_nrllm_promptsnippet` row the tools read. */
export interface SnippetRow {
  identifier: string;
  name: string;
  description?: string | null;
  /** The CSV column as stored. */
  tags: string;
  snippet: string;
  isActive: boolean;
  hidden: boolean;
  deleted?: boolean;
  sorting?: number;
}

function toDocument(row: SnippetRow): SnippetDocument {
  return { identifier: row.identifier, name: row.name, tags: parseTags(row.tags), snippet: row.snippet };
}

function containsText(row: SnippetRow, query: string): boolean {
  return snippetMatchesSearch({ ...row, description: row.description ?? null }, query);
}

export function createInMemorySnippetSource(rows: readonly SnippetRow[]): SnippetSource {
  const ordered = [...rows].sort(
    (left, right) => (left.sorting ?? 0) - (right.sorting ?? 0) || compareByteOrder(left.name, right.name),
  );
  return {
    findActiveVisible(filter: SnippetSearchFilter): Promise<SnippetDocument[]> {
      return Promise.resolve(
        ordered
          .filter(isOfferedSnippet)
          .filter((row) => filter.tag === undefined || hasTag(row.tags, filter.tag))
          .filter((row) => filter.query === undefined || containsText(row, filter.query))
          .map(toDocument),
      );
    },
    findByIdentifier(identifier: string): Promise<SnippetDocument | null> {
      const row = ordered.find((candidate) => isOfferedSnippet(candidate) && candidate.identifier === identifier);
      return Promise.resolve(row === undefined ? null : toDocument(row));
    },
  };
}
