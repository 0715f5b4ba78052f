import { Column, Entity, Index } from 'typeorm';
import { DecimalColumn, FlagColumn, IntColumn, MediumTextColumn, UnsignedIntColumn, VarcharColumn, textTransformer } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/** `tx_nrllm_configuration`: a model with its parameters, prompt, snippet tags and skills (behaviour.md §1, §4, §5). */
@Entity({ name: 'tx_nrllm_configuration' })
@Index('tx_nrllm_configuration_parent', ['pid'])
@Index('tx_nrllm_configuration_identifier', ['identifier'])
export class ConfigurationEntity extends Typo3Record {
  @VarcharColumn('identifier', 100)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  @UnsignedIntColumn('model_uid')
  modelUid!: number;

  @MediumTextColumn({ name: 'system_prompt', nullable: true, transformer: textTransformer })
  systemPrompt!: string;

  @DecimalColumn('temperature', 3, 2, '0.70')
  temperature!: number;

  @IntColumn('max_tokens', 1000)
  maxTokens!: number;

  @DecimalColumn('top_p', 3, 2, '1.00')
  topP!: number;

  @DecimalColumn('frequency_penalty', 3, 2, '0.00')
  frequencyPenalty!: number;

  @DecimalColumn('presence_penalty', 3, 2, '0.00')
  presencePenalty!: number;

  @IntColumn('timeout')
  timeout!: number;

  @Column({ name: 'options', type: 'text', nullable: true })
  options!: string | null;

  /** CSV of tags selecting snippets into the effective system prompt. */
  @VarcharColumn('snippet_tags', 255)
  snippetTags!: string;

  /** Count of relation rows in `tx_nrllm_configuration_skill_mm` (TYPO3 convention). */
  @UnsignedIntColumn('skills')
  skills!: number;

  @FlagColumn('is_active', 1)
  isActive!: boolean;

  @FlagColumn('is_default', 0)
  isDefault!: boolean;

  @UnsignedIntColumn('sorting')
  sorting!: number;
}
