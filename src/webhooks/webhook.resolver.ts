import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { Arg, Authorized, Ctx, Extensions, FieldResolver, ID, Int, Mutation, Query, Resolver, Root } from 'type-graphql';
import { Role } from '../auth/roles';
import type { GraphQLContext } from '../graphql/context';
import { CreateWebhookInput, toWebhook, toWebhookDelivery, Webhook, WebhookDelivery } from './webhook.types';

@Resolver(() => Webhook)
export class WebhookResolver {
  @Authorized(Role.ADMIN)
  @Query(() => [Webhook], { description: 'Every webhook, oldest first.' })
  @Extensions(listRows(CATALOGUE_ROWS))
  async webhooks(@Ctx() { services }: GraphQLContext): Promise<Webhook[]> {
    return (await services.webhooks.list()).map(toWebhook);
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => Webhook, { description: 'Registers a target for prompt.changed and/or run.finished events.' })
  async createWebhook(@Ctx() { services, caller }: GraphQLContext, @Arg('input', () => CreateWebhookInput) input: CreateWebhookInput): Promise<Webhook> {
    return toWebhook(await services.webhooks.create(input, caller?.name ?? null));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => Boolean, { description: 'Removes the webhook and its deliveries; pending ones are not sent.' })
  async deleteWebhook(@Ctx() { services }: GraphQLContext, @Arg('id', () => ID) id: string): Promise<boolean> {
    return services.webhooks.delete(id);
  }

  @FieldResolver(() => [WebhookDelivery], { description: 'Newest first.' })
  async deliveries(
    @Root() webhook: Webhook,
    @Ctx() { services }: GraphQLContext,
    @Arg('limit', () => Int, { nullable: true, defaultValue: 20 }) limit: number | null = 20,
  ): Promise<WebhookDelivery[]> {
    const rows = (await services.webhooks.deliveriesOf([webhook.id], limit ?? 20)).get(webhook.id) ?? [];
    return rows.map((row) => toWebhookDelivery(row));
  }
}
