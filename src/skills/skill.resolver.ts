import { Arg, Authorized, Ctx, Int, Mutation, Query, Resolver } from 'type-graphql';
import { Role } from '../auth/roles';
import type { GraphQLContext } from '../graphql/context';
import { CreateSkillInput, Skill, toSkill, UpdateSkillInput } from './skill.types';

@Resolver(() => Skill)
export class SkillResolver {
  @Authorized(Role.VIEWER)
  @Query(() => [Skill])
  async skills(@Ctx() { services }: GraphQLContext): Promise<Skill[]> {
    return (await services.skills.list()).map(toSkill);
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Skill, { description: 'The body written here is the reviewed one: its checksum is recorded.' })
  async createSkill(@Ctx() { services }: GraphQLContext, @Arg('input', () => CreateSkillInput) input: CreateSkillInput): Promise<Skill> {
    return toSkill(await services.skills.create(input));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Skill)
  async updateSkill(@Ctx() { services }: GraphQLContext, @Arg('uid', () => Int) uid: number, @Arg('input', () => UpdateSkillInput) input: UpdateSkillInput): Promise<Skill> {
    return toSkill(await services.skills.update(uid, input));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Boolean)
  async deleteSkill(@Ctx() { services }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.skills.delete(uid);
  }
}
