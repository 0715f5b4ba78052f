/**
 * The snippet tools' SnippetSource on the database: the snippets they offer
 * (isOfferedSnippet), found by tag (filterByTag) and by text
 * (snippetMatchesSearch), each by the one function the API uses for it.
 */
import { isOfferedSnippet } from '../prompt/snippet-index';
import { parseTags } from '../prompt/tags';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import { snippetMatchesSearch } from '../snippets/snippet-search';
import { filterByTag, type SnippetService } from '../snippets/snippet.service';
import type { SnippetDocument, SnippetSource } from './tools/snippet-tools';

function toDocument(row: PromptSnippetEntity): SnippetDocument {
  return { identifier: row.identifier, name: row.name, tags: parseTags(row.tags), snippet: row.snippet };
}

export function createDatabaseSnippetSource(snippets: SnippetService): SnippetSource {
  const offered = async () => (await snippets.allActive()).filter(isOfferedSnippet);
  return {
    async findActiveVisible(filter) {
      let rows = await offered();
      if (filter.tag) rows = filterByTag(rows, filter.tag);
      if (filter.query) {
        const query = filter.query;
        rows = rows.filter((row) => snippetMatchesSearch(row, query));
      }
      return rows.map(toDocument);
    },
    async findByIdentifier(identifier) {
      const row = (await offered()).find((candidate) => candidate.identifier === identifier);
      return row ? toDocument(row) : null;
    },
  };
}
