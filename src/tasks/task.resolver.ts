import type { GraphQLResolveInfo } from 'graphql';
import { Arg, Authorized, Ctx, FieldResolver, Info, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import { DEFAULT_VERSION_PAGE, VERSIONS_DESCRIPTION, versionPage } from '../prompt-history/prompt-history.service';
import { TaskVersion, toTaskVersion, toVersionDiff, VersionDiffView } from '../prompt-history/prompt-history.types';
import { Role } from '../auth/roles';
import type { GraphQLContext } from '../graphql/context';
import { COMPOSED_PROMPT_COST } from '../graphql/query-limits';
import { JSONScalar } from '../graphql/scalars';
import { UnauthenticatedError } from '../shared/errors';
import { CreateTaskInput, RunTaskInput, Task, TaskRelease, TaskRender, TaskRun, toTaskReleaseView, toDeclaredVariables, toTask, toTaskRender, toTaskRun, UpdateTaskInput } from './task.types';

@Resolver(() => Task)
export class TaskResolver {
  @Authorized(Role.VIEWER)
  @Query(() => [Task], { description: 'Non-deleted tasks by category, sorting, then name (nr_llm\'s order).' })
  async tasks(
    @Ctx() { services }: GraphQLContext,
    @Arg('category', () => String, { nullable: true }) category?: string | null,
    @Arg('limit', () => Int, { nullable: true, defaultValue: 100 }) limit: number | null = 100,
    @Arg('offset', () => Int, { nullable: true, defaultValue: 0 }) offset: number | null = 0,
  ): Promise<Task[]> {
    return (await services.tasks.list({ category: category ?? null, limit: limit ?? 100, offset: offset ?? 0 })).map(toTask);
  }

  @Authorized(Role.VIEWER)
  @Query(() => Task, { nullable: true })
  async task(@Ctx() { services }: GraphQLContext, @Arg('identifier', () => String) identifier: string): Promise<Task | null> {
    const record = await services.tasks.findByIdentifier(identifier);
    return record ? toTask(record) : null;
  }

  @Authorized(Role.VIEWER)
  @Query(() => TaskRender, {
    complexity: COMPOSED_PROMPT_COST,
    description:
      'What a run of the task sends, byte for byte, without calling a model. Missing, unknown or mistyped variables are BAD_USER_INPUT naming each; an unknown task NOT_FOUND `Task not found`, an inactive one BAD_USER_INPUT `Task is not active`.',
  })
  async renderTask(
    @Ctx() { services, caller }: GraphQLContext,
    @Arg('identifier', () => String) identifier: string,
    @Arg('input', () => String, { nullable: true, description: 'What `{{input}}` becomes.' }) input?: string | null,
    // A JSON value is no input class: class-validator has nothing to check in it (and fails on a literal's prototype-less object).
    @Arg('variables', () => JSONScalar, { nullable: true, validate: false, description: 'Named variables: an object of names and values.' }) variables?: unknown,
    @Arg('label', () => String, { nullable: true, description: 'Render the task\'s release under this label, on the configuration\'s release of the same label.' }) label?: string | null,
  ): Promise<TaskRender> {
    if (!caller) throw new UnauthenticatedError('Authentication required');
    return toTaskRender(await services.tasks.render(identifier, input, variables, caller, label ?? null));
  }

  @FieldResolver(() => [TaskVersion], { description: VERSIONS_DESCRIPTION })
  async versions(
    @Root() task: Task,
    @Ctx() { loaders }: GraphQLContext,
    @Info() info: GraphQLResolveInfo,
    @Arg('limit', () => Int, { nullable: true, defaultValue: DEFAULT_VERSION_PAGE }) limit: number | null = DEFAULT_VERSION_PAGE,
    @Arg('before', () => Int, { nullable: true, description: 'Only versions older than this one: the last version of the page before.' }) before: number | null = null,
  ): Promise<TaskVersion[]> {
    return loaders.viewsOf(await loaders.versionsFor(info.operation.operation).task.load({ uid: task.uid, page: versionPage(limit, before) }), toTaskVersion);
  }

  @Authorized(Role.VIEWER)
  @Query(() => VersionDiffView, { description: 'Field-level and text diff (of the prompt template) between two versions of a task.' })
  async taskVersionDiff(
    @Ctx() { services }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('from', () => Int) from: number,
    @Arg('to', () => Int) to: number,
  ): Promise<VersionDiffView> {
    return toVersionDiff(await services.history.diff('task', uid, from, to));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Task, { description: 'Writes a stored version\'s content back (the identifier stays); the result is a new version.' })
  async restoreTask(@Ctx() { services, caller }: GraphQLContext, @Arg('uid', () => Int) uid: number, @Arg('version', () => Int) version: number): Promise<Task> {
    return toTask(await services.tasks.restore(uid, version, caller?.name ?? null));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => TaskRelease, {
    description: 'Freezes the task (template, variables, schema, skills, configuration) under the label; runTask and renderTask with the label send it, on the configuration\'s release of the same label.',
  })
  async publishTask(@Ctx() { services, caller }: GraphQLContext, @Arg('identifier', () => String) identifier: string, @Arg('label', () => String) label: string): Promise<TaskRelease> {
    return toTaskReleaseView(await services.tasks.publish(identifier, label, caller?.name ?? null));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => TaskRun, {
    description:
      'Runs the task as a run like any other (traced, streamed, `run.finished`). A JSON task with an output schema has its answer validated on the server: one repair call, and the run ends FAILED `invalid_output` if it still fails. Counts against the startRun rate limit.',
  })
  async runTask(@Ctx() { services, caller, trace }: GraphQLContext, @Arg('input', () => RunTaskInput) input: RunTaskInput): Promise<TaskRun> {
    if (!caller) throw new UnauthenticatedError('Authentication required');
    return toTaskRun(await services.tasks.run(input, caller, { trace }));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Task)
  async createTask(@Ctx() { services, caller }: GraphQLContext, @Arg('input', () => CreateTaskInput) input: CreateTaskInput): Promise<Task> {
    return toTask(await services.tasks.create({ ...input, variables: toDeclaredVariables(input.variables) }, caller?.name ?? null));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Task)
  async updateTask(@Ctx() { services, caller }: GraphQLContext, @Arg('uid', () => Int) uid: number, @Arg('input', () => UpdateTaskInput) input: UpdateTaskInput): Promise<Task> {
    return toTask(await services.tasks.update(uid, { ...input, variables: toDeclaredVariables(input.variables) }, caller?.name ?? null));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Boolean)
  async deleteTask(@Ctx() { services, caller }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.tasks.delete(uid, caller?.name ?? null);
  }
}
