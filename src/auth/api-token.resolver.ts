import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { Arg, Authorized, Ctx, Extensions, Field, Int, Mutation, ObjectType, Query, Resolver } from 'type-graphql';
import type { GraphQLContext } from '../graphql/context';
import { DateTimeScalar } from '../graphql/scalars';
import { fromUnix } from '../shared/time';
import { Role } from './roles';

@ObjectType({ simpleResolvers: true, description: 'A new API token. `token` is shown this once; only its hash is stored.' })
export class CreatedApiToken {
  @Field(() => Int) uid!: number;
  @Field() name!: string;
  @Field(() => Role) role!: Role;
  @Field(() => Int, { description: 'The TYPO3 backend user (be_users.uid) the token acts as; 0 = none.' }) beUser!: number;
  @Field({ description: 'The integration the token belongs to; written to usage as source_extension.' }) source!: string;
  @Field() token!: string;
}

@ObjectType({ simpleResolvers: true, description: 'An active API token, without its secret.' })
export class ApiToken {
  @Field(() => Int) uid!: number;
  @Field() name!: string;
  @Field(() => Role) role!: Role;
  @Field({ description: 'The first characters of the token, to tell tokens apart.' }) prefix!: string;
  @Field(() => Int, { description: 'The TYPO3 backend user (be_users.uid) the token acts as; 0 = none.' }) beUser!: number;
  @Field({ description: 'The integration the token belongs to.' }) source!: string;
  @Field(() => DateTimeScalar) createdAt!: Date;
}

@ObjectType({ simpleResolvers: true })
export class Viewer {
  @Field() name!: string;
  @Field(() => Role) role!: Role;
  @Field(() => Int, { description: 'The TYPO3 backend user the token acts as; 0 = none.' }) beUser!: number;
  @Field({ description: 'The integration the token belongs to.' }) source!: string;
}

@Resolver()
export class ApiTokenResolver {
  @Authorized(Role.VIEWER)
  @Query(() => Viewer, { description: 'Who the current token belongs to.' })
  viewer(@Ctx() { caller }: GraphQLContext): Viewer {
    return { name: caller?.name ?? '', role: caller?.role ?? Role.VIEWER, beUser: caller?.beUser ?? 0, source: caller?.source ?? '' };
  }

  @Authorized(Role.ADMIN)
  @Query(() => [ApiToken])
  @Extensions(listRows(CATALOGUE_ROWS))
  async apiTokens(@Ctx() { services }: GraphQLContext): Promise<ApiToken[]> {
    return (await services.tokens.list()).map((t) => ({ uid: t.uid, name: t.name, role: t.role, prefix: t.prefix, beUser: t.beUser, source: t.source, createdAt: fromUnix(t.createdAt) }));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => CreatedApiToken)
  async createApiToken(
    @Ctx() { services }: GraphQLContext,
    @Arg('name') name: string,
    @Arg('role', () => Role) role: Role,
    @Arg('beUser', () => Int, { defaultValue: 0, description: 'The TYPO3 backend user (be_users.uid) the token acts as: runs, conversations and usage are booked to it, and its budget applies. 0 = none.' }) beUser: number,
    @Arg('source', { defaultValue: '', description: 'The integration the token belongs to (at most 64 characters); usage rows carry it as source_extension.' }) source: string,
  ): Promise<CreatedApiToken> {
    return services.tokens.create(name, role, { beUser, source });
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => Boolean)
  async revokeApiToken(@Ctx() { services }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.tokens.revoke(uid);
  }
}
