import { Column, Entity, Index } from 'typeorm';
import { MediumTextColumn, Typo3IntColumn, Typo3SwitchColumn, Typo3TextColumn, Typo3UnsignedIntColumn, VarcharColumn, textTransformer } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/**
 * `tx_nrllm_task`: a one-shot prompt task, as nr_llm's ext_tables.sql
 * defines it. The identifier is unique among non-deleted rows by rule (TCA),
 * not by the database. What nr_llm has no column for (declared variables, an
 * output schema) lives in `promptwire_task_extension`.
 */
@Entity({ name: 'tx_nrllm_task' })
@Index('tx_nrllm_task_parent', ['pid'])
@Index('tx_nrllm_task_configuration_uid', ['configurationUid'])
@Index('tx_nrllm_task_identifier', ['identifier'])
@Index('tx_nrllm_task_category', ['category'])
export class TaskEntity extends Typo3Record {
  @VarcharColumn('identifier', 100)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  /** One of nr_llm's categories; a row TYPO3 wrote may hold anything. */
  @VarcharColumn('category', 50, { default: 'general' })
  category!: string;

  /** 0: the active default configuration. */
  @Typo3UnsignedIntColumn('configuration_uid')
  configurationUid!: number;

  /** `{{input}}` and named `{{placeholders}}`; NULL in a TYPO3 row reads as ''. */
  @MediumTextColumn({ name: 'prompt_template', nullable: true, transformer: textTransformer })
  promptTemplate!: string;

  @VarcharColumn('input_type', 50, { default: 'manual' })
  inputType!: string;

  /** nr_llm's input source settings (JSON); carried, not interpreted here. */
  @Typo3TextColumn('input_source')
  inputSource!: string | null;

  @VarcharColumn('output_format', 20, { default: 'markdown' })
  outputFormat!: string;

  /** TYPO3's relation counter of `tx_nrllm_task_skill_mm`. */
  @Typo3IntColumn('skills')
  skills!: number;

  @Typo3SwitchColumn('is_active', 1)
  isActive!: boolean;

  /** nr_llm ships system tasks; carried, not interpreted here. */
  @Typo3SwitchColumn('is_system', 0)
  isSystem!: boolean;

  @Typo3UnsignedIntColumn('sorting')
  sorting!: number;
}
