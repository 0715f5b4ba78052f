import DataLoader from 'dataloader';
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import type { ModelPriceEntity } from '../providers/model-price.entity';
import type { ModelEntity } from '../providers/model.entity';
import type { StoredVersion } from '../prompt-history/prompt-history.service';
import type { PromptLibrary } from '../prompt-history/prompt-library';
import type { VersionedKind } from '../prompt-history/version-state';
import type { ProviderEntity } from '../providers/provider.entity';
import type { StoredRelease } from '../releases/release.service';
import type { RunProvenance } from '../runs/run-store';
import type { Services } from '../services';
import type { SkillEntity } from '../skills/skill.entity';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import { ActiveSnippetIndex } from '../snippets/snippet.service';
import { type PromptSnippet, toPromptSnippet } from '../snippets/snippet.types';

/**
 * Per-request batching, so a list of 50 configurations with their models,
 * providers, skills and selected snippets costs a fixed number of queries.
 */
export interface Loaders {
  /** The stored versions of each record, newest first, by kind and uid. */
  versionsByUid: { [K in VersionedKind]: DataLoader<number, StoredVersion<K>[]> };
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
  activeSnippets: () => Promise<ActiveSnippetIndex>;
  /** The whole prompt library (snippets and configurations), once per request. */
  library: () => Promise<PromptLibrary>;
  /** The API view of a snippet row, built once per request however many configurations select it. */
  snippetView: (row: PromptSnippetEntity) => PromptSnippet;
  /** The views of a selection, built once per selection (configurations sharing tags share it). */
  snippetViews: (rows: readonly PromptSnippetEntity[]) => PromptSnippet[];
}

export function createLoaders(services: Services): Loaders {
  let activeSnippets: Promise<ActiveSnippetIndex> | null = null;
  let library: Promise<PromptLibrary> | null = null;
  const views = new WeakMap<PromptSnippetEntity, PromptSnippet>();
  const selections = new WeakMap<readonly PromptSnippetEntity[], PromptSnippet[]>();
  const snippetView = (row: PromptSnippetEntity): PromptSnippet => {
    let view = views.get(row);
    if (!view) views.set(row, (view = toPromptSnippet(row)));
    return view;
  };
  // Batched but not cached: a later mutation of the same document may have written a version or changed the row.
  const versionsOf = <K extends VersionedKind>(kind: K) =>
    new DataLoader<number, StoredVersion<K>[]>(
      async (uids) => {
        const map = await services.history.versionsOf(kind, uids);
        return uids.map((uid) => map.get(uid) ?? []);
      },
      { cache: false },
    );
  return {
    versionsByUid: { snippet: versionsOf('snippet'), configuration: versionsOf('configuration'), skill: versionsOf('skill') },
    configurationByUid: new DataLoader(
      async (uids) => {
        const rows = await services.configurations.findByUids(uids);
        return uids.map((uid) => rows.find((row) => row.uid === uid) ?? null);
      },
      { cache: false },
    ),
    modelByUid: new DataLoader(async (uids) => {
      const rows = await services.models.findByUids(uids);
      return uids.map((uid) => rows.find((row) => row.uid === uid) ?? null);
    }),
    providerByUid: new DataLoader(async (uids) => {
      const rows = await services.providers.findByUids(uids);
      return uids.map((uid) => rows.find((row) => row.uid === uid) ?? null);
    }),
    priceByModelUid: new DataLoader(async (uids) => {
      const rows = await services.models.pricesByModelUids(uids);
      return uids.map((uid) => rows.find((row) => row.modelUid === uid) ?? null);
    }),
    skillsByConfigurationUid: new DataLoader(async (uids) => {
      const map = await services.configurations.skillsByConfiguration(uids);
      return uids.map((uid) => map.get(uid) ?? []);
    }),
    runProvenanceByUid: new DataLoader(async (uids) => {
      const map = await services.runs.store.provenanceOf(uids);
      return uids.map((uid) => map.get(uid) ?? null);
    }),
    releaseById: new DataLoader(async (ids) => {
      const rows = await services.releases.byIds(ids);
      return ids.map((id) => rows.find((row) => row.id === id) ?? null);
    }),
    releasesByConfigurationUid: new DataLoader(async (uids) => {
      const rows = await services.releases.forConfigurations(uids);
      return uids.map((uid) => rows.filter((row) => row.configurationUid === uid));
    }),
    activeSnippets: () => (activeSnippets ??= services.snippets.allActive().then((rows) => new ActiveSnippetIndex(rows))),
    library: () => (library ??= services.library.get()),
    snippetView,
    snippetViews: (rows) => {
      let mapped = selections.get(rows);
      if (!mapped) selections.set(rows, (mapped = rows.map(snippetView)));
      return mapped;
    },
  };
}
