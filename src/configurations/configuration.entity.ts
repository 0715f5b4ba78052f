import { Column, Entity, Index } from 'typeorm';
import { DecimalColumn, MediumTextColumn, Typo3IntColumn, Typo3SwitchColumn, Typo3TextColumn, Typo3UnsignedIntColumn, VarcharColumn, textTransformer } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/**
 * `tx_nrllm_configuration`: a model with its parameters, prompt, snippet tags
 * and skills, as nr_llm's ext_tables.sql defines it. Columns for nr_llm
 * features this service does not offer (model selection by criteria, usage
 * limits, fallback chains, access groups, guardrails) are carried unchanged.
 */
@Entity({ name: 'tx_nrllm_configuration' })
@Index('tx_nrllm_configuration_parent', ['pid'])
@Index('tx_nrllm_configuration_model_uid', ['modelUid'])
@Index('tx_nrllm_configuration_identifier', ['identifier'])
export class ConfigurationEntity extends Typo3Record {
  @VarcharColumn('identifier', 100)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  @Typo3UnsignedIntColumn('model_uid')
  modelUid!: number;

  @VarcharColumn('model_selection_mode', 20, { default: 'fixed' })
  modelSelectionMode!: string;

  @Typo3TextColumn('model_selection_criteria')
  modelSelectionCriteria!: string | null;

  /** A translation service name; part of the call options when set. */
  @VarcharColumn('translator', 50)
  translator!: string;

  @MediumTextColumn({ name: 'system_prompt', nullable: true, transformer: textTransformer })
  systemPrompt!: string;

  @VarcharColumn('system_prompt_data_class', 32)
  systemPromptDataClass!: string;

  @DecimalColumn('temperature', 3, 2, '0.70')
  temperature!: number;

  @Typo3IntColumn('max_tokens', 1000)
  maxTokens!: number;

  @DecimalColumn('top_p', 3, 2, '1.00')
  topP!: number;

  @DecimalColumn('frequency_penalty', 3, 2, '0.00')
  frequencyPenalty!: number;

  @DecimalColumn('presence_penalty', 3, 2, '0.00')
  presencePenalty!: number;

  @Typo3IntColumn('timeout')
  timeout!: number;

  @Column({ name: 'options', type: 'text', nullable: true })
  options!: string | null;

  @Typo3IntColumn('max_requests_per_day')
  maxRequestsPerDay!: number;

  @Typo3IntColumn('max_tokens_per_day')
  maxTokensPerDay!: number;

  @DecimalColumn('max_cost_per_day', 10, 2, '0.00')
  maxCostPerDay!: number;

  @Typo3TextColumn('fallback_chain')
  fallbackChain!: string | null;

  @VarcharColumn('preset_checksum', 64)
  presetChecksum!: string;

  @Typo3SwitchColumn('is_active', 1)
  isActive!: boolean;

  @Typo3SwitchColumn('is_default', 0)
  isDefault!: boolean;

  @Typo3IntColumn('allowed_groups')
  allowedGroups!: number;

  @Typo3SwitchColumn('require_second_approver', 0)
  requireSecondApprover!: boolean;

  @VarcharColumn('allowed_tool_groups', 255)
  allowedToolGroups!: string;

  @VarcharColumn('allowed_guardrails', 255)
  allowedGuardrails!: string;

  /** CSV of tags selecting snippets into the effective system prompt. */
  @VarcharColumn('snippet_tags', 255)
  snippetTags!: string;

  /** Count of relation rows in `tx_nrllm_configuration_skill_mm` (TYPO3 convention). */
  @Typo3IntColumn('skills')
  skills!: number;

  @Typo3UnsignedIntColumn('sorting')
  sorting!: number;
}
