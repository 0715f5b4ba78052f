/**
 * The composition root: builds every service once, with only what it uses.
 */
import type { DataSource } from 'typeorm';
import { ApiTokenService } from './auth/api-token.service';
import type { AppConfig } from './config';
import { ConfigurationService } from './configurations/configuration.service';
import type { Dialect } from './db/data-source';
import type { Logger } from './logger';
import { ModelService } from './providers/model.service';
import type { PromptEventBus } from './prompt-history/prompt-event-bus';
import { PromptHistoryService } from './prompt-history/prompt-history.service';
import { PromptLibraryCache } from './prompt-history/prompt-library';
import { ProviderTester } from './providers/provider-tester';
import { ProviderService } from './providers/provider.service';
import type { RunService } from './runs/run.service';
import { KeyedMutex } from './shared/keyed-mutex';
import type { SecretBox } from './shared/secret-box';
import { SkillService } from './skills/skill.service';
import { SnippetService } from './snippets/snippet.service';

export interface Services {
  dataSource: DataSource;
  dialect: Dialect;
  snippets: SnippetService;
  providers: ProviderService;
  models: ModelService;
  configurations: ConfigurationService;
  skills: SkillService;
  tokens: ApiTokenService;
  providerTester: ProviderTester;
  history: PromptHistoryService;
  library: PromptLibraryCache;
  /** Serialises writes per table in this process (identifier checks, version numbers). */
  writeLock: KeyedMutex;
  runs: RunService;
}

export type CoreServices = Omit<Services, 'runs'>;

export function createCoreServices(dataSource: DataSource, dialect: Dialect, config: AppConfig, secrets: SecretBox, logger: Logger, promptEvents: PromptEventBus): CoreServices {
  const writeLock = new KeyedMutex();
  const history = new PromptHistoryService(dataSource, promptEvents);
  const providers = new ProviderService(dataSource, writeLock, secrets, config.readEnv);
  const models = new ModelService(dataSource, writeLock);
  return {
    dataSource,
    dialect,
    snippets: new SnippetService(dataSource, writeLock, history),
    providers,
    models,
    configurations: new ConfigurationService(dataSource, writeLock, history),
    skills: new SkillService(dataSource, writeLock, history),
    tokens: new ApiTokenService(dataSource, logger),
    providerTester: new ProviderTester(providers, models, logger),
    history,
    library: new PromptLibraryCache(dataSource, history),
    writeLock,
  };
}
