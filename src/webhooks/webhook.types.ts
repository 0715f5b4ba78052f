import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { Extensions, Field, ID, InputType, Int, ObjectType } from 'type-graphql';
import { DateTimeScalar } from '../graphql/scalars';
import { fromUnix } from '../shared/time';
import type { WebhookDeliveryEntity, WebhookEntity } from './webhook.entity';
import { parseEvents } from './webhook-rules';

@ObjectType({ simpleResolvers: true, description: 'One event sent (or being sent) to a webhook; its id is the X-Promptwire-Delivery header of every attempt.' })
export class WebhookDelivery {
  @Field(() => ID) id!: string;
  @Field() event!: string;
  @Field({ description: 'pending (waiting for its next attempt), delivering (an attempt is in flight), delivered (a 2xx answer), failed (every attempt used).' }) status!: string;
  @Field(() => Int) attempts!: number;
  @Field(() => String, { nullable: true, description: 'Why the last attempt failed; null after a success.' }) lastError!: string | null;
  @Field(() => Int, { nullable: true, description: 'The HTTP status of the last answer; null when there was none.' }) responseStatus!: number | null;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => DateTimeScalar, { nullable: true, description: 'When a pending delivery is tried next.' }) nextAttemptAt!: Date | null;
  @Field(() => DateTimeScalar, { nullable: true }) deliveredAt!: Date | null;
}

@ObjectType({ description: 'Where events are posted. The secret is write-only: only hasSecret says whether deliveries are signed.' })
export class Webhook {
  @Field(() => ID) id!: string;
  @Field() url!: string;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String]) events!: string[];
  @Field({ description: 'Deliveries carry X-Promptwire-Signature.' }) hasSecret!: boolean;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => String, { nullable: true, description: 'The token name of the administrator who created it.' }) createdBy!: string | null;
}

@InputType()
export class CreateWebhookInput {
  @Field({ description: 'http or https; loopback, link-local and private addresses only when the host is in WEBHOOK_ALLOWED_HOSTS.' }) url!: string;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String], { description: 'prompt.changed and/or run.finished.' }) events!: string[];
  @Field(() => String, { nullable: true, description: 'Write-only (1 to 256 characters): the key of the HMAC-SHA256 signature in X-Promptwire-Signature.' }) secret?: string | null;
}

export function toWebhook(row: WebhookEntity): Webhook {
  return { id: row.id, url: row.url, events: parseEvents(row.events), hasSecret: row.secret !== null, createdAt: fromUnix(row.createdAt), createdBy: row.createdBy };
}

export function toWebhookDelivery(row: WebhookDeliveryEntity, now = Date.now()): WebhookDelivery {
  const delivering = row.status === 'pending' && row.leaseOwner !== null && row.leaseUntil >= now;
  return {
    id: row.id,
    event: row.event,
    status: delivering ? 'delivering' : row.status,
    attempts: row.attempts,
    lastError: row.lastError,
    responseStatus: row.responseStatus,
    createdAt: new Date(row.createdAt),
    nextAttemptAt: row.status === 'pending' ? new Date(row.nextAttemptAt) : null,
    deliveredAt: row.deliveredAt > 0 ? new Date(row.deliveredAt) : null,
  };
}
