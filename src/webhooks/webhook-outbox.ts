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

  /**
   * Answers how many deliveries were written. `data` may be a loader: it is
   * called only when some webhook listens for the event (a run's END need not
   * read its row back when nobody asked to hear of it).
   */
  async enqueue(manager: EntityManager, event: WebhookEvent, data: unknown | LazyPayload, occurredAt = Date.now()): Promise<number> {
    const webhooks = (await this.repository.list(manager)).filter((webhook) => parseEvents(webhook.events).includes(event));
    if (webhooks.length === 0) return 0;
    if (data instanceof LazyPayload) data = await data.load();
    if (data === null) return 0;
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

/** An event's payload read only when a webhook will carry it; null: nothing to report after all. */
export class LazyPayload {
  constructor(readonly load: () => Promise<unknown>) {}
}
