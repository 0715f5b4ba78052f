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
  @Field() token!: string;
}

@ObjectType({ simpleResolvers: true, description: 'An active API token, without its secret.' })
export class ApiToken {
  @Field(() => Int) uid!: number;
  @Field() name!: string;
  @Field(() => Role) role!: Role;
  @Field({ description: 'The first characters of the token, to tell tokens apart.' }) prefix!: string;
  @Field(() => DateTimeScalar) createdAt!: Date;
}

@ObjectType({ simpleResolvers: true })
export class Viewer {
  @Field() name!: string;
  @Field(() => Role) role!: Role;
}

@Resolver()
export class ApiTokenResolver {
  @Authorized(Role.VIEWER)
  @Query(() => Viewer, { description: 'Who the current token belongs to.' })
  viewer(@Ctx() { caller }: GraphQLContext): Viewer {
    return { name: caller?.name ?? '', role: caller?.role ?? Role.VIEWER };
  }

  @Authorized(Role.ADMIN)
  @Query(() => [ApiToken])
  @Extensions(listRows(CATALOGUE_ROWS))
  async apiTokens(@Ctx() { services }: GraphQLContext): Promise<ApiToken[]> {
    return (await services.tokens.list()).map((t) => ({ uid: t.uid, name: t.name, role: t.role, prefix: t.prefix, createdAt: fromUnix(t.createdAt) }));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => CreatedApiToken)
  async createApiToken(@Ctx() { services }: GraphQLContext, @Arg('name') name: string, @Arg('role', () => Role) role: Role): Promise<CreatedApiToken> {
    return services.tokens.create(name, role);
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => Boolean)
  async revokeApiToken(@Ctx() { services }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.tokens.revoke(uid);
  }
}
