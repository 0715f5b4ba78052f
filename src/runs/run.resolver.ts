import { MAX_PAGE_SIZE } from '../db/record-rules';
import type { GraphQLResolveInfo } from 'graphql';
import { Arg, Authorized, Ctx, Extensions, FieldResolver, ID, Info, Int, Mutation, Query, Resolver, Root, Subscription, type SubscribeResolverData } from 'type-graphql';
import { selectedFieldNames } from '../graphql/selection';
import { selectedSize } from '../shared/answer-budget';
import { Role, roleAtLeast } from '../auth/roles';
import { LlmConfiguration, toLlmConfiguration } from '../configurations/configuration.types';
import { type ConnectionView, toConnection } from '../graphql/connection';
import type { GraphQLContext } from '../graphql/context';
import { CATALOGUE_ROWS, EMBEDDED_LIST, listRows, UNPAGED_STEPS_ROWS } from '../graphql/query-limits';
import { JSONScalar } from '../graphql/scalars';
import { ConfigurationRelease, ReleasedSnippet, toConfigurationRelease, toReleasedSnippet } from '../releases/release.types';
import { redactSecretsInJson } from '../providers/adapters/errors';
import { eventStream } from '../prompt-history/event-stream';
import { NotFoundError, SubscriberLaggedError, UnauthenticatedError } from '../shared/errors';
import type { RunChanged } from './run-feed';
import type { LoopDelta } from './engine/loop-step';
import { AgentRun, AgentRunConnection, RunDelta, RunFilter, RunStep, StartRunInput, ToolDecisionInput, ToolInfo, toAgentRun, toRunStep } from './run.types';
import type { StoredStep } from './trace-bus';

/** Changes a runUpdated subscriber may have waiting; the oldest are dropped beyond (a list reloads anyway when it falls behind). */
const RUN_FEED_BUFFER = 256;

interface TraceArgs {
  runId: string;
  afterSequence?: number | null;
}

function requireCaller(context: GraphQLContext): void {
  if (!context.caller) throw new UnauthenticatedError('Authentication required');
}

/** Errors travel as values through the source stream and are thrown here, so the client gets them as a GraphQL error. */
function unwrap<T>(payload: T | SubscriberLaggedError): T {
  if (payload instanceof SubscriberLaggedError) throw payload;
  return payload;
}

/** One runTrace event as its subscribers get it (the field's resolver; see SYNCHRONOUS_EVENT_RESOLVERS). */
export function runTraceEvent(payload: StoredStep | SubscriberLaggedError): RunStep {
  return toRunStep(unwrap(payload));
}

/** One runDeltas event as its subscribers get it (the field's resolver; see SYNCHRONOUS_EVENT_RESOLVERS). */
export function runDeltasEvent(payload: LoopDelta | SubscriberLaggedError): RunDelta {
  return unwrap(payload);
}

@Resolver(() => AgentRun)
export class RunResolver {
  @Authorized(Role.VIEWER)
  @Query(() => AgentRun, { nullable: true })
  async run(@Ctx() { services }: GraphQLContext, @Arg('id', () => ID) id: string): Promise<AgentRun | null> {
    const view = await services.runReader.get(id);
    return view ? toAgentRun(view) : null;
  }

  @Authorized(Role.VIEWER)
  @Query(() => [AgentRun], { description: 'Newest first.' })
  async runs(
    @Ctx() { services }: GraphQLContext,
    @Arg('limit', () => Int, { nullable: true, defaultValue: 20 }) limit: number | null = 20,
    @Arg('offset', () => Int, { nullable: true, defaultValue: 0 }) offset: number | null = 0,
  ): Promise<AgentRun[]> {
    return (await services.runReader.list(limit ?? 20, offset ?? 0)).map(toAgentRun);
  }

  @Authorized(Role.VIEWER)
  @Query(() => AgentRunConnection, {
    description:
      'The runs that pass `filter`, newest first as `runs`, a page of `first` (at most 500) after the cursor `after`. Runs started between pages neither repeat nor skip the others.',
  })
  async runsConnection(
    @Ctx() { services }: GraphQLContext,
    @Arg('first', () => Int, { nullable: true, defaultValue: 20 }) first: number | null = 20,
    @Arg('after', () => String, { nullable: true }) after: string | null = null,
    @Arg('filter', () => RunFilter, { nullable: true }) filter: RunFilter | null = null,
  ): Promise<ConnectionView<AgentRun>> {
    return toConnection(await services.runReader.page({ first: first ?? 20, after, ...filter }), toAgentRun);
  }

  @Authorized(Role.VIEWER)
  @Query(() => [ToolInfo], { description: 'Tools a run can offer: name, description, JSON schema, enabled by default.' })
  @Extensions(listRows(CATALOGUE_ROWS))
  async tools(@Ctx() { services }: GraphQLContext): Promise<ToolInfo[]> {
    return services.runs.listTools();
  }

  @Extensions(listRows(UNPAGED_STEPS_ROWS))
  @FieldResolver(() => [RunStep], {
    description: `Stored steps after the given sequence, in order; the last of a finished run is END. With \`limit\` (at most ${MAX_PAGE_SIZE}), one page: ask again after the last sequence until a page is shorter than the limit.`,
  })
  async steps(
    @Root() run: AgentRun,
    @Ctx() { services, answer }: GraphQLContext,
    @Info() info: GraphQLResolveInfo,
    @Arg('afterSequence', () => Int, { nullable: true, defaultValue: 0 }) afterSequence: number | null = 0,
    @Arg('limit', () => Int, { nullable: true }) limit: number | null = null,
  ): Promise<RunStep[]> {
    // A step is charged to the answer for the fields the query selects (a trace without messagesSent is small).
    const selected = selectedFieldNames(info);
    const measure = (step: StoredStep, atMost: number) => selectedSize(step, selected, atMost);
    return (await services.runReader.steps(run.runUid, afterSequence ?? 0, limit, answer, measure)).map(toRunStep);
  }

  @FieldResolver(() => LlmConfiguration, { nullable: true })
  async configuration(@Root() run: AgentRun, @Ctx() { loaders }: GraphQLContext): Promise<LlmConfiguration | null> {
    const row = run.configurationUid ? await loaders.configurationByUid.load(run.configurationUid) : null;
    return row ? toLlmConfiguration(row) : null;
  }

  @FieldResolver(() => ConfigurationRelease, { nullable: true, description: 'The release the run sent (started with a label); null: the configuration as it was at the start.' })
  async release(@Root() run: AgentRun, @Ctx() { loaders }: GraphQLContext): Promise<ConfigurationRelease | null> {
    const provenance = await loaders.runProvenanceByUid.load(run.runUid);
    const release = provenance?.releaseId != null ? await loaders.releaseById.load(provenance.releaseId) : null;
    return release ? toConfigurationRelease(release) : null;
  }

  @FieldResolver(() => String, { nullable: true, description: 'The task a task run ran (runTask), by identifier; null for other runs.' })
  async task(@Root() run: AgentRun, @Ctx() { loaders }: GraphQLContext): Promise<string | null> {
    return (await loaders.runProvenanceByUid.load(run.runUid))?.task?.identifier ?? null;
  }

  @FieldResolver(() => String, { nullable: true, description: 'The label the run was started with; null without one.' })
  async releaseLabel(@Root() run: AgentRun, @Ctx() { loaders }: GraphQLContext): Promise<string | null> {
    return (await loaders.runProvenanceByUid.load(run.runUid))?.label ?? null;
  }

  @Extensions(EMBEDDED_LIST)
  @FieldResolver(() => [ReleasedSnippet], {
    description: 'The snippet versions composed into the run\'s system prompt, in prompt order (for a release, the ones it froze); [] for runs started outside this service.',
  })
  async snippetVersions(@Root() run: AgentRun, @Ctx() { loaders }: GraphQLContext): Promise<ReleasedSnippet[]> {
    return ((await loaders.runProvenanceByUid.load(run.runUid))?.snippets ?? []).map(toReleasedSnippet);
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => AgentRun, { description: 'Starts a run and returns at once (QUEUED); watch it with runTrace.' })
  async startRun(@Ctx() { services, caller, trace }: GraphQLContext, @Arg('input', () => StartRunInput) input: StartRunInput): Promise<AgentRun> {
    if (!caller) throw new UnauthenticatedError('Authentication required');
    return toAgentRun(await services.runs.start(input, caller, { trace }));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => AgentRun, {
    description:
      'Aborts the in-flight call or tool; the run ends CANCELLED with an END step, answered within about 2 s. A run whose instance died is taken over and ended at once. CONFLICT when the instance driving the run was asked to stop it but has not stored the END in time: the run still ends CANCELLED.',
  })
  async cancelRun(@Ctx() { services }: GraphQLContext, @Arg('id', () => ID) id: string): Promise<AgentRun> {
    return toAgentRun(await services.runs.cancel(id));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => AgentRun, {
    description:
      'Decides every pending tool call of a run waiting for approval, at once. Approved calls run; a denied one gets the result `Error: tool "<name>" was denied by the operator.` and the run goes on. A run that is not waiting: CONFLICT.',
  })
  async resolveToolApproval(
    @Ctx() { services, caller }: GraphQLContext,
    @Arg('runId', () => ID) runId: string,
    @Arg('decisions', () => [ToolDecisionInput]) decisions: ToolDecisionInput[],
  ): Promise<AgentRun> {
    if (!caller) throw new UnauthenticatedError('Authentication required');
    return toAgentRun(await services.runs.approvals.resolve(runId, decisions, caller));
  }

  @Subscription(() => RunStep, {
    description:
      'Replays the stored steps with sequence > afterSequence, then streams new ones live, with no gap and no duplicate; ends after the END step. A watcher that falls too far behind gets a SUBSCRIBER_LAGGED error naming the afterSequence to resubscribe with.',
    subscribe: ({ args, context }: SubscribeResolverData<unknown, TraceArgs, GraphQLContext>) => {
      requireCaller(context);
      return context.services.runReader.openTrace(args.runId, args.afterSequence ?? 0);
    },
  })
  runTrace(
    @Root() payload: StoredStep | SubscriberLaggedError,
    @Arg('runId', () => ID) _runId: string,
    @Arg('afterSequence', () => Int, { nullable: true, defaultValue: 0 }) _afterSequence: number | null,
  ): RunStep {
    return runTraceEvent(payload);
  }

  @Authorized(Role.VIEWER)
  @Subscription(() => AgentRun, {
    description:
      'Every run whose row changes from now on, on any instance: started, waiting for approval, going on after a decision, ended (with its final figures). For lists that update live; load the list once, then apply these.',
    subscribe: ({ context }: SubscribeResolverData<unknown, Record<string, never>, GraphQLContext>) => {
      requireCaller(context);
      // The feed's message object is shared by every subscriber of this process, so identical subscriptions load the run once.
      return eventStream<RunChanged>((push) => context.services.runFeed.onRunChanged(push), RUN_FEED_BUFFER);
    },
  })
  async runUpdated(@Root() changed: RunChanged, @Ctx() { services }: GraphQLContext): Promise<AgentRun> {
    const view = await services.runReader.get(changed.runId);
    if (!view) throw new NotFoundError(`Run "${changed.runId}" is gone`, 'runId');
    return toAgentRun(view);
  }

  @Subscription(() => RunDelta, {
    description: 'Live content and thinking deltas while a run\'s model calls stream. Not stored and not replayed; ends with the run.',
    subscribe: ({ args, context }: SubscribeResolverData<unknown, { runId: string }, GraphQLContext>) => {
      requireCaller(context);
      return context.services.runReader.openDeltas(args.runId);
    },
  })
  runDeltas(@Root() payload: LoopDelta | SubscriberLaggedError, @Arg('runId', () => ID) _runId: string): RunDelta {
    return runDeltasEvent(payload);
  }
}

@Resolver(() => RunStep)
export class RunStepResolver {
  /**
   * Raw capture holds what the provider sent verbatim, so only an ADMIN reads
   * it; every other role reads null (not an error: a step list or a live trace
   * asking for `raw` works for every role). Credentials are masked on capture;
   * masking again here covers bodies stored before that rule.
   */
  @FieldResolver(() => JSONScalar, { nullable: true, description: 'LLM steps with raw capture only: the provider\'s decoded body, credentials redacted. ADMIN only; null for other roles.' })
  raw(@Root() step: RunStep, @Ctx() { caller }: GraphQLContext): unknown {
    if (!caller || !roleAtLeast(caller.role, Role.ADMIN) || step.storedRaw === null || step.storedRaw === undefined) return null;
    return redactSecretsInJson(step.storedRaw, null);
  }
}
