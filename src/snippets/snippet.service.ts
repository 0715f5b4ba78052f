import { isActiveSnippet } from '../prompt/snippet-index';
import type { DataSource, EntityManager } from 'typeorm';
import type { IdentifierLock } from '../db/identifier-lock';
import { assertIdentifierAvailable, checkPage, findLiveOrFail, normalizeIdentifier, optionalText, type Page, requireName, newRecordColumns } from '../db/record-rules';
import { checkTextFits, textLimitOf } from '../db/text-limits';
import type { PromptHistoryService } from '../prompt-history/prompt-history.service';
import { snippetStateOf } from '../prompt-history/record-states';
import { checkFirst, type KeysetPage, type PagingCursors } from '../db/keyset';
import { BadUserInputError, NotFoundError } from '../shared/errors';
import { unixNow } from '../shared/time';
import { parseMetadataForWrite } from '../prompt/snippet-metadata';
import { PromptSnippetEntity } from './snippet.entity';
import { snippetMatchesSearch } from './snippet-search';
import { hasTag, normalizeTag, tagVocabulary, validateTagsForWrite } from '../prompt/tags';
import { SNIPPET_KEY_KINDS, SNIPPET_LIST, type SnippetRepository } from './snippet.repository';
import { checkSearch, type TaggedListPageRequest, taggedListFilterOf } from './tagged-list-filter';

export interface SnippetWrite {
  identifier?: string;
  name?: string;
  snippet?: string;
  description?: string | null;
  tags?: string[];
  metadata?: unknown;
  isActive?: boolean;
  hidden?: boolean;
  sorting?: number;
}

/** The `snippets` list: a tag (active snippets only) or the whole list, with `search`, by offset. */
export interface SnippetListQuery extends Page {
  tag?: string | null;
  search?: string | null;
}

export class SnippetService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly identifiers: IdentifierLock,
    private readonly history: PromptHistoryService,
    private readonly repository: SnippetRepository,
    private readonly cursors: PagingCursors,
  ) {}

  /**
   * One page of the non-deleted snippets that pass the filters, in list order
   * (sorting, then name, then uid), after the position `after` names. Filters
   * combine with AND; `tags` match by the tag rules, any of them or all
   * (`tagsMatch`). Unlike `snippets(tag:)`, a tag filter does not imply
   * `isActive: true`.
   */
  async page(request: TaggedListPageRequest): Promise<KeysetPage<PromptSnippetEntity>> {
    const first = checkFirst(request.first);
    return this.cursors.readPage(SNIPPET_LIST, SNIPPET_KEY_KINDS, this.repository.listed(taggedListFilterOf(request)), first, request.after);
  }

  /**
   * `activeByTag` of behaviour.md §3.3: active, not deleted, hidden included,
   * exact token match, sorting then name. Like TYPO3, it loads the active
   * rows and matches tags in code, so odd CSV spacing never hides a snippet.
   */
  async activeByTag(tag: string): Promise<PromptSnippetEntity[]> {
    return filterByTag(await this.allActive(), tag);
  }

  /**
   * Every active, non-deleted snippet in list order: one query, shared by all
   * tag lookups of a request. The order is the database's (`ORDER BY sorting,
   * name`, names by the table's collation), as nr_llm's lookup has it.
   */
  async allActive(): Promise<PromptSnippetEntity[]> {
    return this.repository.allActive();
  }

  async list(filter: SnippetListQuery): Promise<PromptSnippetEntity[]> {
    const { limit, offset } = checkPage(filter);
    const search = checkSearch(filter.search);
    if (filter.tag !== undefined && filter.tag !== null) {
      let rows = await this.activeByTag(filter.tag);
      if (search) rows = rows.filter((row) => snippetMatchesSearch(row, search));
      return rows.slice(offset, offset + limit);
    }
    return this.repository.offsetPage(limit, offset, search);
  }

  async findByUid(uid: number): Promise<PromptSnippetEntity | null> {
    return this.repository.findLive(uid);
  }

  async findByIdentifier(identifier: string): Promise<PromptSnippetEntity | null> {
    return this.repository.findLiveByIdentifier(identifier.trim().toLowerCase());
  }

  /**
   * The snippets forced onto a run, resolved as nr_llm resolves them: in the
   * order given, a snippet named twice given twice, only active ones (an
   * inactive snippet is not for new composition and is left out), hidden ones
   * included. An identifier matches exactly first (`nova` and `NOVA` are two
   * snippets in a table TYPO3 writes), else without case; among rows sharing
   * an identifier the oldest wins. An identifier no live row has is NOT_FOUND.
   */
  async findForcedByIdentifiers(identifiers: readonly string[]): Promise<PromptSnippetEntity[]> {
    if (identifiers.length === 0) return [];
    const lowered = [...new Set(identifiers.map((identifier) => identifier.trim().toLowerCase()))];
    const rows = await this.repository.findLiveByLoweredIdentifiers(lowered);
    const found: PromptSnippetEntity[] = [];
    for (const identifier of identifiers) {
      const wanted = identifier.trim();
      const row = rows.find((candidate) => candidate.identifier === wanted) ?? rows.find((candidate) => candidate.identifier.toLowerCase() === wanted.toLowerCase());
      if (!row) throw new NotFoundError(`No snippet with identifier "${identifier}"`, 'forcedSnippets');
      if (isActiveSnippet(row)) found.push(row);
    }
    return found;
  }

  /** The tag vocabulary of behaviour.md §2: every non-deleted snippet, hidden and inactive included. */
  async vocabulary(): Promise<string[]> {
    return tagVocabulary(await this.repository.liveTags());
  }

  /** `author` is the token name behind the write; it is stored with the version. */
  async create(input: SnippetWrite, author: string | null = null): Promise<PromptSnippetEntity> {
    const identifier = normalizeIdentifier(input.identifier ?? '');
    const [saved, change] = await this.identifiers.transaction('tx_nrllm_promptsnippet', async (manager) => {
        await assertIdentifierAvailable(manager, PromptSnippetEntity, identifier, null, 'snippet');
        const now = unixNow();
        const row = manager.create(PromptSnippetEntity, {
          ...newRecordColumns(now),
          isActive: true,
          sorting: 0,
          description: null,
          tags: '',
          metadata: null,
        });
        applyWrite(row, { ...input, identifier }, true);
        const created = await manager.save(row);
        return [created, await this.recordVersion(manager, created, null, author)] as const;
      });
    this.history.announce(change);
    return saved;
  }

  async update(uid: number, input: SnippetWrite, author: string | null = null): Promise<PromptSnippetEntity> {
    const identifier = input.identifier === undefined ? undefined : normalizeIdentifier(input.identifier);
    return this.change(uid, author, async (manager, row) => {
      if (identifier !== undefined) await assertIdentifierAvailable(manager, PromptSnippetEntity, identifier, uid, 'snippet');
      applyWrite(row, { ...input, identifier }, false);
    });
  }

  /**
   * The row as it is and as `input` would make it, validated exactly as an
   * update is (the same errors), without writing anything.
   */
  async previewWrite(uid: number, input: SnippetWrite): Promise<{ before: PromptSnippetEntity; after: PromptSnippetEntity }> {
    const identifier = input.identifier === undefined ? undefined : normalizeIdentifier(input.identifier);
    const manager = this.dataSource.manager;
    const before = await findLiveOrFail(manager, PromptSnippetEntity, uid, 'snippet');
    if (identifier !== undefined) await assertIdentifierAvailable(manager, PromptSnippetEntity, identifier, uid, 'snippet');
    const after = manager.create(PromptSnippetEntity, { ...before });
    applyWrite(after, { ...input, identifier }, false);
    return { before, after };
  }

  /** Writes a stored version's content back (the identifier stays); the result is a new version. */
  async restore(uid: number, version: number, author: string | null = null): Promise<PromptSnippetEntity> {
    const stored = await this.history.version('snippet', uid, version);
    const { name, description, tags, snippet, metadata, isActive, hidden, sorting } = stored.state;
    return this.change(uid, author, async (_manager, row) => {
      Object.assign(row, { name, description, tags, snippet, metadata, isActive, hidden, sorting });
    });
  }

  async delete(uid: number, author: string | null = null): Promise<boolean> {
    await this.change(uid, author, async (_manager, row) => {
      row.deleted = true;
    });
    return true;
  }

  /** One write to a live row: lock, change, stamp, save, store the version; announced after commit. */
  private async change(
    uid: number,
    author: string | null,
    apply: (manager: EntityManager, row: PromptSnippetEntity) => Promise<void>,
  ): Promise<PromptSnippetEntity> {
    const [saved, change] = await this.identifiers.transaction('tx_nrllm_promptsnippet', async (manager: EntityManager) => {
        const row = await findLiveOrFail(manager, PromptSnippetEntity, uid, 'snippet');
        const previous = snippetStateOf(row);
        await apply(manager, row);
        row.tstamp = unixNow();
        const updated = await manager.save(row);
        return [updated, await this.recordVersion(manager, updated, previous, author)] as const;
      });
    this.history.announce(change);
    return saved;
  }

  private recordVersion(manager: EntityManager, row: PromptSnippetEntity, previous: ReturnType<typeof snippetStateOf> | null, author: string | null) {
    return this.history.record(manager, { kind: 'snippet', uid: row.uid, state: snippetStateOf(row), previous, origin: { source: 'api', author } });
  }
}

export function filterByTag(rows: readonly PromptSnippetEntity[], tag: string): PromptSnippetEntity[] {
  const wanted = normalizeTag(tag);
  if (wanted === '') return [];
  return rows.filter((row) => hasTag(row.tags, wanted));
}

/** Validates every field before touching the row, so a refused write changes nothing. */
function applyWrite(row: PromptSnippetEntity, input: SnippetWrite, creating: boolean): void {
  const changes: Partial<PromptSnippetEntity> = {};
  if (input.identifier !== undefined) changes.identifier = input.identifier;
  if (creating || input.name !== undefined) changes.name = requireName(input.name ?? '');
  if (creating || input.snippet !== undefined) {
    if ((input.snippet ?? '').trim() === '') throw new BadUserInputError('snippet text is required', 'snippet');
    changes.snippet = optionalText(input.snippet, textLimitOf(PromptSnippetEntity, 'snippet'), 'snippet');
  }
  if (input.description !== undefined) changes.description = optionalText(input.description, textLimitOf(PromptSnippetEntity, 'description'), 'description') ?? null;
  if (input.tags !== undefined && input.tags !== null) {
    const tags = validateTagsForWrite(input.tags);
    if (!tags.ok) throw new BadUserInputError(tags.message, 'tags');
    changes.tags = tags.csv;
  }
  if (input.metadata !== undefined) {
    if (input.metadata === null) changes.metadata = null;
    else {
      const metadata = parseMetadataForWrite(input.metadata);
      if (!metadata.ok) throw new BadUserInputError(metadata.message, 'metadata');
      checkTextFits(metadata.json, textLimitOf(PromptSnippetEntity, 'metadata'), 'metadata', 'metadata as JSON');
      changes.metadata = metadata.json;
    }
  }
  if (input.isActive !== undefined && input.isActive !== null) changes.isActive = input.isActive;
  if (input.hidden !== undefined && input.hidden !== null) changes.hidden = input.hidden;
  if (input.sorting !== undefined && input.sorting !== null) {
    if (!Number.isInteger(input.sorting) || input.sorting < 0) throw new BadUserInputError('sorting must be 0 or more', 'sorting');
    changes.sorting = input.sorting;
  }
  Object.assign(row, changes);
}

