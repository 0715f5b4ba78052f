import type { GraphQLResolveInfo } from 'graphql';
import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { Arg, Authorized, Ctx, Extensions, FieldResolver, Info, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import { DEFAULT_VERSION_PAGE, VERSIONS_DESCRIPTION, versionPage } from '../prompt-history/prompt-history.service';
import { Role } from '../auth/roles';
import type { GraphQLContext } from '../graphql/context';
import { SkillVersion, toSkillVersion, toVersionDiff, VersionDiffView } from '../prompt-history/prompt-history.types';
import { CreateSkillInput, Skill, toSkill, UpdateSkillInput } from './skill.types';

@Resolver(() => Skill)
export class SkillResolver {
  @Authorized(Role.VIEWER)
  @Query(() => [Skill])
  @Extensions(listRows(CATALOGUE_ROWS))
  async skills(@Ctx() { services }: GraphQLContext): Promise<Skill[]> {
    return (await services.skills.list()).map(toSkill);
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Skill, { description: 'The body written here is the reviewed one: its checksum is recorded.' })
  async createSkill(@Ctx() { services, caller }: GraphQLContext, @Arg('input', () => CreateSkillInput) input: CreateSkillInput): Promise<Skill> {
    return toSkill(await services.skills.create(input, caller?.name ?? null));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Skill)
  async updateSkill(@Ctx() { services, caller }: GraphQLContext, @Arg('uid', () => Int) uid: number, @Arg('input', () => UpdateSkillInput) input: UpdateSkillInput): Promise<Skill> {
    return toSkill(await services.skills.update(uid, input, caller?.name ?? null));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Boolean)
  async deleteSkill(@Ctx() { services, caller }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.skills.delete(uid, caller?.name ?? null);
  }

  @FieldResolver(() => [SkillVersion], { description: VERSIONS_DESCRIPTION })
  async versions(
    @Root() skill: Skill,
    @Ctx() { loaders }: GraphQLContext,
    @Info() info: GraphQLResolveInfo,
    @Arg('limit', () => Int, { nullable: true, defaultValue: DEFAULT_VERSION_PAGE }) limit: number | null = DEFAULT_VERSION_PAGE,
    @Arg('before', () => Int, { nullable: true, description: 'Only versions older than this one: the last version of the page before.' }) before: number | null = null,
  ): Promise<SkillVersion[]> {
    return loaders.viewsOf(await loaders.versionsFor(info.operation.operation).skill.load({ uid: skill.uid, page: versionPage(limit, before) }), toSkillVersion);
  }

  @Authorized(Role.VIEWER)
  @Query(() => VersionDiffView, { description: 'Field-level and text diff (of the body) between two versions of a skill.' })
  async skillVersionDiff(
    @Ctx() { services }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('from', () => Int) from: number,
    @Arg('to', () => Int) to: number,
  ): Promise<VersionDiffView> {
    return toVersionDiff(await services.history.diff('skill', uid, from, to));
  }
}
