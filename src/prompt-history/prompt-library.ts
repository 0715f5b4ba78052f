/**
 * The whole prompt library (every live snippet and configuration) held in
 * memory and indexed for the questions that need all of it at once:
 * composition provenance, "which configurations use this snippet", and the
 * impact preview of an edit.
 *
 * The index: tag → live snippets (list order), tag → active snippets,
 * tag → configurations selecting it, and the selection of each
 * configuration's tags, kept until a snippet carrying one of those tags
 * changes — which answers snippet → configurations (`usedBy`) without
 * composing anything. Every composition goes through the one rule
 * (src/prompt: `effectiveSystemPromptOf`, effective-prompt.ts,
 * composition.ts) over these lists.
 *
 * It is loaded once and then kept up to date row by row: change events (API
 * writes and detected external writes, from any instance) name the rows to
 * read again, and before each use a cheap signature of the tables (count and
 * sum of `tstamp` of the live rows) is compared with the index's own; a
 * difference (a write nobody announced here) is found by reading every live
 * row's uid and `tstamp` and reading again those that differ. A row is never
 * placed by a comparator of this service: when an edit moves rows (tags,
 * sorting, name, a new or deleted row), the database's list order is read
 * again (uids only) and the lists it touched are sorted by it, so the lists
 * stay exactly as the database orders them.
 */
import type { DataSource, EntityTarget, ObjectLiteral } from 'typeorm';
import { composeWithProvenance, type Composition } from '../prompt/composition';
import { ConfigurationEntity } from '../configurations/configuration.entity';
import { effectiveSystemPromptOf, selectedSnippetsOf, type SnippetSelectionSource } from '../prompt/configuration-prompt';
import { snippetBlock } from '../prompt/effective-prompt';
import { isActiveSnippet } from '../prompt/snippet-index';
import { getEntities, selectArrays } from '../db/raw-rows';
import { liveRowsInListOrder } from '../db/record-rules';
import { PromptSnippetEntity } from '../snippets/snippet.entity';
import { binaryCollation, nameCollationOf, type NameCollation } from '../prompt/list-order';
import { normalizeTag, parseSelectionTags, parseTags } from '../prompt/tags';
import type { PromptHistoryService } from './prompt-history.service';

export type LibrarySnippet = PromptSnippetEntity & { isActive: boolean };

/** The database's list order (sorting, name by its collation, uid): rank by uid. */
export type ListRanks = Readonly<Map<number, number>>;

interface Selection {
  selected: readonly PromptSnippetEntity[];
  uids: Set<number>;
  /** The composed block of `selected` (`composeSnippetBlock`), once asked for: gone with the selection. */
  block?: string;
  /** The block of each of `selected` (`snippetBlock`), in order, once asked for. */
  blocks?: readonly string[];
}

export class PromptLibrary implements SnippetSelectionSource {
  private readonly snippetsByUid = new Map<number, PromptSnippetEntity>();
  /** Every live snippet carrying a tag (active or not), list order, each once. */
  private readonly liveByTagMap = new Map<string, PromptSnippetEntity[]>();
  /** The active ones of `liveByTagMap`, made when first asked for. */
  private readonly activeByTagMap = new Map<string, readonly PromptSnippetEntity[]>();
  private readonly configurationsByUid = new Map<number, ConfigurationEntity>();
  private readonly configurationsByTag = new Map<string, Set<number>>();
  /** Live configurations in list order, and each one's place in it. */
  private configurationList: ConfigurationEntity[] = [];
  private readonly configurationPlace = new Map<number, number>();
  /** Selections by `snippet_tags` text, and the texts that read each tag. */
  private readonly selections = new Map<string, Selection>();
  private readonly selectionsByTag = new Map<string, Set<string>>();
  private tstampSums = { snippet: 0, configuration: 0 };
  private readonly blocks = new WeakMap<PromptSnippetEntity, string>();
  /** The selections holding a composed block, least recently used first, with the block's length; and their sum. */
  private readonly blockUse = new Map<string, number>();
  private blockCharacters = 0;
  /** Each live snippet's place in the database's list order (kept current: read again whenever rows move). */
  private snippetRanks: ListRanks;

  /**
   * `snippets` and `configurations` in the database's list order (as
   * `liveRowsInListOrder` reads them); `collation` is how that database
   * compares names, for placing an edited row in a preview (see list-order.ts).
   */
  constructor(
    snippets: readonly PromptSnippetEntity[],
    configurations: readonly ConfigurationEntity[],
    readonly collation: NameCollation = binaryCollation,
  ) {
    this.snippetRanks = new Map(snippets.map((row, index) => [row.uid, index]));
    for (const row of snippets) this.addSnippet(row);
    this.configurationList = [...configurations];
    this.placeConfigurations();
    for (const row of configurations) this.addConfiguration(row);
  }

  snippet(uid: number): PromptSnippetEntity | undefined {
    return this.snippetsByUid.get(uid);
  }

  /** The snippet's place in the database's list order of all live snippets. */
  rankOf(uid: number): number | undefined {
    return this.snippetRanks.get(uid);
  }

  configuration(uid: number): ConfigurationEntity | undefined {
    return this.configurationsByUid.get(uid);
  }

  get snippetCount(): number {
    return this.snippetsByUid.size;
  }

  get configurationCount(): number {
    return this.configurationsByUid.size;
  }

  liveByTag(tag: string): readonly PromptSnippetEntity[] {
    return this.liveByTagMap.get(normalizeTag(tag)) ?? [];
  }

  /** `activeByTag` of behaviour.md §3.3: active live snippets carrying the tag, hidden ones included, list order. */
  activeByTag(tag: string): readonly PromptSnippetEntity[] {
    const wanted = normalizeTag(tag);
    if (wanted === '') return [];
    let list = this.activeByTagMap.get(wanted);
    if (!list) this.activeByTagMap.set(wanted, (list = (this.liveByTagMap.get(wanted) ?? []).filter(isActiveSnippet)));
    return list;
  }

  /** The memo `selectedSnippetsOf` uses: one selection per `snippet_tags` text, until a snippet of one of its tags changes. */
  selection(snippetTags: string, select: () => readonly PromptSnippetEntity[]): readonly PromptSnippetEntity[] {
    return this.selectionOf(snippetTags, select).selected;
  }

  /**
   * The memo `selectedSnippetBlockOf` uses: the composed block of one selection, kept as long as the
   * selection (until a snippet of one of its tags changes), so a preview composes again only the
   * prompts an edit changes. The blocks kept hold at most `BLOCK_CHARACTERS` characters together;
   * beyond, the least recently used are dropped (and composed again when next asked for).
   */
  selectionBlock(snippetTags: string, compose: () => string): string {
    const entry = this.selections.get(snippetTags);
    if (entry?.block !== undefined) {
      // The most recently used go last.
      this.blockUse.delete(snippetTags);
      this.blockUse.set(snippetTags, entry.block.length);
      return entry.block;
    }
    // `compose` selects through `selection`, which makes the entry.
    const block = compose();
    const made = this.selections.get(snippetTags);
    if (made && block.length <= BLOCK_CHARACTERS) {
      made.block = block;
      this.blockUse.set(snippetTags, block.length);
      this.blockCharacters += block.length;
      for (const [oldest, length] of this.blockUse) {
        if (this.blockCharacters <= BLOCK_CHARACTERS) break;
        this.blockUse.delete(oldest);
        this.blockCharacters -= length;
        const held = this.selections.get(oldest);
        if (held) held.block = undefined;
      }
    }
    return block;
  }

  /** The block each snippet adds to a prompt (`snippetBlock`), remembered per row: a changed row is a new object. */
  snippetBlock(snippet: PromptSnippetEntity): string {
    let block = this.blocks.get(snippet);
    if (block === undefined) this.blocks.set(snippet, (block = contiguous(snippetBlock(snippet))));
    return block;
  }

  /**
   * Composes ahead what previews and compositions read of the configurations in list order from
   * `from` on, at most `count` of them: each one's selection, the blocks of its snippets and its
   * composed block (the memos `selectedBlocks` and `selectionBlock` keep). Returns where to go on,
   * or `undefined` when every configuration is done or the composed blocks held reach
   * `PREPARED_CHARACTERS` (the rest of the budget is left to the prompts requests ask for).
   */
  prepare(from: number, count: number): number | undefined {
    const to = Math.min(from + count, this.configurationList.length);
    for (let index = from; index < to; index += 1) {
      if (this.blockCharacters >= PREPARED_CHARACTERS) return undefined;
      const configuration = this.configurationList[index]!;
      this.selectedBlocks(configuration);
      this.effectiveSystemPrompt(configuration);
    }
    return to < this.configurationList.length ? to : undefined;
  }

  /** Configurations selecting at least one of the tags, each once, in list order. */
  configurationsSelecting(tags: Iterable<string>): ConfigurationEntity[] {
    const found = new Set<number>();
    for (const tag of tags) for (const uid of this.configurationsByTag.get(tag) ?? []) found.add(uid);
    const place = (uid: number) => this.configurationPlace.get(uid) ?? Number.MAX_SAFE_INTEGER;
    return [...found].sort((left, right) => place(left) - place(right) || left - right).map((uid) => this.configurationsByUid.get(uid)!);
  }

  /**
   * The block (`snippetBlock`) of each snippet the configuration selects, in order, remembered
   * with the selection: `joinSnippetBlocks` of them is its composed block.
   */
  selectedBlocks(configuration: ConfigurationEntity): readonly string[] {
    this.selectedSnippets(configuration);
    const entry = this.selections.get(configuration.snippetTags)!;
    return (entry.blocks ??= entry.selected.map((row) => this.snippetBlock(row)));
  }

  composition(configuration: ConfigurationEntity): Composition<PromptSnippetEntity> {
    return composeWithProvenance(parseSelectionTags(configuration.snippetTags), (tag) => this.liveByTag(tag));
  }

  selectedSnippets(configuration: ConfigurationEntity): readonly PromptSnippetEntity[] {
    return selectedSnippetsOf(configuration, this);
  }

  effectiveSystemPrompt(configuration: ConfigurationEntity): string {
    return effectiveSystemPromptOf(configuration, this);
  }

  /** Configurations whose tags select the snippet now (it is in their prompt), in list order. */
  usedBy(snippet: Pick<PromptSnippetEntity, 'uid' | 'tags'>): ConfigurationEntity[] {
    return this.configurationsSelecting(new Set(parseTags(snippet.tags))).filter((configuration) => {
      this.selectedSnippets(configuration);
      return this.selections.get(configuration.snippetTags)!.uids.has(snippet.uid);
    });
  }

  /** Count and sum of `tstamp` of the live rows: what the tables' signature must be when the index is current. */
  signature(): { snippetCount: number; snippetSum: number; configurationCount: number; configurationSum: number } {
    return { snippetCount: this.snippetsByUid.size, snippetSum: this.tstampSums.snippet, configurationCount: this.configurationsByUid.size, configurationSum: this.tstampSums.configuration };
  }

  /** Every live row's `tstamp` by uid, to compare with the table's. */
  stamps(kind: 'snippet' | 'configuration'): Map<number, number> {
    const rows = kind === 'snippet' ? this.snippetsByUid : this.configurationsByUid;
    return new Map([...rows].map(([uid, row]) => [uid, Number(row.tstamp)]));
  }

  /**
   * Takes rows read again (`null`: the row is gone from the table). Returns
   * whether rows moved (a tag, sorting or name changed, a row came or went):
   * then `reorderSnippets` must follow with the database's list order.
   */
  applySnippet(uid: number, row: PromptSnippetEntity | null): boolean {
    const old = this.snippetsByUid.get(uid);
    const fresh = row && !row.deleted ? row : null;
    if (!old && !fresh) return false;
    const oldTags = new Set(old ? parseTags(old.tags) : []);
    const newTags = new Set(fresh ? parseTags(fresh.tags) : []);
    const moved = !old || !fresh || old.sorting !== fresh.sorting || old.name !== fresh.name || !sameSet(oldTags, newTags);
    for (const tag of new Set([...oldTags, ...newTags])) this.forgetTag(tag);
    if (!moved && [...oldTags].every((tag) => this.liveByTagMap.get(tag)?.includes(old))) {
      // Same tags, same place: the row is swapped in where it was.
      for (const tag of oldTags) {
        const list = this.liveByTagMap.get(tag)!;
        list[list.indexOf(old!)] = fresh!;
      }
      this.snippetsByUid.set(uid, fresh!);
      this.tstampSums.snippet += Number(fresh!.tstamp) - Number(old!.tstamp);
      return false;
    }
    if (old) this.removeSnippet(old);
    if (fresh) this.addSnippet(fresh, this.pendingOrder);
    return true;
  }

  /** Whether rows moved since the database's order was last applied (`reorderSnippets` / `reorderConfigurations`). */
  orderPending(kind: 'snippet' | 'configuration'): boolean {
    return kind === 'snippet' ? this.pendingOrder.size > 0 : this.configurationOrderPending;
  }

  /** Tags whose lists got a row added since the last `reorderSnippets`. */
  private readonly pendingOrder = new Set<string>();
  private configurationOrderPending = false;

  /** Sorts the lists that got rows by the database's list order (ranks of every live snippet, read after the rows). */
  reorderSnippets(ranks: ListRanks): void {
    this.snippetRanks = ranks;
    const rank = (row: PromptSnippetEntity) => ranks.get(row.uid) ?? Number.MAX_SAFE_INTEGER;
    for (const tag of this.pendingOrder) {
      this.liveByTagMap.get(tag)?.sort((left, right) => rank(left) - rank(right) || left.uid - right.uid);
      this.forgetTag(tag);
    }
    this.pendingOrder.clear();
  }

  /** Takes a configuration read again; returns whether the list order must be read again (a row came or went, or sorting or name changed). */
  applyConfiguration(uid: number, row: ConfigurationEntity | null): boolean {
    const old = this.configurationsByUid.get(uid);
    const fresh = row && !row.deleted ? row : null;
    if (!old && !fresh) return false;
    if (old) this.removeConfiguration(old);
    if (fresh) this.addConfiguration(fresh);
    const place = this.configurationPlace.get(uid);
    const moved = !old || !fresh || old.sorting !== fresh.sorting || old.name !== fresh.name || place === undefined;
    if (!moved) {
      this.configurationList[place] = fresh!;
      return false;
    }
    this.configurationOrderPending = true;
    return true;
  }

  /** The live configurations' uids in the database's list order, read after the rows. */
  reorderConfigurations(uidsInOrder: readonly number[]): void {
    this.configurationList = uidsInOrder.map((uid) => this.configurationsByUid.get(uid)).filter((row): row is ConfigurationEntity => row !== undefined);
    // A configuration the order does not list yet (written after it was read) goes last until the next change.
    const listed = new Set(this.configurationList);
    for (const row of this.configurationsByUid.values()) if (!listed.has(row)) this.configurationList.push(row);
    this.placeConfigurations();
    this.configurationOrderPending = false;
  }

  private addSnippet(row: PromptSnippetEntity, unordered?: Set<string>): void {
    this.snippetsByUid.set(row.uid, row);
    this.tstampSums.snippet += Number(row.tstamp);
    for (const tag of new Set(parseTags(row.tags))) {
      const list = this.liveByTagMap.get(tag);
      if (list) list.push(row);
      else this.liveByTagMap.set(tag, [row]);
      unordered?.add(tag);
    }
  }

  private removeSnippet(row: PromptSnippetEntity): void {
    this.snippetsByUid.delete(row.uid);
    this.tstampSums.snippet -= Number(row.tstamp);
    for (const tag of new Set(parseTags(row.tags))) {
      const list = this.liveByTagMap.get(tag);
      if (!list) continue;
      const index = list.indexOf(row);
      if (index >= 0) list.splice(index, 1);
      if (list.length === 0) this.liveByTagMap.delete(tag);
    }
  }

  private addConfiguration(row: ConfigurationEntity): void {
    this.configurationsByUid.set(row.uid, row);
    this.tstampSums.configuration += Number(row.tstamp);
    for (const tag of parseSelectionTags(row.snippetTags)) {
      const set = this.configurationsByTag.get(tag);
      if (set) set.add(row.uid);
      else this.configurationsByTag.set(tag, new Set([row.uid]));
    }
  }

  private removeConfiguration(row: ConfigurationEntity): void {
    this.configurationsByUid.delete(row.uid);
    this.tstampSums.configuration -= Number(row.tstamp);
    for (const tag of parseSelectionTags(row.snippetTags)) this.configurationsByTag.get(tag)?.delete(row.uid);
  }

  private placeConfigurations(): void {
    this.configurationPlace.clear();
    this.configurationList.forEach((row, index) => this.configurationPlace.set(row.uid, index));
  }

  private selectionOf(snippetTags: string, select: () => readonly PromptSnippetEntity[]): Selection {
    let entry = this.selections.get(snippetTags);
    if (!entry) {
      const selected = select();
      entry = { selected, uids: new Set(selected.map((row) => row.uid)) };
      this.selections.set(snippetTags, entry);
      for (const tag of parseSelectionTags(snippetTags)) {
        const keys = this.selectionsByTag.get(tag);
        if (keys) keys.add(snippetTags);
        else this.selectionsByTag.set(tag, new Set([snippetTags]));
      }
    }
    return entry;
  }

  /** A tag's list changed: its active list and every selection reading it are made again when next asked for. */
  private forgetTag(tag: string): void {
    this.activeByTagMap.delete(tag);
    const keys = this.selectionsByTag.get(tag);
    if (!keys) return;
    for (const key of keys) {
      this.selections.delete(key);
      const length = this.blockUse.get(key);
      if (length === undefined) continue;
      this.blockUse.delete(key);
      this.blockCharacters -= length;
    }
    this.selectionsByTag.delete(tag);
  }
}

/**
 * The same text in one piece of memory. A block is built by concatenation (label, ":\n", the
 * trimmed text: a slice of the row's text), which the engine keeps as a tree of pieces until it is
 * read whole; joining 300 such trees for every preview walked them again each time. Slicing a new
 * concatenation makes the engine copy it into one flat string once (the slice reads that copy).
 */
function contiguous(text: string): string {
  return (text + ' ').slice(0, -1);
}

/**
 * Characters of composed selection blocks a library keeps (`selectionBlock`): 64 Mi, some 64 MB of
 * Latin-1 text (twice that for text beyond it) — the prompts of 1,000 configurations of 50 kB.
 */
const BLOCK_CHARACTERS = 64 * 1024 * 1024;
/** Characters of composed blocks `prepare` fills the memo up to: three quarters of it. */
const PREPARED_CHARACTERS = (BLOCK_CHARACTERS / 4) * 3;
/** Configurations `PromptLibraryCache` prepares per event-loop turn: with prompts of 40 kB some 0.8 ms (p50; the first turn up to 11 ms), 1,000 in 0.3 s. */
const PREPARE_BATCH = 4;

function sameSet<T>(left: ReadonlySet<T>, right: ReadonlySet<T>): boolean {
  if (left.size !== right.size) return false;
  for (const item of left) if (!right.has(item)) return false;
  return true;
}

/** Rows read again per query when bringing the index up to date. */
const READ_CHUNK = 500;
/** More changed rows than this at once (a bulk import): the library is loaded afresh instead. */
const RELOAD_ABOVE = 2_000;

type IndexedKind = 'snippet' | 'configuration';

const TABLES: { [K in IndexedKind]: { table: string; entity: EntityTarget<ObjectLiteral> } } = {
  snippet: { table: 'tx_nrllm_promptsnippet', entity: PromptSnippetEntity },
  configuration: { table: 'tx_nrllm_configuration', entity: ConfigurationEntity },
};

/**
 * Keeps one `PromptLibrary` current for the whole service (see the top of
 * this file): loaded on first use, then brought up to date before each use
 * from the rows change events named and the tables' signature.
 */
export class PromptLibraryCache {
  private library: Promise<PromptLibrary> | null = null;
  private dirty = { snippet: new Set<number>(), configuration: new Set<number>() };
  private current: Promise<void> | null = null;
  private next: Promise<void> | null = null;
  /** The library whose prompts are being composed ahead (the newest loaded), and that work. */
  private preparing: PromptLibrary | null = null;
  private preparation: Promise<void> = Promise.resolve();

  constructor(
    private readonly dataSource: DataSource,
    history: PromptHistoryService,
  ) {
    history.onChange((event) => {
      if (event.kind === 'snippet' || event.kind === 'configuration') this.dirty[event.kind].add(event.uid);
    });
  }

  async get(): Promise<PromptLibrary> {
    await this.refresh();
    return this.loaded();
  }

  private loaded(): Promise<PromptLibrary> {
    if (!this.library) {
      const library = this.load();
      this.library = library;
      library.catch(() => {
        if (this.library === library) this.library = null;
      });
    }
    return this.library;
  }

  /**
   * Brings the library up to date with everything committed before the
   * call: one refresh at a time; a caller arriving while one runs waits for
   * the next, which all callers arriving meanwhile share.
   */
  private refresh(): Promise<void> {
    if (!this.current) {
      const running = this.bringUpToDate().finally(() => {
        if (this.current === running) this.current = null;
      });
      this.current = running;
      return running;
    }
    this.next ??= this.current
      .catch(() => undefined)
      .then(() => {
        this.next = null;
        return this.refresh();
      });
    return this.next;
  }

  private async bringUpToDate(): Promise<void> {
    const library = await this.loaded();
    const dirty = this.dirty;
    this.dirty = { snippet: new Set(), configuration: new Set() };
    try {
      if ((await this.reread(library, 'snippet', dirty.snippet)) === 'reloaded') return;
      if ((await this.reread(library, 'configuration', dirty.configuration)) === 'reloaded') return;
      // Writes no event announced here (another instance without Redis, a row TYPO3 wrote that the detector has not read yet).
      const tables = await this.tableSignature();
      const own = library.signature();
      if (tables.snippetCount !== own.snippetCount || tables.snippetSum !== own.snippetSum) {
        if ((await this.reconcile(library, 'snippet')) === 'reloaded') return;
      }
      if (tables.configurationCount !== own.configurationCount || tables.configurationSum !== own.configurationSum) await this.reconcile(library, 'configuration');
    } catch (error) {
      // Read them again next time.
      for (const uid of dirty.snippet) this.dirty.snippet.add(uid);
      for (const uid of dirty.configuration) this.dirty.configuration.add(uid);
      throw error;
    }
  }

  /** Finds the live rows whose `tstamp` differs from the index's (or that came or went) and reads them again. */
  private async reconcile(library: PromptLibrary, kind: IndexedKind): Promise<'reloaded' | 'updated'> {
    const { rows } = await selectArrays(this.dataSource, `SELECT uid, tstamp FROM ${TABLES[kind].table} WHERE deleted = 0`, []);
    const known = library.stamps(kind);
    const stale = new Set<number>();
    for (const [uid, tstamp] of rows) {
      const id = Number(uid);
      if (known.get(id) !== Number(tstamp)) stale.add(id);
      known.delete(id);
    }
    for (const uid of known.keys()) stale.add(uid);
    return this.reread(library, kind, stale);
  }

  /** Reads the rows again and takes them into the library, restoring the database's order where rows moved. */
  private async reread(library: PromptLibrary, kind: IndexedKind, uids: ReadonlySet<number>): Promise<'reloaded' | 'updated'> {
    if (uids.size === 0) {
      await this.reorder(library, kind);
      return 'updated';
    }
    if (uids.size > RELOAD_ABOVE) {
      this.library = Promise.resolve(await this.load());
      return 'reloaded';
    }
    const list = [...uids];
    const found = new Map<number, ObjectLiteral>();
    for (let start = 0; start < list.length; start += READ_CHUNK) {
      const chunk = list.slice(start, start + READ_CHUNK);
      // getMany, not the prepared array reads: the SQL differs with every number of uids.
      const rows = await this.dataSource.getRepository(TABLES[kind].entity).createQueryBuilder('row').where('row.uid IN (:...uids)', { uids: chunk }).getMany();
      for (const row of rows) found.set(Number(row.uid), row);
    }
    for (const uid of list) {
      const row = found.get(uid) ?? null;
      if (kind === 'snippet') library.applySnippet(uid, row as PromptSnippetEntity | null);
      else library.applyConfiguration(uid, row as ConfigurationEntity | null);
    }
    await this.reorder(library, kind);
    return 'updated';
  }

  /** Rows moved (now, or before a refresh that failed): the lists take the database's order again. */
  private async reorder(library: PromptLibrary, kind: IndexedKind): Promise<void> {
    if (!library.orderPending(kind)) return;
    const order = await this.listOrder(kind);
    if (kind === 'snippet') library.reorderSnippets(new Map(order.map((uid, index) => [uid, index])));
    else library.reorderConfigurations(order);
  }

  /** The uids of the live rows in the database's list order (as `liveRowsInListOrder` reads the rows). */
  private async listOrder(kind: IndexedKind): Promise<number[]> {
    const [sql, parameters] = liveRowsInListOrder(this.dataSource, TABLES[kind].entity, 'row').select('row.uid', 'uid').getQueryAndParameters();
    const { rows } = await selectArrays(this.dataSource, sql, parameters);
    return rows.map((row) => Number(row[0]));
  }

  private async tableSignature(): Promise<{ snippetCount: number; snippetSum: number; configurationCount: number; configurationSum: number }> {
    const { rows } = await selectArrays(
      this.dataSource,
      // One pass over each table (count and sum together): this runs before every use of the library.
      `SELECT s.n, s.total, c.n, c.total
         FROM (SELECT COUNT(*) AS n, COALESCE(SUM(tstamp), 0) AS total FROM tx_nrllm_promptsnippet WHERE deleted = 0) s,
              (SELECT COUNT(*) AS n, COALESCE(SUM(tstamp), 0) AS total FROM tx_nrllm_configuration WHERE deleted = 0) c`,
      [],
    );
    const [snippetCount, snippetSum, configurationCount, configurationSum] = (rows[0] ?? []).map(Number);
    return { snippetCount: snippetCount ?? 0, snippetSum: snippetSum ?? 0, configurationCount: configurationCount ?? 0, configurationSum: configurationSum ?? 0 };
  }

  private async load(): Promise<PromptLibrary> {
    const [snippets, configurations] = await Promise.all([
      getEntities(this.dataSource, liveRowsInListOrder(this.dataSource, PromptSnippetEntity, 's')),
      getEntities(this.dataSource, liveRowsInListOrder(this.dataSource, ConfigurationEntity, 'c')),
    ]);
    const library = new PromptLibrary(snippets, configurations, nameCollationOf(this.dataSource.options.type));
    // Composing ahead only saves time later: should it fail, requests compose (and report) on their own.
    this.preparation = this.prepare(library).catch(() => undefined);
    return library;
  }

  /** Resolves once the newest loaded library's prompts are composed ahead (or it was replaced). */
  prepared(): Promise<void> {
    return this.preparation;
  }

  /**
   * Composes every configuration's prompt ahead (`PromptLibrary.prepare`), `PREPARE_BATCH` per
   * event-loop turn, so that the first previews after a load do not compose the prompts they only
   * read: measured with 1,000 configurations of 40 kB, the first dozen previews took 2–5 times as
   * long as the later ones (BENCHMARKS.md, "Prompt library"). Stops when this library is replaced.
   */
  private async prepare(library: PromptLibrary): Promise<void> {
    this.preparing = library;
    let from: number | undefined = 0;
    while (from !== undefined && this.preparing === library) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      // Never between the steps of a refresh (rows taken in, their order not yet): after it.
      while (this.current) await this.current.catch(() => undefined);
      if (this.preparing !== library) return;
      from = library.prepare(from, PREPARE_BATCH);
    }
  }
}
