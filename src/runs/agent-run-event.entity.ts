import { Entity, Index } from 'typeorm';
import { DecimalColumn, MediumTextColumn, Typo3UnsignedIntColumn, VarcharColumn, textTransformer, Typo3UidColumn } from '../db/columns';

/** `tx_nrllm_agentrun_event`: one stored step of a run's trace, numbered 1, 2, 3… per run (nr_llm's ext_tables.sql). */
@Entity({ name: 'tx_nrllm_agentrun_event' })
@Index('tx_nrllm_agentrun_event_parent', ['pid'])
@Index('tx_nrllm_agentrun_event_run_sequence', ['run', 'sequence'])
@Index('tx_nrllm_agentrun_event_crdate', ['crdate'])
export class AgentRunEventEntity {
  @Typo3UidColumn({ unsigned: true })
  uid!: number;

  @Typo3UnsignedIntColumn('pid')
  pid!: number;

  @Typo3UnsignedIntColumn('run')
  run!: number;

  @Typo3UnsignedIntColumn('sequence')
  sequence!: number;

  /** nr_llm's lower-case step kinds (`llm`, `tool`, …). */
  @VarcharColumn('kind', 32)
  kind!: string;

  @Typo3UnsignedIntColumn('round')
  round!: number;

  @DecimalColumn('duration_ms', 10, 2, '0.00')
  durationMs!: number;

  /** The step's fields as a JSON object. */
  @MediumTextColumn({ name: 'payload', nullable: true, transformer: textTransformer })
  payload!: string;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;
}
