import { Entity, Index, PrimaryColumn } from 'typeorm';
import { UnsignedIntColumn, VarcharColumn } from '../db/columns';

/**
 * `promptwire_run_lease`: which instance executes a run, and when it last said
 * so. Several instances may share one database; a run is only declared
 * interrupted when its lease is missing or stale, never while a live
 * instance still works on it.
 */
@Entity({ name: 'promptwire_run_lease' })
@Index('promptwire_run_lease_instance', ['instanceId'])
export class RunLeaseEntity {
  @PrimaryColumn({ name: 'run_uid', type: 'int', unsigned: true })
  runUid!: number;

  @VarcharColumn('instance_id', 36)
  instanceId!: string;

  /** Unix seconds of the owner's last heartbeat. */
  @UnsignedIntColumn('heartbeat_at')
  heartbeatAt!: number;
}
