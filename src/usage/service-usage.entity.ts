import { Entity, Index } from 'typeorm';
import { DecimalColumn, Typo3UidColumn, Typo3UnsignedIntColumn, VarcharColumn } from '../db/columns';

/**
 * `tx_nrllm_service_usage`: nr_llm's daily usage aggregate, one row per
 * aggregation key (service type, provider, backend user, configuration,
 * model uid and id, task, source) and local day (`request_date`, the day's
 * midnight). promptwire books its provider calls here exactly as nr_llm
 * does, so TYPO3's dashboards and budgets count both. No unique key: a race
 * may create a second row for one key; every reader sums.
 */
@Entity({ name: 'tx_nrllm_service_usage' })
@Index('tx_nrllm_service_usage_parent', ['pid'])
@Index('tx_nrllm_service_usage_lookup', ['serviceType', 'serviceProvider', 'requestDate', 'modelUid', 'modelId'])
@Index('tx_nrllm_service_usage_user_lookup', ['beUser', 'serviceType', 'requestDate'])
@Index('tx_nrllm_service_usage_config_lookup', ['configurationUid', 'requestDate'])
@Index('tx_nrllm_service_usage_model_lookup', ['modelUid', 'requestDate'])
@Index('tx_nrllm_service_usage_task_lookup', ['taskUid', 'requestDate'])
@Index('tx_nrllm_service_usage_request_date', ['requestDate'])
export class ServiceUsageEntity {
  @Typo3UidColumn({ unsigned: true })
  uid!: number;

  @Typo3UnsignedIntColumn('pid')
  pid!: number;

  /** The operation: `chat`, `tools`, `complete`, `stream`, … */
  @VarcharColumn('service_type', 50)
  serviceType!: string;

  /** nr_llm's provider id: `openai`, `claude`, `gemini`, `ollama`, … */
  @VarcharColumn('service_provider', 50)
  serviceProvider!: string;

  @Typo3UnsignedIntColumn('configuration_uid')
  configurationUid!: number;

  @Typo3UnsignedIntColumn('model_uid')
  modelUid!: number;

  @VarcharColumn('model_id', 150)
  modelId!: string;

  @Typo3UnsignedIntColumn('task_uid')
  taskUid!: number;

  /** The calling integration ('' = unattributed). */
  @VarcharColumn('source_extension', 64)
  sourceExtension!: string;

  @Typo3UnsignedIntColumn('be_user')
  beUser!: number;

  @Typo3UnsignedIntColumn('request_count')
  requestCount!: number;

  @Typo3UnsignedIntColumn('tokens_used')
  tokensUsed!: number;

  @Typo3UnsignedIntColumn('prompt_tokens')
  promptTokens!: number;

  @Typo3UnsignedIntColumn('completion_tokens')
  completionTokens!: number;

  @Typo3UnsignedIntColumn('characters_used')
  charactersUsed!: number;

  @Typo3UnsignedIntColumn('audio_seconds_used')
  audioSecondsUsed!: number;

  @Typo3UnsignedIntColumn('images_generated')
  imagesGenerated!: number;

  /** US dollars; 0 for unpriced calls. */
  @DecimalColumn('estimated_cost', 14, 6, '0.000000')
  estimatedCost!: number;

  /** The local midnight of the day (Unix seconds, in USAGE_TIMEZONE). */
  @Typo3UnsignedIntColumn('request_date')
  requestDate!: number;

  @Typo3UnsignedIntColumn('tstamp')
  tstamp!: number;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;
}
