/**
 * The SQL of the webhook feature: `promptwire_webhook` and its outbox
 * `promptwire_webhook_delivery`. Claims and settlements are compare-and-set
 * updates, so any number of instances may share the outbox.
 */
import type { DataSource, EntityManager } from 'typeorm';
import { WebhookDeliveryEntity, WebhookEntity } from './webhook.entity';

export interface NewDelivery {
  id: string;
  webhookId: string;
  event: string;
  payload: string;
  createdAt: number;
}

export class WebhookRepository {
  constructor(private readonly dataSource: DataSource) {}

  async list(manager: EntityManager = this.dataSource.manager): Promise<WebhookEntity[]> {
    return manager.getRepository(WebhookEntity).find({ order: { createdAt: 'ASC', id: 'ASC' } });
  }

  async count(): Promise<number> {
    return this.dataSource.getRepository(WebhookEntity).count();
  }

  async find(id: string): Promise<WebhookEntity | null> {
    return this.dataSource.getRepository(WebhookEntity).findOne({ where: { id } });
  }

  async insert(row: WebhookEntity): Promise<void> {
    await this.dataSource.getRepository(WebhookEntity).insert(row);
  }

  /** Removes the webhook with its deliveries, delivered or not; false when there was none. */
  async delete(id: string): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      const result = await manager.delete(WebhookEntity, { id });
      await manager.delete(WebhookDeliveryEntity, { webhookId: id });
      return (result.affected ?? 0) > 0;
    });
  }

  /** Writes outbox rows inside the caller's transaction. */
  async insertDeliveries(manager: EntityManager, deliveries: readonly NewDelivery[]): Promise<void> {
    if (deliveries.length === 0) return;
    await manager
      .createQueryBuilder()
      .insert()
      .into(WebhookDeliveryEntity)
      .values(deliveries.map((delivery) => ({ ...delivery, status: 'pending', attempts: 0, nextAttemptAt: delivery.createdAt, leaseOwner: null, leaseUntil: 0, lastError: null, responseStatus: null, deliveredAt: 0 })))
      .updateEntity(false)
      .execute();
  }

  /** Newest first. */
  async deliveriesOf(webhookIds: readonly string[], limit: number): Promise<Map<string, WebhookDeliveryEntity[]>> {
    const result = new Map<string, WebhookDeliveryEntity[]>(webhookIds.map((id) => [id, []]));
    for (const webhookId of webhookIds) {
      const rows = await this.dataSource.getRepository(WebhookDeliveryEntity).find({ where: { webhookId }, order: { createdAt: 'DESC', id: 'DESC' }, take: limit });
      result.set(webhookId, rows);
    }
    return result;
  }

  /** Pending deliveries whose time has come and which nobody holds (or whose holder's lease ran out), oldest first. */
  async due(now: number, limit: number): Promise<WebhookDeliveryEntity[]> {
    return this.dataSource
      .getRepository(WebhookDeliveryEntity)
      .createQueryBuilder('d')
      .where('d.status = :status AND d.next_attempt_at <= :now AND d.lease_until < :now', { status: 'pending', now })
      .orderBy('d.next_attempt_at', 'ASC')
      .limit(limit)
      .getMany();
  }

  /**
   * Takes a delivery for one attempt: succeeds for exactly one caller while
   * the row is due and unheld, counting the attempt at once (an attempt
   * whose sender died counts too: the receiver may have seen it).
   */
  async claim(id: string, owner: string, now: number, leaseUntil: number): Promise<boolean> {
    const result = await this.dataSource
      .createQueryBuilder()
      .update(WebhookDeliveryEntity)
      .set({ leaseOwner: owner, leaseUntil, attempts: () => 'attempts + 1' })
      .where('id = :id AND status = :status AND next_attempt_at <= :now AND lease_until < :now', { id, status: 'pending', now })
      .execute();
    return (result.affected ?? 0) === 1;
  }

  /** Records an attempt's outcome, if `owner` still holds the delivery. */
  async settle(
    id: string,
    owner: string,
    outcome: { status: 'pending' | 'delivered' | 'failed'; nextAttemptAt: number; lastError: string | null; responseStatus: number | null; deliveredAt: number },
  ): Promise<boolean> {
    const result = await this.dataSource
      .createQueryBuilder()
      .update(WebhookDeliveryEntity)
      .set({ ...outcome, leaseOwner: null, leaseUntil: 0 })
      .where('id = :id AND lease_owner = :owner', { id, owner })
      .execute();
    return (result.affected ?? 0) === 1;
  }

  async findDelivery(id: string): Promise<WebhookDeliveryEntity | null> {
    return this.dataSource.getRepository(WebhookDeliveryEntity).findOne({ where: { id } });
  }
}
