import { Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { DecimalColumn, FlagColumn, IntColumn, UnsignedIntColumn, VarcharColumn } from '../db/columns';

/** `tx_nrllm_agentrun`: one agent run; its details live in the steps (behaviour.md §1). */
@Entity({ name: 'tx_nrllm_agentrun' })
@Index('tx_nrllm_agentrun_uuid', ['uuid'])
export class AgentRunEntity {
  @PrimaryGeneratedColumn({ name: 'uid', type: 'int', unsigned: true })
  uid!: number;

  @VarcharColumn('uuid', 36)
  uuid!: string;

  @VarcharColumn('status', 20)
  status!: string;

  @UnsignedIntColumn('configuration_uid')
  configurationUid!: number;

  @VarcharColumn('configuration_identifier', 100)
  configurationIdentifier!: string;

  @IntColumn('iterations')
  iterations!: number;

  @FlagColumn('truncated', 0)
  truncated!: boolean;

  @IntColumn('total_prompt_tokens')
  totalPromptTokens!: number;

  @IntColumn('total_completion_tokens')
  totalCompletionTokens!: number;

  @IntColumn('total_tokens')
  totalTokens!: number;

  /** US dollars; NULL when the model is unpriced. */
  @DecimalColumn('estimated_cost', 10, 6, null)
  estimatedCost!: number | null;

  @VarcharColumn('termination_reason', 50)
  terminationReason!: string;

  @VarcharColumn('error_class', 255)
  errorClass!: string;

  /** Unix seconds; 0 = not yet. */
  @UnsignedIntColumn('started_at')
  startedAt!: number;

  @UnsignedIntColumn('finished_at')
  finishedAt!: number;

  @UnsignedIntColumn('tstamp')
  tstamp!: number;

  @UnsignedIntColumn('crdate')
  crdate!: number;
}
