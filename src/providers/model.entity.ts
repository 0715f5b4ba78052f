import { Column, Entity, Index } from 'typeorm';
import { FlagColumn, IntColumn, UnsignedIntColumn, VarcharColumn } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/** `tx_nrllm_model`: a provider's model with its limits and prices (behaviour.md §1). */
@Entity({ name: 'tx_nrllm_model' })
@Index('tx_nrllm_model_parent', ['pid'])
@Index('tx_nrllm_model_identifier', ['identifier'])
@Index('tx_nrllm_model_provider', ['providerUid'])
export class ModelEntity extends Typo3Record {
  @VarcharColumn('identifier', 100)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  @UnsignedIntColumn('provider_uid')
  providerUid!: number;

  @VarcharColumn('model_id', 150)
  modelId!: string;

  @IntColumn('context_length')
  contextLength!: number;

  @IntColumn('max_output_tokens')
  maxOutputTokens!: number;

  @VarcharColumn('capabilities', 255)
  capabilities!: string;

  @IntColumn('default_timeout', 120)
  defaultTimeout!: number;

  /** US cents per one million input tokens. */
  @UnsignedIntColumn('cost_input')
  costInput!: number;

  /** US cents per one million output tokens. */
  @UnsignedIntColumn('cost_output')
  costOutput!: number;

  @FlagColumn('is_active', 1)
  isActive!: boolean;

  @FlagColumn('is_default', 0)
  isDefault!: boolean;

  @UnsignedIntColumn('sorting')
  sorting!: number;
}
