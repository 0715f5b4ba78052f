import { Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { DecimalColumn, IntColumn, MediumTextColumn, UnsignedIntColumn, VarcharColumn, textTransformer } from '../db/columns';

/** `tx_nrllm_agentrun_event`: one stored step of a run's trace, numbered 1, 2, 3… per run. */
@Entity({ name: 'tx_nrllm_agentrun_event' })
@Index('tx_nrllm_agentrun_event_run_sequence', ['run', 'sequence'])
export class AgentRunEventEntity {
  @PrimaryGeneratedColumn({ name: 'uid', type: 'int', unsigned: true })
  uid!: number;

  @UnsignedIntColumn('run')
  run!: number;

  @UnsignedIntColumn('sequence')
  sequence!: number;

  @VarcharColumn('kind', 20)
  kind!: string;

  @IntColumn('round')
  round!: number;

  @DecimalColumn('duration_ms', 10, 2, '0.00')
  durationMs!: number;

  /** The step's fields as a JSON object. */
  @MediumTextColumn({ name: 'payload', nullable: true, transformer: textTransformer })
  payload!: string;

  @UnsignedIntColumn('crdate')
  crdate!: number;
}
