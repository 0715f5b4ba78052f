import { Column, Entity, Index } from 'typeorm';
import { DecimalColumn, MediumTextColumn, Typo3SmallFlagColumn, Typo3UnsignedIntColumn, VarcharColumn, Typo3UidColumn } from '../db/columns';
import { runStatusTransformer } from './run-status';

/**
 * `tx_nrllm_agentrun`: one agent run, as nr_llm's ext_tables.sql defines it;
 * its details live in the steps. `status` holds nr_llm's lower-case values
 * (`queued`, `running`, `completed`, `failed`, `cancelled`, …). The queue,
 * lease and suspension columns belong to nr_llm's own worker: this service
 * keeps its leases in `promptwire_run_lease` and leaves them at their
 * "not claimed" defaults, which nr_llm's stale-run reaper skips.
 */
@Entity({ name: 'tx_nrllm_agentrun' })
@Index('tx_nrllm_agentrun_parent', ['pid'])
@Index('tx_nrllm_agentrun_run_uuid', ['uuid'])
@Index('tx_nrllm_agentrun_be_user', ['beUser', 'crdate'])
@Index('tx_nrllm_agentrun_status_lookup', ['status', 'crdate'])
@Index('tx_nrllm_agentrun_crdate', ['crdate'])
export class AgentRunEntity {
  @Typo3UidColumn({ unsigned: true })
  uid!: number;

  @Typo3UnsignedIntColumn('pid')
  pid!: number;

  @VarcharColumn('uuid', 36)
  uuid!: string;

  /** Read upper case, written lower case (see run-status.ts). */
  @Column({ name: 'status', type: 'varchar', length: 32, default: 'queued', transformer: runStatusTransformer })
  status!: string;

  @Typo3UnsignedIntColumn('configuration_uid')
  configurationUid!: number;

  @VarcharColumn('configuration_identifier', 150)
  configurationIdentifier!: string;

  /** TYPO3 backend user; 0 for runs started through this service. */
  @Typo3UnsignedIntColumn('be_user')
  beUser!: number;

  @Typo3UnsignedIntColumn('iterations')
  iterations!: number;

  @Typo3SmallFlagColumn('truncated')
  truncated!: boolean;

  @Typo3UnsignedIntColumn('total_prompt_tokens')
  totalPromptTokens!: number;

  @Typo3UnsignedIntColumn('total_completion_tokens')
  totalCompletionTokens!: number;

  @Typo3UnsignedIntColumn('total_tokens')
  totalTokens!: number;

  /** US dollars, clamped to what `decimal(10,6)` holds; 0 when unpriced (the exact figure is on the END step). */
  @DecimalColumn('estimated_cost', 10, 6, '0.000000')
  estimatedCost!: number;

  @VarcharColumn('error_class', 255)
  errorClass!: string;

  @VarcharColumn('termination_reason', 32)
  terminationReason!: string;

  @MediumTextColumn({ name: 'suspended_state', nullable: true })
  suspendedState!: string | null;

  @MediumTextColumn({ name: 'queued_request', nullable: true })
  queuedRequest!: string | null;

  @VarcharColumn('claimed_by', 64)
  claimedBy!: string;

  @Typo3UnsignedIntColumn('lease_expires')
  leaseExpires!: number;

  @Typo3UnsignedIntColumn('requeue_count')
  requeueCount!: number;

  @VarcharColumn('pending_effect', 32)
  pendingEffect!: string;

  /** Unix seconds; 0 = not yet. */
  @Typo3UnsignedIntColumn('started_at')
  startedAt!: number;

  @Typo3UnsignedIntColumn('finished_at')
  finishedAt!: number;

  @Typo3UnsignedIntColumn('tstamp')
  tstamp!: number;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;
}
