/**
 * A `SnippetSource` over rows held in memory: the reference for the semantics
 * the database implementation must have, and the source the tool tests use.
 */

import { compareByteOrder, hasTag, parseTags } from '../../src/prompt/tags';
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

function isOffered(row: SnippetRow): boolean {
  return row.isActive && !row.hidden && row.deleted !== true;
}

function toDocument(row: SnippetRow): SnippetDocument {
  return { identifier: row.identifier, name: row.name, tags: parseTags(row.tags), snippet: row.snippet };
}

function containsText(row: SnippetRow, query: string): boolean {
  const needle = query.toLowerCase();
  return [row.identifier, row.name, row.description ?? '', parseTags(row.tags).join(','), row.snippet].some((field) =>
    field.toLowerCase().includes(needle),
  );
}

export function createInMemorySnippetSource(rows: readonly SnippetRow[]): SnippetSource {
  const ordered = [...rows].sort(
    (left, right) => (left.sorting ?? 0) - (right.sorting ?? 0) || compareByteOrder(left.name, right.name),
  );
  return {
    findActiveVisible(filter: SnippetSearchFilter): Promise<SnippetDocument[]> {
      return Promise.resolve(
        ordered
          .filter(isOffered)
          .filter((row) => filter.tag === undefined || hasTag(row.tags, filter.tag))
          .filter((row) => filter.query === undefined || containsText(row, filter.query))
          .map(toDocument),
      );
    },
    findByIdentifier(identifier: string): Promise<SnippetDocument | null> {
      const row = ordered.find((candidate) => isOffered(candidate) && candidate.identifier === identifier);
      return Promise.resolve(row === undefined ? null : toDocument(row));
    },
  };
}
