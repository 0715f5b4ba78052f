import { Column, Entity, Index } from 'typeorm';
import { Typo3IntColumn, Typo3SwitchColumn, Typo3UnsignedIntColumn, VarcharColumn } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/** `tx_nrllm_model`: a provider's model with its limits and prices, as nr_llm's ext_tables.sql defines it. */
@Entity({ name: 'tx_nrllm_model' })
@Index('tx_nrllm_model_parent', ['pid'])
@Index('tx_nrllm_model_provider_uid', ['providerUid'])
@Index('tx_nrllm_model_identifier', ['identifier'])
export class ModelEntity extends Typo3Record {
  @VarcharColumn('identifier', 100)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  @Typo3UnsignedIntColumn('provider_uid')
  providerUid!: number;

  @VarcharColumn('model_id', 150)
  modelId!: string;

  @Typo3UnsignedIntColumn('context_length')
  contextLength!: number;

  @Typo3UnsignedIntColumn('max_output_tokens')
  maxOutputTokens!: number;

  /** Embedding dimensions (0 = unknown); carried, not used here. */
  @Typo3UnsignedIntColumn('dimensions')
  dimensions!: number;

  @VarcharColumn('capabilities', 255)
  capabilities!: string;

  /** nr_llm's capability discovery record; carried, not used here. */
  @VarcharColumn('capabilities_discovered', 255)
  capabilitiesDiscovered!: string;

  @Typo3UnsignedIntColumn('capabilities_confirmed_at')
  capabilitiesConfirmedAt!: number;

  @VarcharColumn('capabilities_source', 20)
  capabilitiesSource!: string;

  @Typo3IntColumn('default_timeout', 120)
  defaultTimeout!: number;

  /** US cents per one million input tokens. */
  @Typo3UnsignedIntColumn('cost_input')
  costInput!: number;

  /** US cents per one million output tokens. */
  @Typo3UnsignedIntColumn('cost_output')
  costOutput!: number;

  @Typo3SwitchColumn('is_active', 1)
  isActive!: boolean;

  @Typo3SwitchColumn('is_default', 0)
  isDefault!: boolean;

  @Typo3UnsignedIntColumn('sorting')
  sorting!: number;
}
