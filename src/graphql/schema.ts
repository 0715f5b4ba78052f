import { getNamedType, isLeafType, type GraphQLFieldResolver, type GraphQLSchema } from 'graphql';
import { createPubSub } from '@graphql-yoga/subscription';
import { buildSchema } from 'type-graphql';
import { ApiTokenResolver } from '../auth/api-token.resolver';
import { ConfigurationResolver } from '../configurations/configuration.resolver';
import { ConversationResolver } from '../conversations/conversation.resolver';
import { McpServerResolver } from '../mcp/mcp.resolver';
import { PromptHistoryResolver } from '../prompt-history/prompt-history.resolver';
import { ModelResolver, ProviderResolver } from '../providers/provider.resolver';
import { ConfigurationReleaseResolver } from '../releases/release.resolver';
import { RunResolver, RunStepResolver, runDeltasEvent, runTraceEvent } from '../runs/run.resolver';
import { SkillResolver } from '../skills/skill.resolver';
import { SnippetResolver } from '../snippets/snippet.resolver';
import { TaskResolver } from '../tasks/task.resolver';
import { UsageResolver } from '../usage/usage.resolver';
import { WebhookResolver } from '../webhooks/webhook.resolver';
import { authChecker } from './auth-checker';

export const resolvers = [SnippetResolver, ProviderResolver, ModelResolver, ConfigurationResolver, SkillResolver, ApiTokenResolver, RunResolver, RunStepResolver, PromptHistoryResolver, McpServerResolver, WebhookResolver, ConfigurationReleaseResolver, TaskResolver, UsageResolver, ConversationResolver] as const;

/**
 * The schema is built from the resolver classes; `schema.graphql` is its committed print.
 * Object types use `simpleResolvers`: their plain fields carry no middleware or
 * field-level auth, so graphql-js reads the property directly instead of going
 * through type-graphql's per-field wrapper (1,000+ fields on a list response).
 */
export async function buildAppSchema(): Promise<GraphQLSchema> {
  const schema = await buildSchema({
    resolvers: [...resolvers],
    authChecker,
    // Run subscriptions bring their own sources (replay, then the trace bus); type-graphql still insists on a pub/sub.
    pubSub: createPubSub(),
    validate: { forbidUnknownValues: false },
  });
  resolveEventsSynchronously(schema);
  return schema;
}

/**
 * Subscription fields whose per-event resolver is the event mapper itself,
 * called synchronously. type-graphql passes a field's arguments through its
 * validation, an `async` function, so a field with arguments resolves through
 * a promise even when every argument is a scalar with nothing to validate; an
 * event's result then takes several microtask turns, for every event to every
 * group of watchers. Synchronous, a live step's result is built inside the
 * bus's publish and written there (see graphql/live), before the run's next
 * work. The resolver methods call the same mappers, so the rule stays in one
 * place. Only fields without @Authorized or middleware (they would run per
 * event; this list must name no such field) and whose arguments are scalars
 * (checked when subscribing, not per event) qualify; startup fails if one of
 * them gains an input-object argument.
 */
const SYNCHRONOUS_EVENT_RESOLVERS: Record<string, GraphQLFieldResolver<never, unknown>> = {
  runTrace: runTraceEvent,
  runDeltas: runDeltasEvent,
};

function resolveEventsSynchronously(schema: GraphQLSchema): void {
  const fields = schema.getSubscriptionType()?.getFields() ?? {};
  for (const [name, resolve] of Object.entries(SYNCHRONOUS_EVENT_RESOLVERS)) {
    const field = fields[name];
    if (!field) throw new Error(`Subscription.${name} is missing: SYNCHRONOUS_EVENT_RESOLVERS names a field that no resolver declares`);
    const nonScalar = field.args.find((arg) => !isLeafType(getNamedType(arg.type)));
    if (nonScalar) throw new Error(`Subscription.${name}(${nonScalar.name}:) takes an input object, which type-graphql validates per event: it cannot have a synchronous event resolver`);
    field.resolve = resolve as GraphQLFieldResolver<unknown, unknown>;
  }
}
