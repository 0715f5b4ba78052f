import DataLoader from 'dataloader';
import { OperationTypeNode } from 'graphql';
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import type { ModelPriceEntity } from '../providers/model-price.entity';
import type { ModelEntity } from '../providers/model.entity';
import type { StoredVersion, VersionPage } from '../prompt-history/prompt-history.service';
import type { PromptLibrary } from '../prompt-history/prompt-library';
import type { VersionedKind } from '../prompt-history/version-state';
import type { ProviderEntity } from '../providers/provider.entity';
import type { StoredRelease } from '../releases/release.service';
import type { RunProvenance } from '../runs';
import type { Services } from '../services';
import type { SkillEntity } from '../skills/skill.entity';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import { ActiveSnippetIndex } from '../prompt/snippet-index';
import { type PromptSnippet, toPromptSnippet } from '../snippets/snippet.types';

/** A record's page of versions (see PromptHistoryService.versionsOf). */
export interface VersionsKey {
  uid: number;
  page: VersionPage;
}

/**
 * Per-request batching, so a list of 50 configurations with their models,
 * providers, skills and selected snippets costs a fixed number of queries.
 */
export interface Loaders {
  /** The stored versions of each record, newest first, by kind and uid: batched, read again by every load (a mutation may have written one since). */
  versionsByUid: { [K in VersionedKind]: DataLoader<VersionsKey, StoredVersion<K>[], string> };
  /**
   * The same, for `operation`: a query writes nothing, so its loads of one
   * page are read once however many fields (aliases) ask for it, also when
   * they ask at different moments; a mutation's are read each time.
   */
  versionsFor(operation: OperationTypeNode): Loaders['versionsByUid'];
  /** Non-deleted configurations by uid (a run's configuration). */
  configurationByUid: DataLoader<number, ConfigurationEntity | null>;
  modelByUid: DataLoader<number, ModelEntity | null>;
  providerByUid: DataLoader<number, ProviderEntity | null>;
  priceByModelUid: DataLoader<number, ModelPriceEntity | null>;
  skillsByConfigurationUid: DataLoader<number, SkillEntity[]>;
  /** What prompt each run started with (release, label, snippet versions), by run uid. */
  runProvenanceByUid: DataLoader<number, RunProvenance | null>;
  releaseById: DataLoader<number, StoredRelease | null>;
  /** Every release of each configuration, newest first. */
  releasesByConfigurationUid: DataLoader<number, StoredRelease[]>;
  /** Every active snippet, loaded and indexed by tag once per request; tag selection happens in code. */
  activeSnippets: () => Promise<ActiveSnippetIndex<PromptSnippetEntity>>;
  /** The whole prompt library (snippets and configurations), once per request. */
  library: () => Promise<PromptLibrary>;
  /** The API view of a snippet row, built once per request however many configurations select it. */
  snippetView: (row: PromptSnippetEntity) => PromptSnippet;
  /** The views of a selection, built once per selection (configurations sharing tags share it). */
  snippetViews: (rows: readonly PromptSnippetEntity[]) => PromptSnippet[];
  /** The API views of a loaded list, mapped once per request however many fields (aliases) ask for the same list. */
  viewsOf: <S, V>(rows: readonly S[], map: (row: S) => V) => V[];
}

/**
 * A request's loaders, each made on first use: most operations use none or a
 * few, and a subscription keeps its context for as long as it lasts (a run's
 * trace with 1,000 watchers held some 4.6 kB of unused loaders per watcher
 * through the run). Call the functions as methods (`loaders.library()`).
 */
export function createLoaders(services: Services): Loaders {
  return new RequestLoaders(services);
}

class RequestLoaders implements Loaders {
  private versions?: Loaders['versionsByUid'];
  private queryVersions?: Loaders['versionsByUid'];
  private configurations?: Loaders['configurationByUid'];
  private models?: Loaders['modelByUid'];
  private providers?: Loaders['providerByUid'];
  private prices?: Loaders['priceByModelUid'];
  private skills?: Loaders['skillsByConfigurationUid'];
  private provenance?: Loaders['runProvenanceByUid'];
  private releases?: Loaders['releaseById'];
  private configurationReleases?: Loaders['releasesByConfigurationUid'];
  private active: Promise<ActiveSnippetIndex<PromptSnippetEntity>> | null = null;
  private wholeLibrary: Promise<PromptLibrary> | null = null;
  private views?: WeakMap<PromptSnippetEntity, PromptSnippet>;
  private selections?: WeakMap<readonly PromptSnippetEntity[], PromptSnippet[]>;
  private listViews?: WeakMap<readonly unknown[], unknown[]>;

  constructor(private readonly services: Services) {}

  get versionsByUid(): Loaders['versionsByUid'] {
    return (this.versions ??= { snippet: this.versionsOf('snippet', false), configuration: this.versionsOf('configuration', false), skill: this.versionsOf('skill', false), task: this.versionsOf('task', false) });
  }

  versionsFor(operation: OperationTypeNode): Loaders['versionsByUid'] {
    if (operation !== OperationTypeNode.QUERY) return this.versionsByUid;
    return (this.queryVersions ??= { snippet: this.versionsOf('snippet', true), configuration: this.versionsOf('configuration', true), skill: this.versionsOf('skill', true), task: this.versionsOf('task', true) });
  }

  get configurationByUid(): Loaders['configurationByUid'] {
    // Batched but not cached: a later mutation of the same document may have changed the row.
    return (this.configurations ??= new DataLoader(
      async (uids) => {
        const rows = await this.services.configurations.findByUids(uids);
        return uids.map((uid) => rows.find((row) => row.uid === uid) ?? null);
      },
      { cache: false },
    ));
  }

  get modelByUid(): Loaders['modelByUid'] {
    return (this.models ??= new DataLoader(async (uids) => {
      const rows = await this.services.models.findByUids(uids);
      return uids.map((uid) => rows.find((row) => row.uid === uid) ?? null);
    }));
  }

  get providerByUid(): Loaders['providerByUid'] {
    return (this.providers ??= new DataLoader(async (uids) => {
      const rows = await this.services.providers.findByUids(uids);
      return uids.map((uid) => rows.find((row) => row.uid === uid) ?? null);
    }));
  }

  get priceByModelUid(): Loaders['priceByModelUid'] {
    return (this.prices ??= new DataLoader(async (uids) => {
      const rows = await this.services.models.pricesByModelUids(uids);
      return uids.map((uid) => rows.find((row) => row.modelUid === uid) ?? null);
    }));
  }

  get skillsByConfigurationUid(): Loaders['skillsByConfigurationUid'] {
    return (this.skills ??= new DataLoader(async (uids) => {
      const map = await this.services.configurations.skillsByConfiguration(uids);
      return uids.map((uid) => map.get(uid) ?? []);
    }));
  }

  get runProvenanceByUid(): Loaders['runProvenanceByUid'] {
    return (this.provenance ??= new DataLoader(async (uids) => {
      const map = await this.services.runReader.provenanceOf(uids);
      return uids.map((uid) => map.get(uid) ?? null);
    }));
  }

  get releaseById(): Loaders['releaseById'] {
    return (this.releases ??= new DataLoader(async (ids) => {
      const rows = await this.services.releases.byIds(ids);
      return ids.map((id) => rows.find((row) => row.id === id) ?? null);
    }));
  }

  get releasesByConfigurationUid(): Loaders['releasesByConfigurationUid'] {
    return (this.configurationReleases ??= new DataLoader(async (uids) => {
      const rows = await this.services.releases.forConfigurations(uids);
      return uids.map((uid) => rows.filter((row) => row.configurationUid === uid));
    }));
  }

  activeSnippets(): Promise<ActiveSnippetIndex<PromptSnippetEntity>> {
    return (this.active ??= this.services.snippets.allActive().then((rows) => new ActiveSnippetIndex(rows)));
  }

  library(): Promise<PromptLibrary> {
    return (this.wholeLibrary ??= this.services.library.get());
  }

  snippetView(row: PromptSnippetEntity): PromptSnippet {
    const views = (this.views ??= new WeakMap());
    let view = views.get(row);
    if (!view) views.set(row, (view = toPromptSnippet(row)));
    return view;
  }

  viewsOf<S, V>(rows: readonly S[], map: (row: S) => V): V[] {
    const lists = (this.listViews ??= new WeakMap());
    let mapped = lists.get(rows) as V[] | undefined;
    if (!mapped) lists.set(rows, (mapped = rows.map(map)));
    return mapped;
  }

  snippetViews(rows: readonly PromptSnippetEntity[]): PromptSnippet[] {
    const selections = (this.selections ??= new WeakMap());
    let mapped = selections.get(rows);
    if (!mapped) selections.set(rows, (mapped = rows.map((row) => this.snippetView(row))));
    return mapped;
  }

  private versionsOf<K extends VersionedKind>(kind: K, cache: boolean): DataLoader<VersionsKey, StoredVersion<K>[], string> {
    return new DataLoader<VersionsKey, StoredVersion<K>[], string>(
      async (keys) => {
        // One read per page shape (every record of a list asks for the same one).
        const byPage = new Map<string, { page: VersionPage; uids: number[] }>();
        for (const { uid, page } of keys) {
          const shape = `${page.limit}:${page.before}`;
          let group = byPage.get(shape);
          if (!group) byPage.set(shape, (group = { page, uids: [] }));
          group.uids.push(uid);
        }
        const read = new Map<string, Map<number, StoredVersion<K>[]>>();
        for (const [shape, group] of byPage) read.set(shape, await this.services.history.versionsOf(kind, group.uids, group.page));
        return keys.map(({ uid, page }) => read.get(`${page.limit}:${page.before}`)?.get(uid) ?? []);
      },
      { cache, cacheKeyFn: ({ uid, page }) => `${uid}:${page.limit}:${page.before}` },
    );
  }
}
