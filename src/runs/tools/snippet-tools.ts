/**
 * The snippet built-in tools: `search_snippets` and `get_snippet`.
 *
 * They read through `SnippetSource`, which the persistence layer implements on
 * the database; the tools know nothing of tables. Both see only snippets a
 * configuration could compose: active (`is_active = 1`), visible (`hidden =
 * 0`) and not deleted.
 */

import { lowerCaseAscii, normalizeTag, trimWhitespace } from '../../prompt/tags';
import { ToolInputError, type ToolRegistration } from './tool-registry';

/** A snippet as the tools read it. `tags` is the normalised token list (behaviour.md §2). */
export interface SnippetDocument {
  identifier: string;
  name: string;
  tags: string[];
  snippet: string;
}

export interface SnippetSearchFilter {
  /** Already normalised (`normalizeTag`) and non-empty when present. */
  tag?: string;
  /** Already trimmed and non-empty when present. */
  query?: string;
}

/**
 * Read access the snippet tools need; implemented on the database by the
 * persistence layer (`createInMemorySnippetSource` in test/support is the reference for the
 * exact semantics).
 */
export interface SnippetSource {
  /**
   * Active, visible, non-deleted snippets, ordered by `sorting` then `name`.
   * `tag`: the snippet's tag list contains it (token equality after the
   * normalisation of behaviour.md §2, never a substring). `query`: a
   * case-insensitive substring of the identifier, name, description, tags or
   * snippet text. Both given: both must match. Neither: every such snippet.
   */
  findActiveVisible(filter: SnippetSearchFilter): Promise<SnippetDocument[]>;
  /**
   * The active, visible, non-deleted snippet with this identifier (given
   * trimmed and lower-cased, as identifiers are stored), or null.
   */
  findByIdentifier(identifier: string): Promise<SnippetDocument | null>;
}

/** The most snippets one `search_snippets` call answers. */
export const SEARCH_SNIPPETS_MAX_RESULTS = 50;

function optionalText(value: unknown): string | undefined {
  return typeof value === 'string' ? value : undefined;
}

export function createSearchSnippetsTool(source: SnippetSource): ToolRegistration {
  return {
    name: 'search_snippets',
    description:
      'Finds active prompt snippets by tag (exact tag match) and/or by text (case-insensitive). Answers a JSON list of {identifier, name, tags}.',
    parameters: {
      type: 'object',
      properties: {
        tag: { type: 'string', description: 'A tag, e.g. "persona"; matches whole tags only.' },
        query: { type: 'string', description: 'Text to look for in identifier, name, description, tags and snippet text.' },
      },
      additionalProperties: false,
    },
    enabledByDefault: true,
    idempotent: true,
    async execute(args) {
      const filter: SnippetSearchFilter = {};
      // A blank argument is treated as not given, not as "match nothing".
      const tag = normalizeTag(optionalText(args.tag) ?? '');
      if (tag !== '') {
        filter.tag = tag;
      }
      const query = trimWhitespace(optionalText(args.query) ?? '');
      if (query !== '') {
        filter.query = query;
      }
      const found = await source.findActiveVisible(filter);
      const listed = found
        .slice(0, SEARCH_SNIPPETS_MAX_RESULTS)
        .map((snippet) => ({ identifier: snippet.identifier, name: snippet.name, tags: snippet.tags }));
      return JSON.stringify(listed);
    },
  };
}

export function createGetSnippetTool(source: SnippetSource): ToolRegistration {
  return {
    name: 'get_snippet',
    description: 'Reads one active prompt snippet by its identifier. Answers JSON {identifier, name, tags, snippet}.',
    parameters: {
      type: 'object',
      properties: {
        identifier: { type: 'string', description: 'The snippet identifier, e.g. "nova-persona".' },
      },
      required: ['identifier'],
      additionalProperties: false,
    },
    enabledByDefault: true,
    idempotent: true,
    async execute(args) {
      const identifier = lowerCaseAscii(trimWhitespace(args.identifier as string));
      if (identifier === '') {
        throw new ToolInputError('identifier must not be empty');
      }
      const snippet = await source.findByIdentifier(identifier);
      if (snippet === null) {
        throw new ToolInputError(`no active snippet with identifier "${identifier}"`);
      }
      return JSON.stringify({
        identifier: snippet.identifier,
        name: snippet.name,
        tags: snippet.tags,
        snippet: snippet.snippet,
      });
    },
  };
}
