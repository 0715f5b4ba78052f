/**
 * The core services, built once by the composition root (app.ts), each with only what it uses.
 */
import type { DataSource } from 'typeorm';
import { ApiTokenService } from './auth/api-token.service';
import type { RevocationBus } from './auth/revocation-bus';
import type { AppConfig } from './config';
import { ConfigurationRepository } from './configurations/configuration.repository';
import { ConfigurationService } from './configurations/configuration.service';
import type { Dialect } from './db/data-source';
import { IdentifierLock } from './db/identifier-lock';
import type { PagingCursors } from './db/keyset';
import type { Logger } from './logger';
import type { ConversationService } from './conversations';
import type { McpService } from './mcp';
import { ModelService } from './providers/model.service';
import type { PromptEventBus } from './prompt-history/prompt-event-bus';
import { PromptHistoryService } from './prompt-history/prompt-history.service';
import { PromptLibraryCache } from './prompt-history/prompt-library';
import { VersionPins } from './prompt-history/version-pins';
import { ProviderTester } from './providers/provider-tester';
import { ProviderService } from './providers/provider.service';
import { ReleaseService } from './releases/release.service';
import type { RunFeedBus, RunReader, RunService } from './runs';
import type { SecretBox } from './shared/secret-box';
import { SkillService } from './skills/skill.service';
import { SnippetRepository } from './snippets/snippet.repository';
import { SnippetService } from './snippets/snippet.service';
import type { TaskService } from './tasks';
import type { UsageService } from './usage';
import { createWebhookFeature, type WebhookDispatcher, type WebhookOutbox, type WebhookService } from './webhooks';

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
  releases: ReleaseService;
  /** The database lock every identifier write (and the change detector) takes per table. */
  identifiers: IdentifierLock;
  webhooks: WebhookService;
  /** Writers put webhook deliveries here inside their transactions. */
  webhookOutbox: WebhookOutbox;
  /** Sends the outbox (started and stopped by the server). */
  webhookDispatcher: WebhookDispatcher;
  /** Drives runs: starts, approvals, cancels, takeover. */
  runs: RunService;
  /** Reads runs and serves their traces and deltas. */
  runReader: RunReader;
  /** Which runs changed, on every instance (runUpdated). */
  runFeed: RunFeedBus;
  mcp: McpService;
  /** nr_llm's one-shot prompt tasks: CRUD, render, run. */
  tasks: TaskService;
  /** Budgets and the usage ledger's sums. */
  usage: UsageService;
  /** Multi-turn conversations; every turn a run. */
  conversations: ConversationService;
}

export type CoreServices = Omit<Services, 'runs' | 'runReader' | 'runFeed' | 'mcp' | 'tasks' | 'usage' | 'conversations'>;

export function createCoreServices(
  dataSource: DataSource,
  dialect: Dialect,
  config: AppConfig,
  secrets: SecretBox,
  logger: Logger,
  promptEvents: PromptEventBus,
  revocations: RevocationBus,
  cursors: PagingCursors,
): CoreServices {
  const identifiers = new IdentifierLock(dataSource, dialect);
  const webhooks = createWebhookFeature(dataSource, config, secrets, logger);
  const history = new PromptHistoryService(dataSource, promptEvents, webhooks.outbox);
  const providers = new ProviderService(dataSource, identifiers, secrets, config);
  const models = new ModelService(dataSource, identifiers);
  const snippets = new SnippetService(dataSource, identifiers, history, new SnippetRepository(dataSource, dialect), cursors);
  const configurations = new ConfigurationService(dataSource, identifiers, history, new ConfigurationRepository(dataSource, dialect), cursors);
  return {
    dataSource,
    dialect,
    snippets,
    providers,
    models,
    configurations,
    skills: new SkillService(dataSource, identifiers, history),
    tokens: new ApiTokenService(dataSource, logger, revocations),
    providerTester: new ProviderTester(providers, models, logger),
    history,
    library: new PromptLibraryCache(dataSource, history),
    releases: new ReleaseService(dataSource, identifiers, configurations, models, snippets, history, new VersionPins(dataSource, history, identifiers)),
    identifiers,
    webhooks: webhooks.service,
    webhookOutbox: webhooks.outbox,
    webhookDispatcher: webhooks.dispatcher,
  };
}
