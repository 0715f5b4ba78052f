import type { FieldNode, GraphQLResolveInfo } from 'graphql';
import { Arg, Authorized, Ctx, Extensions, FieldResolver, Info, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import { DEFAULT_VERSION_PAGE, VERSIONS_DESCRIPTION, versionPage } from '../prompt-history/prompt-history.service';
import { Role, roleAtLeast } from '../auth/roles';
import { type ConnectionView, toConnection } from '../graphql/connection';
import type { GraphQLContext } from '../graphql/context';
import { CATALOGUE_ROWS, COMPOSED_PROMPT_COST, listRows } from '../graphql/query-limits';
import { phpObjectJson, type RawJson } from '../graphql/raw-json';
import { JSONScalar } from '../graphql/scalars';
import { LlmModel, toLlmModel } from '../providers/provider.types';
import { Composition, ConfigurationVersion, toConfigurationVersion, toVersionDiff, VersionDiffView } from '../prompt-history/prompt-history.types';
import { BadUserInputError } from '../shared/errors';
import { Skill, toSkill } from '../skills/skill.types';
import { PromptSnippet } from '../snippets/snippet.types';
import { NotFoundError } from '../shared/errors';
import { type ConfigurationWriter } from './configuration.service';
import { callOptionsOf, effectiveSystemPromptOf, selectedSnippetsOf } from '../prompt/configuration-prompt';
import { ConfigurationFilter, CreateConfigurationInput, LlmConfiguration, LlmConfigurationConnection, toLlmConfiguration, UpdateConfigurationInput } from './configuration.types';

const SNIPPET_FIELDS = new Set(['selectedSnippets', 'effectiveSystemPrompt', 'callOptions']);

/** Whether the query selects one of `names` on this field's objects (fragments count as "maybe": true). */
function selectsAny(info: GraphQLResolveInfo, names: ReadonlySet<string>): boolean {
  return selectionsSelectAny(info.fieldNodes, names);
}

function selectionsSelectAny(nodes: readonly FieldNode[], names: ReadonlySet<string>): boolean {
  return nodes.some((node) => (node.selectionSet?.selections ?? []).some((selection) => selection.kind !== 'Field' || names.has(selection.name.value)));
}

/** `selectsAny` for the nodes of a connection: under `nodes` and `edges { node }` (fragments count as "maybe"). */
function connectionSelectsAny(info: GraphQLResolveInfo, names: ReadonlySet<string>): boolean {
  const rows: FieldNode[] = [];
  for (const node of info.fieldNodes) {
    for (const selection of node.selectionSet?.selections ?? []) {
      if (selection.kind !== 'Field') return true;
      if (selection.name.value === 'nodes') rows.push(selection);
      if (selection.name.value === 'edges') {
        for (const edge of selection.selectionSet?.selections ?? []) {
          if (edge.kind !== 'Field') return true;
          if (edge.name.value === 'node') rows.push(edge);
        }
      }
    }
  }
  return selectionsSelectAny(rows, names);
}

@Resolver(() => LlmConfiguration)
export class ConfigurationResolver {
  @Authorized(Role.VIEWER)
  @Query(() => LlmConfiguration, { nullable: true })
  async configuration(
    @Ctx() { services }: GraphQLContext,
    @Arg('uid', () => Int, { nullable: true }) uid?: number,
    @Arg('identifier', () => String, { nullable: true }) identifier?: string,
  ): Promise<LlmConfiguration | null> {
    if (uid == null && identifier == null) throw new BadUserInputError('Pass uid or identifier', 'uid');
    const row = uid != null ? await services.configurations.findByUid(uid) : await services.configurations.findByIdentifier(identifier ?? '');
    return row ? toLlmConfiguration(row) : null;
  }

  @Authorized(Role.VIEWER)
  @Query(() => [LlmConfiguration], { description: 'Every configuration, by sorting then name.' })
  async configurations(
    @Ctx() { services, loaders }: GraphQLContext,
    @Arg('limit', () => Int, { nullable: true, defaultValue: 50 }) limit: number | null = 50,
    @Arg('offset', () => Int, { nullable: true, defaultValue: 0 }) offset: number | null = 0,
    @Info() info: GraphQLResolveInfo,
  ): Promise<LlmConfiguration[]> {
    // Fields that read the active snippets: load them alongside the list instead of after it.
    if (selectsAny(info, SNIPPET_FIELDS)) void loaders.activeSnippets().catch(() => undefined);
    const rows = await services.configurations.listWithModels({ limit: limit ?? 50, offset: offset ?? 0 });
    for (const { model, provider } of rows) {
      if (model) loaders.modelByUid.prime(model.uid, model);
      if (provider) loaders.providerByUid.prime(provider.uid, provider);
    }
    return rows.map(({ configuration }) => toLlmConfiguration(configuration));
  }

  @Authorized(Role.VIEWER)
  @Query(() => LlmConfigurationConnection, {
    description:
      'Every configuration that passes `filter`, in the order of `configurations`, a page of `first` (at most 500) after the cursor `after`. Rows added or deleted between pages neither repeat nor skip the others.',
  })
  async configurationsConnection(
    @Ctx() { services, loaders }: GraphQLContext,
    @Info() info: GraphQLResolveInfo,
    @Arg('first', () => Int, { nullable: true, defaultValue: 50 }) first: number | null = 50,
    @Arg('after', () => String, { nullable: true }) after: string | null = null,
    @Arg('filter', () => ConfigurationFilter, { nullable: true }) filter: ConfigurationFilter | null = null,
  ): Promise<ConnectionView<LlmConfiguration>> {
    if (connectionSelectsAny(info, SNIPPET_FIELDS)) void loaders.activeSnippets().catch(() => undefined);
    const page = await services.configurations.page({ first: first ?? 50, after, ...filter });
    for (const { row } of page.rows) {
      if (row.model) loaders.modelByUid.prime(row.model.uid, row.model);
      if (row.provider) loaders.providerByUid.prime(row.provider.uid, row.provider);
    }
    return toConnection(page, (row) => toLlmConfiguration(row.configuration));
  }

  @FieldResolver(() => LlmModel, { nullable: true })
  async model(@Root() configuration: LlmConfiguration, @Ctx() { loaders }: GraphQLContext): Promise<LlmModel | null> {
    const uid = configuration.entity.modelUid;
    const row = uid ? await loaders.modelByUid.load(uid) : null;
    return row ? toLlmModel(row) : null;
  }

  @FieldResolver(() => [PromptSnippet], { description: 'What the tags select now: tag order, then sorting and name; hidden and duplicate snippets dropped.' })
  @Extensions(listRows(CATALOGUE_ROWS))
  async selectedSnippets(@Root() configuration: LlmConfiguration, @Ctx() { loaders }: GraphQLContext): Promise<PromptSnippet[]> {
    return loaders.snippetViews(selectedSnippetsOf(configuration.entity, await loaders.activeSnippets()));
  }

  @FieldResolver(() => String, { description: 'The system prompt with the snippet block appended, byte for byte as TYPO3 composes it.', complexity: COMPOSED_PROMPT_COST })
  async effectiveSystemPrompt(@Root() configuration: LlmConfiguration, @Ctx() { loaders }: GraphQLContext): Promise<string> {
    return effectiveSystemPromptOf(configuration.entity, await loaders.activeSnippets());
  }

  @FieldResolver(() => JSONScalar, {
    nullable: true,
    complexity: COMPOSED_PROMPT_COST,
    description:
      'The call options a model call with this configuration sends, as nr_llm builds them: typed parameters, the options JSON merged over them, the effective system prompt, and the max_tokens fallback. A configuration without a model has none: null, with the error `Configuration "…" has no model assigned` (NOT_FOUND).',
  })
  async callOptions(@Root() configuration: LlmConfiguration, @Ctx() { loaders }: GraphQLContext): Promise<RawJson> {
    const entity = configuration.entity;
    const [model, activeSnippets] = await Promise.all([entity.modelUid ? loaders.modelByUid.load(entity.modelUid) : null, loaders.activeSnippets()]);
    // nr_llm plans a call only with a model (ConfigurationCallPlanner::resolveModel).
    if (!model) throw new NotFoundError(`Configuration "${entity.identifier}" has no model assigned`, 'model');
    return phpObjectJson(callOptionsOf(entity, model, activeSnippets));
  }

  @FieldResolver(() => [Skill], { description: 'Attached skills in injection order.' })
  @Extensions(listRows(CATALOGUE_ROWS))
  async skills(@Root() configuration: LlmConfiguration, @Ctx() { loaders }: GraphQLContext): Promise<Skill[]> {
    return (await loaders.skillsByConfigurationUid.load(configuration.uid)).map(toSkill);
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => LlmConfiguration)
  async createConfiguration(@Ctx() { services, caller }: GraphQLContext, @Arg('input', () => CreateConfigurationInput) input: CreateConfigurationInput): Promise<LlmConfiguration> {
    return toLlmConfiguration(await services.configurations.create(input, caller?.name ?? null, writerOf(caller)));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => LlmConfiguration)
  async updateConfiguration(
    @Ctx() { services, caller }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('input', () => UpdateConfigurationInput) input: UpdateConfigurationInput,
  ): Promise<LlmConfiguration> {
    return toLlmConfiguration(await services.configurations.update(uid, input, caller?.name ?? null, writerOf(caller)));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Boolean)
  async deleteConfiguration(@Ctx() { services, caller }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.configurations.delete(uid, caller?.name ?? null);
  }

  @FieldResolver(() => Composition, { description: 'The parts of the effective prompt with the tags that selected them and their exact text, and the matched snippets that were dropped, with why.' })
  async composition(@Root() configuration: LlmConfiguration, @Ctx() { loaders }: GraphQLContext): Promise<Composition> {
    const library = await loaders.library();
    const { parts, dropped } = library.composition(configuration.entity);
    return {
      parts: parts.map((part) => ({ snippet: loaders.snippetView(part.snippet), matchedTags: part.matchedTags, text: part.text })),
      dropped: dropped.map((drop) => ({ snippet: loaders.snippetView(drop.snippet), matchedTags: drop.matchedTags, reason: drop.reason })),
    };
  }

  @FieldResolver(() => [ConfigurationVersion], { description: VERSIONS_DESCRIPTION })
  async versions(
    @Root() configuration: LlmConfiguration,
    @Ctx() { loaders }: GraphQLContext,
    @Info() info: GraphQLResolveInfo,
    @Arg('limit', () => Int, { nullable: true, defaultValue: DEFAULT_VERSION_PAGE }) limit: number | null = DEFAULT_VERSION_PAGE,
    @Arg('before', () => Int, { nullable: true, description: 'Only versions older than this one: the last version of the page before.' }) before: number | null = null,
  ): Promise<ConfigurationVersion[]> {
    return loaders.viewsOf(await loaders.versionsFor(info.operation.operation).configuration.load({ uid: configuration.uid, page: versionPage(limit, before) }), toConfigurationVersion);
  }

  @Authorized(Role.VIEWER)
  @Query(() => VersionDiffView, { description: 'Field-level and text diff (of the system prompt) between two versions of a configuration.' })
  async configurationVersionDiff(
    @Ctx() { services }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('from', () => Int) from: number,
    @Arg('to', () => Int) to: number,
  ): Promise<VersionDiffView> {
    return toVersionDiff(await services.history.diff('configuration', uid, from, to));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => LlmConfiguration, { description: 'Writes the content of a stored version back (the identifier stays); stored as a new version.' })
  async restoreConfiguration(
    @Ctx() { services, caller }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('version', () => Int) version: number,
  ): Promise<LlmConfiguration> {
    return toLlmConfiguration(await services.configurations.restore(uid, version, caller?.name ?? null));
  }
}

/** Only an ADMIN sets the `options` keys outside the EDITOR's list (editor-options). */
function writerOf(caller: GraphQLContext['caller']): ConfigurationWriter {
  return { mayChangeAdminOptions: caller !== null && roleAtLeast(caller.role, Role.ADMIN) };
}
