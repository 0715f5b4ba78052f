/**
 * Parsed and validated documents of graphql-ws operations, kept by their text.
 *
 * Over HTTP, Apollo keeps the documents it validated (its document store);
 * over graphql-ws each operation was parsed and validated again. Clients send
 * the same few documents over and over (every watcher of a run sends the same
 * `runTrace` subscription), and validation was the largest single cost of a
 * burst of subscriptions. A document's parse and validation outcome depends
 * only on its text (the schema and rules are fixed for the server's life), so
 * both the document and its errors are kept in a bounded LRU cache.
 */
import { type DocumentNode, GraphQLError, parse, type ParseOptions, type GraphQLSchema, type ValidationRule, validate } from 'graphql';
import { LRUCache } from 'lru-cache';

/** Documents kept; their texts together at most DOCUMENT_CACHE_CHARACTERS. */
export const DOCUMENT_CACHE_ENTRIES = 1000;
export const DOCUMENT_CACHE_CHARACTERS = 4 * 1024 * 1024;

export type PreparedDocument =
  | { document: DocumentNode; errors?: undefined }
  | { document?: undefined; errors: readonly GraphQLError[]; stage: 'parse' | 'validation' };

export class DocumentCache {
  private readonly cache = new LRUCache<string, PreparedDocument>({
    max: DOCUMENT_CACHE_ENTRIES,
    maxSize: DOCUMENT_CACHE_CHARACTERS,
    sizeCalculation: (_value, key) => Math.max(1, key.length),
  });

  constructor(
    private readonly schema: GraphQLSchema,
    private readonly rules: readonly ValidationRule[],
    private readonly parseOptions: ParseOptions,
  ) {}

  /** The document of `text` with no validation errors, or its parse or validation errors. */
  prepare(text: string): PreparedDocument {
    const kept = this.cache.get(text);
    if (kept) return kept;
    const prepared = this.prepareUncached(text);
    // A text too large for the cache is simply not kept.
    if (text.length <= DOCUMENT_CACHE_CHARACTERS) this.cache.set(text, prepared);
    return prepared;
  }

  private prepareUncached(text: string): PreparedDocument {
    let document: DocumentNode;
    try {
      document = parse(text, this.parseOptions);
    } catch (error) {
      const parseError = error instanceof GraphQLError ? error : new GraphQLError(error instanceof Error ? error.message : String(error));
      return { errors: [parseError], stage: 'parse' };
    }
    const errors = validate(this.schema, document, this.rules);
    return errors.length > 0 ? { errors, stage: 'validation' } : { document };
  }
}
