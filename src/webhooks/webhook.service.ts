/**
 * Webhooks an administrator registers: validation of the target (the
 * outbound address rule), the event names and the write-only secret.
 */
import crypto from 'node:crypto';
import { checkPage } from '../db/record-rules';
import { BadUserInputError, NotFoundError } from '../shared/errors';
import { checkOutboundHost, checkOutboundUrl, type Resolver } from '../shared/outbound-address';
import type { SecretBox } from '../shared/secret-box';
import { unixNow } from '../shared/time';
import { WebhookEntity, type WebhookDeliveryEntity } from './webhook.entity';
import type { WebhookRepository } from './webhook.repository';
import { isWebhookEvent, WEBHOOK_EVENTS } from './webhook-rules';

export interface WebhookWrite {
  url: string;
  events: readonly string[];
  /** Write-only; null or absent: deliveries are not signed. */
  secret?: string | null;
}

/** More webhooks would make every change write that many outbox rows. */
export const MAX_WEBHOOKS = 100;
const MAX_SECRET_LENGTH = 256;

export class WebhookService {
  constructor(
    private readonly repository: WebhookRepository,
    private readonly secrets: SecretBox,
    private readonly options: { allowedHosts: readonly string[]; resolve?: Resolver },
  ) {}

  async list(): Promise<WebhookEntity[]> {
    return this.repository.list();
  }

  async create(input: WebhookWrite, author: string | null): Promise<WebhookEntity> {
    const url = (input.url ?? '').trim();
    if (url.length > 2048) throw new BadUserInputError('url must be at most 2048 characters', 'url');
    const check = checkOutboundUrl(url, this.options.allowedHosts);
    if (!check.ok) throw new BadUserInputError(`url ${check.reason}`, 'url');
    const resolved = await checkOutboundHost(check.url, this.options.allowedHosts, this.options.resolve);
    if (!resolved.ok) throw new BadUserInputError(`url ${resolved.reason}`, 'url');

    const events = [...new Set(input.events ?? [])];
    if (events.length === 0) throw new BadUserInputError(`events must name at least one of ${WEBHOOK_EVENTS.join(', ')}`, 'events');
    const unknown = events.filter((name) => !isWebhookEvent(name));
    if (unknown.length > 0) throw new BadUserInputError(`Unknown event(s): ${unknown.map((name) => JSON.stringify(name.slice(0, 50))).join(', ')}; known: ${WEBHOOK_EVENTS.join(', ')}`, 'events');

    let secret: string | null = null;
    if (input.secret !== undefined && input.secret !== null) {
      if (input.secret === '') throw new BadUserInputError('secret must not be empty; leave it out for unsigned deliveries', 'secret');
      if (input.secret.length > MAX_SECRET_LENGTH) throw new BadUserInputError(`secret must be at most ${MAX_SECRET_LENGTH} characters`, 'secret');
      secret = this.secrets.encrypt(input.secret);
    }
    if ((await this.repository.count()) >= MAX_WEBHOOKS) throw new BadUserInputError(`There are already ${MAX_WEBHOOKS} webhooks, the most there may be; delete one first`, 'url');

    const row = Object.assign(new WebhookEntity(), { id: crypto.randomUUID(), url, events: events.join(','), secret, createdBy: author, createdAt: unixNow() });
    await this.repository.insert(row);
    return row;
  }

  async delete(id: string): Promise<boolean> {
    if (!(await this.repository.delete(id))) throw new NotFoundError(`No webhook with id "${id.slice(0, 100)}"`, 'id');
    return true;
  }

  /** Newest first, per webhook. */
  async deliveriesOf(webhookIds: readonly string[], limit: number): Promise<Map<string, WebhookDeliveryEntity[]>> {
    checkPage({ limit, offset: 0 });
    return this.repository.deliveriesOf(webhookIds, limit);
  }
}
