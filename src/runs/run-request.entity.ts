import { Entity, PrimaryColumn } from 'typeorm';
import { MediumTextColumn, UnsignedIntColumn } from '../db/columns';

/**
 * `promptwire_run_request`: what a run was started with (the validated
 * `startRun` input and who asked), so that any instance can prepare the run
 * again and go on from its stored steps: after a person decided its pending
 * tool calls, or after the instance executing it died. nr_llm keeps the
 * same in `tx_nrllm_agentrun.queued_request` / `suspended_state`; TYPO3's
 * table is not changed for it.
 */
@Entity({ name: 'promptwire_run_request' })
export class RunRequestEntity {
  @PrimaryColumn({ name: 'run_uid', type: 'int', unsigned: true })
  runUid!: number;

  /** JSON: `StoredRunRequest`. */
  @MediumTextColumn({ name: 'request' })
  request!: string;

  /** How often another instance took the run over after its owner died (nr_llm's `requeue_count`). */
  @UnsignedIntColumn('requeue_count')
  requeueCount!: number;
}
