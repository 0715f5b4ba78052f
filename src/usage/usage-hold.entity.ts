import { Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { UnsignedIntColumn } from '../db/columns';

/**
 * `promptwire_usage_hold`: a provider call a budget check let through whose
 * booking is not in `tx_nrllm_service_usage` yet. Every instance's check
 * counts the holds of its scopes as spent requests, so instances sharing a
 * database cannot together let more calls through than a request limit
 * allows. A hold goes when its call is booked (in the same transaction) or
 * fails; one left by an instance that died expires.
 */
@Entity({ name: 'promptwire_usage_hold' })
@Index('promptwire_usage_hold_be_user', ['beUser'])
@Index('promptwire_usage_hold_configuration', ['configurationUid'])
export class UsageHoldEntity {
  @PrimaryGeneratedColumn({ name: 'uid', type: 'int', unsigned: true })
  uid!: number;

  /** The backend user the call is booked to (0 = none). */
  @UnsignedIntColumn('be_user')
  beUser!: number;

  /** The configuration whose daily caps the call counts against (0 = none). */
  @UnsignedIntColumn('configuration_uid')
  configurationUid!: number;

  /** Unix seconds after which the hold no longer counts (its instance died mid-call). */
  @UnsignedIntColumn('expires_at')
  expiresAt!: number;
}
