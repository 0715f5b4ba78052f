import type { GraphQLResolveInfo } from 'graphql';
import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { Arg, Authorized, Ctx, Extensions, FieldResolver, Info, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import { DEFAULT_VERSION_PAGE, VERSIONS_DESCRIPTION, versionPage } from '../prompt-history/prompt-history.service';
import { Role } from '../auth/roles';
import { type ConnectionView, toConnection } from '../graphql/connection';
import type { GraphQLContext } from '../graphql/context';
import { LlmConfiguration, toLlmConfiguration } from '../configurations/configuration.types';
import { previewSnippetImpact } from '../prompt-history/impact-preview';
import { PromptChange, SnippetVersion, toSnippetVersion, toVersionDiff, VersionDiffView } from '../prompt-history/prompt-history.types';
import { BadUserInputError } from '../shared/errors';
import { CreateSnippetInput, PromptSnippet, PromptSnippetConnection, SnippetFilter, toPromptSnippet, UpdateSnippetInput } from './snippet.types';

@Resolver(() => PromptSnippet)
export class SnippetResolver {
  @Authorized(Role.VIEWER)
  @Query(() => PromptSnippet, { nullable: true, description: 'One snippet by uid or identifier.' })
  async snippet(
    @Ctx() { services }: GraphQLContext,
    @Arg('uid', () => Int, { nullable: true }) uid?: number,
    @Arg('identifier', () => String, { nullable: true }) identifier?: string,
  ): Promise<PromptSnippet | null> {
    if (uid == null && identifier == null) throw new BadUserInputError('Pass uid or identifier', 'uid');
    const row = uid != null ? await services.snippets.findByUid(uid) : await services.snippets.findByIdentifier(identifier ?? '');
    return row ? toPromptSnippet(row) : null;
  }

  @Authorized(Role.VIEWER)
  @Query(() => [PromptSnippet], {
    description: 'With `tag`: the active snippets carrying that tag (hidden included), by sorting then name. Without: every snippet. `search` matches identifier, name, description, tags and text.',
  })
  async snippets(
    @Ctx() { services }: GraphQLContext,
    @Arg('tag', () => String, { nullable: true }) tag?: string,
    @Arg('search', () => String, { nullable: true }) search?: string,
    @Arg('limit', () => Int, { nullable: true, defaultValue: 50 }) limit: number | null = 50,
    @Arg('offset', () => Int, { nullable: true, defaultValue: 0 }) offset: number | null = 0,
  ): Promise<PromptSnippet[]> {
    const rows = await services.snippets.list({ tag, search, limit: limit ?? 50, offset: offset ?? 0 });
    return rows.map(toPromptSnippet);
  }

  @Authorized(Role.VIEWER)
  @Query(() => PromptSnippetConnection, {
    description:
      'Every snippet (inactive and hidden included) that passes `filter`, in the order of `snippets`, a page of `first` (at most 500) after the cursor `after`. Rows added or deleted between pages neither repeat nor skip the others.',
  })
  async snippetsConnection(
    @Ctx() { services }: GraphQLContext,
    @Arg('first', () => Int, { nullable: true, defaultValue: 50 }) first: number | null = 50,
    @Arg('after', () => String, { nullable: true }) after: string | null = null,
    @Arg('filter', () => SnippetFilter, { nullable: true }) filter: SnippetFilter | null = null,
  ): Promise<ConnectionView<PromptSnippet>> {
    const page = await services.snippets.page({ first: first ?? 50, after, ...filter });
    return toConnection(page, toPromptSnippet);
  }

  @Authorized(Role.VIEWER)
  @Query(() => [String], { description: 'The tag vocabulary in use: normalised, unique, byte order.' })
  @Extensions(listRows(CATALOGUE_ROWS))
  async snippetTags(@Ctx() { services }: GraphQLContext): Promise<string[]> {
    return services.snippets.vocabulary();
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => PromptSnippet)
  async createSnippet(@Ctx() { services, caller }: GraphQLContext, @Arg('input', () => CreateSnippetInput) input: CreateSnippetInput): Promise<PromptSnippet> {
    return toPromptSnippet(await services.snippets.create(input, caller?.name ?? null));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => PromptSnippet)
  async updateSnippet(
    @Ctx() { services, caller }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('input', () => UpdateSnippetInput) input: UpdateSnippetInput,
  ): Promise<PromptSnippet> {
    return toPromptSnippet(await services.snippets.update(uid, input, caller?.name ?? null));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Boolean, { description: 'Soft delete: the row stays with deleted = 1 and its identifier becomes reusable.' })
  async deleteSnippet(@Ctx() { services, caller }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.snippets.delete(uid, caller?.name ?? null);
  }

  @FieldResolver(() => [SnippetVersion], { description: VERSIONS_DESCRIPTION })
  async versions(
    @Root() snippet: PromptSnippet,
    @Ctx() { loaders }: GraphQLContext,
    @Info() info: GraphQLResolveInfo,
    @Arg('limit', () => Int, { nullable: true, defaultValue: DEFAULT_VERSION_PAGE }) limit: number | null = DEFAULT_VERSION_PAGE,
    @Arg('before', () => Int, { nullable: true, description: 'Only versions older than this one: the last version of the page before.' }) before: number | null = null,
  ): Promise<SnippetVersion[]> {
    return loaders.viewsOf(await loaders.versionsFor(info.operation.operation).snippet.load({ uid: snippet.uid, page: versionPage(limit, before) }), toSnippetVersion);
  }

  @Authorized(Role.VIEWER)
  @Query(() => VersionDiffView, { description: 'Field-level and text diff between two versions of a snippet.' })
  async snippetVersionDiff(
    @Ctx() { services }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('from', () => Int) from: number,
    @Arg('to', () => Int) to: number,
  ): Promise<VersionDiffView> {
    return toVersionDiff(await services.history.diff('snippet', uid, from, to));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => PromptSnippet, { description: 'Writes the content of a stored version back (the identifier stays); stored as a new version.' })
  async restoreSnippet(
    @Ctx() { services, caller }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('version', () => Int) version: number,
  ): Promise<PromptSnippet> {
    return toPromptSnippet(await services.snippets.restore(uid, version, caller?.name ?? null));
  }

  @FieldResolver(() => [LlmConfiguration], { description: 'Configurations whose tags select this snippet now (it is in their effective prompt).' })
  @Extensions(listRows(CATALOGUE_ROWS))
  async usedBy(@Root() snippet: PromptSnippet, @Ctx() { loaders }: GraphQLContext): Promise<LlmConfiguration[]> {
    const library = await loaders.library();
    const row = library.snippet(snippet.uid);
    return row ? library.usedBy(row).map(toLlmConfiguration) : [];
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => [PromptChange], {
    description: 'For every configuration whose effective prompt the edit would alter: the prompt before and after, and a unified diff. Validated like updateSnippet; writes nothing.',
  })
  @Extensions(listRows(CATALOGUE_ROWS))
  async previewSnippetChange(
    @Ctx() { services, loaders }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('input', () => UpdateSnippetInput) input: UpdateSnippetInput,
  ): Promise<PromptChange[]> {
    const [{ before, after }, library] = await Promise.all([services.snippets.previewWrite(uid, input), loaders.library()]);
    return previewSnippetImpact(library, before, after).map((impact) => ({ ...impact, configuration: toLlmConfiguration(impact.configuration) }));
  }
}
