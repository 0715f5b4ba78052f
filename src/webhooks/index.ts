/**
 * The webhook feature, built by the composition root: the service behind the
 * GraphQL surface, the outbox writers call inside their transactions, and the
 * dispatcher that sends it.
 */
import type { DataSource } from 'typeorm';
import type { AppConfig } from '../config';
import type { Logger } from '../logger';
import { createOutboundFetch } from '../shared/outbound-address';
import type { SecretBox } from '../shared/secret-box';
import { WebhookDispatcher } from './webhook-dispatcher';
import { WebhookOutbox } from './webhook-outbox';
import { WebhookRepository } from './webhook.repository';
import { WebhookService } from './webhook.service';

export { LazyPayload, type WebhookOutbox } from './webhook-outbox';
export type { WebhookDispatcher } from './webhook-dispatcher';
export type { WebhookService } from './webhook.service';

export interface WebhookFeature {
  service: WebhookService;
  outbox: WebhookOutbox;
  dispatcher: WebhookDispatcher;
}

export function createWebhookFeature(dataSource: DataSource, config: AppConfig, secrets: SecretBox, logger: Logger): WebhookFeature {
  const repository = new WebhookRepository(dataSource);
  const outbox = new WebhookOutbox(repository);
  const dispatcher = new WebhookDispatcher(repository, secrets, createOutboundFetch({ allowedHosts: config.webhookAllowedHosts }), logger, {
    timeoutMs: config.webhookTimeoutMs,
    baseDelayMs: config.webhookRetryBaseMs,
    maxAttempts: config.webhookMaxAttempts,
    pollMs: 1000,
    concurrency: 8,
  });
  outbox.onEnqueued(() => dispatcher.nudge());
  return { service: new WebhookService(repository, secrets, { allowedHosts: config.webhookAllowedHosts }), outbox, dispatcher };
}
