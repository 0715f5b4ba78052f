import DataLoader from 'dataloader';
import type { ModelPriceEntity } from '../providers/model-price.entity';
import type { ModelEntity } from '../providers/model.entity';
import type { ProviderEntity } from '../providers/provider.entity';
import type { Services } from '../services';
import type { SkillEntity } from '../skills/skill.entity';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';

/**
 * Per-request batching, so a list of 50 configurations with their models,
 * providers, skills and selected snippets costs a fixed number of queries.
 */
export interface Loaders {
  modelByUid: DataLoader<number, ModelEntity | null>;
  providerByUid: DataLoader<number, ProviderEntity | null>;
  priceByModelUid: DataLoader<number, ModelPriceEntity | null>;
  skillsByConfigurationUid: DataLoader<number, SkillEntity[]>;
  /** Every active snippet, loaded once per request; tag selection happens in code. */
  activeSnippets: () => Promise<PromptSnippetEntity[]>;
}

export function createLoaders(services: Services): Loaders {
  let activeSnippets: Promise<PromptSnippetEntity[]> | null = null;
  return {
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
    activeSnippets: () => (activeSnippets ??= services.snippets.allActive()),
  };
}
