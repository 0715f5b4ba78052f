import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { integerTransformer, MediumTextColumn, UnsignedIntColumn, VarcharColumn } from '../db/columns';

/**
 * `promptwire_webhook`: where an administrator wants to hear of events. The
 * secret is stored encrypted (the provider-key scheme) and never read back
 * through the API.
 */
@Entity({ name: 'promptwire_webhook' })
export class WebhookEntity {
  /** A uuid. */
  @PrimaryColumn({ name: 'id', type: 'varchar', length: 36 })
  id!: string;

  @VarcharColumn('url', 2048)
  url!: string;

  /** Event names, comma-separated (`prompt.changed,run.finished`). */
  @VarcharColumn('events', 255)
  events!: string;

  /** The signing secret, encrypted; null: deliveries are not signed. */
  @Column({ name: 'secret', type: 'text', nullable: true })
  secret!: string | null;

  /** The token name of the administrator who created it. */
  @Column({ name: 'created_by', type: 'varchar', length: 255, nullable: true })
  createdBy!: string | null;

  @UnsignedIntColumn('created_at')
  createdAt!: number;
}

/** Milliseconds since the epoch; bigint columns come back as strings from mysql2. */
function MillisecondsColumn(name: string): PropertyDecorator {
  return Column({ name, type: 'bigint', default: 0, transformer: integerTransformer });
}

/**
 * `promptwire_webhook_delivery`: the outbox. A row is written in the same
 * transaction as the change it reports (a stored version, a run's END), so an
 * event exists exactly when its change committed. Its id is the delivery id
 * the receiver sees, on every attempt. An instance sends a row only after
 * claiming it (a compare-and-set of `lease_owner` / `lease_until`), so several
 * instances never send one row at the same time, and a row whose sender died
 * is taken over once its lease has run out.
 */
@Entity({ name: 'promptwire_webhook_delivery' })
@Index('promptwire_webhook_delivery_due', ['status', 'nextAttemptAt'])
@Index('promptwire_webhook_delivery_webhook', ['webhookId', 'createdAt'])
export class WebhookDeliveryEntity {
  /** A uuid: `X-Promptwire-Delivery`. */
  @PrimaryColumn({ name: 'id', type: 'varchar', length: 36 })
  id!: string;

  @VarcharColumn('webhook_id', 36)
  webhookId!: string;

  @VarcharColumn('event', 32)
  event!: string;

  /** The exact body sent on every attempt (the signature covers these bytes). */
  @MediumTextColumn({ name: 'payload' })
  payload!: string;

  /** pending, delivered or failed (every attempt used). */
  @VarcharColumn('status', 16)
  status!: string;

  @UnsignedIntColumn('attempts')
  attempts!: number;

  @MillisecondsColumn('next_attempt_at')
  nextAttemptAt!: number;

  /** The instance sending it now; null when nobody holds it. */
  @Column({ name: 'lease_owner', type: 'varchar', length: 36, nullable: true })
  leaseOwner!: string | null;

  @MillisecondsColumn('lease_until')
  leaseUntil!: number;

  @Column({ name: 'last_error', type: 'varchar', length: 500, nullable: true })
  lastError!: string | null;

  /** The HTTP status of the last answer; null when there was none. */
  @Column({ name: 'response_status', type: 'int', nullable: true })
  responseStatus!: number | null;

  @MillisecondsColumn('created_at')
  createdAt!: number;

  @MillisecondsColumn('delivered_at')
  deliveredAt!: number;
}
