/**
 * Puts events into the outbox inside the transaction of the change they
 * report, one row per webhook listening for the event. A change that rolls
 * back leaves no delivery; one that commits always has its deliveries.
 */
import crypto from 'node:crypto';
import type { EntityManager } from 'typeorm';
import type { WebhookRepository } from './webhook.repository';
import { deliveryBody, parseEvents, type WebhookEvent } from './webhook-rules';

export class WebhookOutbox {
  private readonly listeners = new Set<() => void>();

  constructor(private readonly repository: WebhookRepository) {}

  /** Answers how many deliveries were written. */
  async enqueue(manager: EntityManager, event: WebhookEvent, data: unknown, occurredAt = Date.now()): Promise<number> {
    const webhooks = (await this.repository.list(manager)).filter((webhook) => parseEvents(webhook.events).includes(event));
    if (webhooks.length === 0) return 0;
    const deliveries = webhooks.map((webhook) => {
      const id = crypto.randomUUID();
      return { id, webhookId: webhook.id, event, payload: deliveryBody({ id, event, occurredAt, data }), createdAt: occurredAt };
    });
    await this.repository.insertDeliveries(manager, deliveries);
    for (const listener of this.listeners) listener();
    return deliveries.length;
  }

  /** Told when deliveries were written (not yet committed): the dispatcher looks again shortly. */
  onEnqueued(listener: () => void): () => void {
    this.listeners.add(listener);
    return () => void this.listeners.delete(listener);
  }
}
