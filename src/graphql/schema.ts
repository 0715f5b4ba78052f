import type { GraphQLSchema } from 'graphql';
import { createPubSub } from '@graphql-yoga/subscription';
import { buildSchema } from 'type-graphql';
import { ApiTokenResolver } from '../auth/api-token.resolver';
import { ConfigurationResolver } from '../configurations/configuration.resolver';
import { McpServerResolver } from '../mcp/mcp.resolver';
import { PromptHistoryResolver } from '../prompt-history/prompt-history.resolver';
import { ModelResolver, ProviderResolver } from '../providers/provider.resolver';
import { ConfigurationReleaseResolver } from '../releases/release.resolver';
import { RunResolver, RunStepResolver } from '../runs/run.resolver';
import { SkillResolver } from '../skills/skill.resolver';
import { SnippetResolver } from '../snippets/snippet.resolver';
import { WebhookResolver } from '../webhooks/webhook.resolver';
import { authChecker } from './auth-checker';

export const resolvers = [SnippetResolver, ProviderResolver, ModelResolver, ConfigurationResolver, SkillResolver, ApiTokenResolver, RunResolver, RunStepResolver, PromptHistoryResolver, McpServerResolver, WebhookResolver, ConfigurationReleaseResolver] as const;

/**
 * The schema is built from the resolver classes; `schema.graphql` is its committed print.
 * Object types use `simpleResolvers`: their plain fields carry no middleware or
 * field-level auth, so graphql-js reads the property directly instead of going
 * through type-graphql's per-field wrapper (1,000+ fields on a list response).
 */
export async function buildAppSchema(): Promise<GraphQLSchema> {
  return buildSchema({
    resolvers: [...resolvers],
    authChecker,
    // Run subscriptions bring their own sources (replay, then the trace bus); type-graphql still insists on a pub/sub.
    pubSub: createPubSub(),
    validate: { forbidUnknownValues: false },
  });
}
