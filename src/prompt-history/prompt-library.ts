/**
 * The whole prompt library (every live snippet and configuration) held in
 * memory for the questions that need all of it at once: composition
 * provenance, "which configurations use this snippet", and the impact
 * preview of an edit. It is reloaded when it may be stale: after a change
 * event (API writes and detected external writes, from any instance) or when
 * the tables' cheap signature (row count, sum and maximum of `tstamp`) moved.
 */
import type { DataSource } from 'typeorm';
import { composeWithProvenance, type Composition } from '../prompt/composition';
import { ConfigurationEntity } from '../configurations/configuration.entity';
import { effectiveSystemPromptOf, selectedSnippetsOf } from '../prompt/configuration-prompt';
import { getEntities } from '../db/raw-rows';
import { liveRowsInListOrder } from '../db/record-rules';
import { PromptSnippetEntity } from '../snippets/snippet.entity';
import { binaryCollation, nameCollationOf, type NameCollation } from '../prompt/list-order';
import { ActiveSnippetIndex } from '../snippets/snippet.service';
import { normalizeTag, parseSelectionTags, parseTags } from '../prompt/tags';
import type { PromptHistoryService } from './prompt-history.service';

export type LibrarySnippet = PromptSnippetEntity & { isActive: boolean };

export class PromptLibrary {
  /** Every live snippet carrying a tag (active or not), list order, each once. */
  private readonly liveByTagMap = new Map<string, PromptSnippetEntity[]>();
  private readonly configurationsByTag = new Map<string, ConfigurationEntity[]>();
  readonly active: ActiveSnippetIndex;

  /**
   * `snippets` and `configurations` in the database's list order (as
   * `liveRowsInListOrder` reads them); `collation` is how that database
   * compares names, for placing an edited row (see list-order.ts).
   */
  constructor(
    readonly snippets: readonly PromptSnippetEntity[],
    readonly configurations: readonly ConfigurationEntity[],
    readonly collation: NameCollation = binaryCollation,
  ) {
    const ordered = snippets;
    for (const row of ordered) {
      for (const tag of new Set(parseTags(row.tags))) {
        const list = this.liveByTagMap.get(tag);
        if (list) list.push(row);
        else this.liveByTagMap.set(tag, [row]);
      }
    }
    this.active = new ActiveSnippetIndex(ordered.filter((row) => row.isActive));
    for (const configuration of configurations) {
      for (const tag of parseSelectionTags(configuration.snippetTags)) {
        const list = this.configurationsByTag.get(tag);
        if (list) list.push(configuration);
        else this.configurationsByTag.set(tag, [configuration]);
      }
    }
  }

  liveByTag(tag: string): readonly PromptSnippetEntity[] {
    return this.liveByTagMap.get(normalizeTag(tag)) ?? [];
  }

  /** Configurations selecting at least one of the tags, each once, in list order. */
  configurationsSelecting(tags: Iterable<string>): ConfigurationEntity[] {
    const found = new Set<ConfigurationEntity>();
    for (const tag of tags) for (const configuration of this.configurationsByTag.get(tag) ?? []) found.add(configuration);
    return this.configurations.filter((configuration) => found.has(configuration));
  }

  composition(configuration: ConfigurationEntity): Composition<PromptSnippetEntity> {
    return composeWithProvenance(parseSelectionTags(configuration.snippetTags), (tag) => this.liveByTag(tag));
  }

  effectiveSystemPrompt(configuration: ConfigurationEntity): string {
    return effectiveSystemPromptOf(configuration, this.active);
  }

  /** Configurations whose tags select the snippet now (it is in their prompt). */
  usedBy(snippet: PromptSnippetEntity): ConfigurationEntity[] {
    return this.configurationsSelecting(new Set(parseTags(snippet.tags))).filter((configuration) =>
      selectedSnippetsOf(configuration, this.active).some((selected) => selected.uid === snippet.uid),
    );
  }
}

interface Signature {
  generation: number;
  tables: string;
}

export class PromptLibraryCache {
  private generation = 0;
  private cached: { signature: Signature; library: Promise<PromptLibrary> } | null = null;

  constructor(
    private readonly dataSource: DataSource,
    history: PromptHistoryService,
  ) {
    history.onChange(() => {
      this.generation += 1;
    });
  }

  async get(): Promise<PromptLibrary> {
    const signature: Signature = { generation: this.generation, tables: await this.tableSignature() };
    const cached = this.cached;
    if (cached && cached.signature.generation === signature.generation && cached.signature.tables === signature.tables) return cached.library;
    const library = this.load();
    this.cached = { signature, library };
    library.catch(() => {
      if (this.cached?.library === library) this.cached = null;
    });
    return library;
  }

  private async tableSignature(): Promise<string> {
    const rows = (await this.dataSource.query(
      `SELECT (SELECT COUNT(*) FROM tx_nrllm_promptsnippet) AS s_count, (SELECT COALESCE(SUM(tstamp), 0) FROM tx_nrllm_promptsnippet) AS s_sum, (SELECT COALESCE(MAX(tstamp), 0) FROM tx_nrllm_promptsnippet) AS s_max,
              (SELECT COUNT(*) FROM tx_nrllm_configuration) AS c_count, (SELECT COALESCE(SUM(tstamp), 0) FROM tx_nrllm_configuration) AS c_sum, (SELECT COALESCE(MAX(tstamp), 0) FROM tx_nrllm_configuration) AS c_max`,
    )) as Record<string, unknown>[];
    return Object.values(rows[0] ?? {}).map(String).join(':');
  }

  private async load(): Promise<PromptLibrary> {
    const [snippets, configurations] = await Promise.all([
      getEntities(this.dataSource, liveRowsInListOrder(this.dataSource, PromptSnippetEntity, 's')),
      getEntities(this.dataSource, liveRowsInListOrder(this.dataSource, ConfigurationEntity, 'c')),
    ]);
    return new PromptLibrary(snippets, configurations, nameCollationOf(this.dataSource.options.type));
  }
}
