import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { Arg, Authorized, Ctx, Extensions, FieldResolver, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import { Role } from '../auth/roles';
import type { GraphQLContext } from '../graphql/context';
import {
  CreateModelInput,
  CreateProviderInput,
  LlmModel,
  LlmProvider,
  ModelExtraPrices,
  ProviderTestResult,
  toLlmModel,
  toLlmProvider,
  UpdateModelInput,
  UpdateProviderInput,
} from './provider.types';

@Resolver(() => LlmProvider)
export class ProviderResolver {
  @Authorized(Role.VIEWER)
  @Query(() => [LlmProvider], { description: 'Every provider, by sorting then name.' })
  @Extensions(listRows(CATALOGUE_ROWS))
  async providers(@Ctx() { services }: GraphQLContext): Promise<LlmProvider[]> {
    return (await services.providers.list()).map(toLlmProvider);
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => LlmProvider)
  async createProvider(@Ctx() { services }: GraphQLContext, @Arg('input', () => CreateProviderInput) input: CreateProviderInput): Promise<LlmProvider> {
    return toLlmProvider(await services.providers.create(input));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => LlmProvider)
  async updateProvider(
    @Ctx() { services }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('input', () => UpdateProviderInput) input: UpdateProviderInput,
  ): Promise<LlmProvider> {
    return toLlmProvider(await services.providers.update(uid, input));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => Boolean)
  async deleteProvider(@Ctx() { services }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.providers.delete(uid);
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => ProviderTestResult, { description: 'A minimal call to the provider: ok, latency, the answer or what went wrong.' })
  async testProvider(
    @Ctx() { services }: GraphQLContext,
    @Arg('identifier') identifier: string,
    @Arg('modelId', () => String, { nullable: true, description: 'Model to ask; defaults to the provider\'s default model.' }) modelId?: string,
  ): Promise<ProviderTestResult> {
    return services.providerTester.test(identifier, modelId);
  }
}

@Resolver(() => LlmModel)
export class ModelResolver {
  @Authorized(Role.VIEWER)
  @Query(() => [LlmModel], { description: 'Every model, by sorting then name.' })
  @Extensions(listRows(CATALOGUE_ROWS))
  async models(@Ctx() { services }: GraphQLContext): Promise<LlmModel[]> {
    return (await services.models.list()).map(toLlmModel);
  }

  @FieldResolver(() => LlmProvider, { nullable: true })
  async provider(@Root() model: LlmModel, @Ctx() { loaders }: GraphQLContext): Promise<LlmProvider | null> {
    const row = model.providerUid ? await loaders.providerByUid.load(model.providerUid) : null;
    return row ? toLlmProvider(row) : null;
  }

  @FieldResolver(() => ModelExtraPrices)
  async extraPrices(@Root() model: LlmModel, @Ctx() { loaders }: GraphQLContext): Promise<ModelExtraPrices> {
    const row = await loaders.priceByModelUid.load(model.uid);
    return { costCacheRead: row?.costCacheRead ?? null, costCacheWrite: row?.costCacheWrite ?? null, costReasoning: row?.costReasoning ?? null };
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => LlmModel)
  async createModel(@Ctx() { services }: GraphQLContext, @Arg('input', () => CreateModelInput) input: CreateModelInput): Promise<LlmModel> {
    return toLlmModel(await services.models.create(input));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => LlmModel)
  async updateModel(@Ctx() { services }: GraphQLContext, @Arg('uid', () => Int) uid: number, @Arg('input', () => UpdateModelInput) input: UpdateModelInput): Promise<LlmModel> {
    return toLlmModel(await services.models.update(uid, input));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => Boolean)
  async deleteModel(@Ctx() { services }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.models.delete(uid);
  }
}
