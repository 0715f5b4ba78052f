import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import type { SnippetService } from '../snippets/snippet.service';
import { filterByTag } from '../snippets/snippet.service';
import { parseTags } from '../prompt/tags';
import type { SnippetDocument, SnippetSource } from './tools/snippet-tools';

function toDocument(row: PromptSnippetEntity): SnippetDocument {
  return { identifier: row.identifier, name: row.name, tags: parseTags(row.tags), snippet: row.snippet };
}

/** The snippet tools read active, visible snippets through the same rules as the API. */
export function createDatabaseSnippetSource(snippets: SnippetService): SnippetSource {
  const activeVisible = async () => (await snippets.allActive()).filter((row) => !row.hidden);
  return {
    async findActiveVisible(filter) {
      let rows = await activeVisible();
      if (filter.tag) rows = filterByTag(rows, filter.tag);
      if (filter.query) {
        const needle = filter.query.toLowerCase();
        rows = rows.filter((row) => [row.identifier, row.name, row.description ?? '', row.tags, row.snippet].some((text) => text.toLowerCase().includes(needle)));
      }
      return rows.map(toDocument);
    },
    async findByIdentifier(identifier) {
      const row = (await activeVisible()).find((candidate) => candidate.identifier === identifier);
      return row ? toDocument(row) : null;
    },
  };
}
