import { Column, Entity, Index } from 'typeorm';
import { integerTransformer, Typo3UidColumn, Typo3UnsignedIntColumn, VarcharColumn } from '../db/columns';

/** `smallint(5) unsigned DEFAULT 0 NOT NULL`. */
function SmallintColumn(name: string): PropertyDecorator {
  return Column({ name, type: 'smallint', width: 5, unsigned: true, default: 0, transformer: integerTransformer });
}

/** `smallint(5) unsigned DEFAULT NULL`: NULL is "not measured", never 0. */
function NullableSmallintColumn(name: string): PropertyDecorator {
  return Column({ name, type: 'smallint', width: 5, unsigned: true, nullable: true });
}

/** `int(11) unsigned DEFAULT NULL`. */
function NullableIntColumn(name: string): PropertyDecorator {
  return Column({ name, type: 'int', width: 11, unsigned: true, nullable: true });
}

/**
 * `tx_nrllm_telemetry`: nr_llm's per-call log (ADR-058), one immutable row
 * per provider call, success or failure, with the columns of nr_llm's
 * ext_tables.sql. Content-free: no prompt, no response, no error message
 * (only the error's class). NULL means "not measured" and is never a 0:
 * tokens when the provider reported none, cost when the model is unpriced,
 * and the routing, complexity and request-facts groups promptwire does not
 * measure. Rows are never updated.
 */
@Entity({ name: 'tx_nrllm_telemetry' })
@Index('tx_nrllm_telemetry_parent', ['pid'])
@Index('tx_nrllm_telemetry_correlation', ['correlationId'])
@Index('tx_nrllm_telemetry_crdate', ['crdate'])
@Index('tx_nrllm_telemetry_operation_lookup', ['operation', 'crdate'])
@Index('tx_nrllm_telemetry_provider_lookup', ['provider', 'success', 'crdate'])
@Index('tx_nrllm_telemetry_routed_lookup', ['routingPolicyMode', 'crdate'])
export class TelemetryEntity {
  @Typo3UidColumn({ unsigned: true })
  uid!: number;

  @Typo3UnsignedIntColumn('pid')
  pid!: number;

  /** The run's uuid (inside an agent run, ADR-153). */
  @VarcharColumn('correlation_id', 36)
  correlationId!: string;

  @VarcharColumn('operation', 32)
  operation!: string;

  @VarcharColumn('provider', 64)
  provider!: string;

  @VarcharColumn('model', 128)
  model!: string;

  @VarcharColumn('configuration_identifier', 150)
  configurationIdentifier!: string;

  @VarcharColumn('served_configuration_identifier', 150)
  servedConfigurationIdentifier!: string;

  @VarcharColumn('served_provider', 64)
  servedProvider!: string;

  @VarcharColumn('served_model', 128)
  servedModel!: string;

  @Typo3UnsignedIntColumn('be_user')
  beUser!: number;

  @VarcharColumn('source_extension', 64)
  sourceExtension!: string;

  @VarcharColumn('source_operation', 64)
  sourceOperation!: string;

  @SmallintColumn('success')
  success!: number;

  /** The error's class name on failure ('' on success); never its message. */
  @VarcharColumn('error_class', 255)
  errorClass!: string;

  @Typo3UnsignedIntColumn('latency_ms')
  latencyMs!: number;

  @SmallintColumn('cache_hit')
  cacheHit!: number;

  @SmallintColumn('fallback_attempts')
  fallbackAttempts!: number;

  @NullableIntColumn('time_to_first_token_ms')
  timeToFirstTokenMs!: number | null;

  @VarcharColumn('routing_policy_mode', 32)
  routingPolicyMode!: string;

  @SmallintColumn('routing_candidates')
  routingCandidates!: number;

  @VarcharColumn('routing_rejections', 255)
  routingRejections!: string;

  @SmallintColumn('routing_signal_quality')
  routingSignalQuality!: number;

  @SmallintColumn('routing_signal_health')
  routingSignalHealth!: number;

  @SmallintColumn('routing_signal_cost')
  routingSignalCost!: number;

  @SmallintColumn('complexity_score')
  complexityScore!: number;

  @Typo3UnsignedIntColumn('complexity_payload_bytes')
  complexityPayloadBytes!: number;

  @NullableIntColumn('complexity_tokens')
  complexityTokens!: number | null;

  @SmallintColumn('complexity_tools')
  complexityTools!: number;

  @NullableIntColumn('complexity_context_percent')
  complexityContextPercent!: number | null;

  @VarcharColumn('complexity_shape', 32)
  complexityShape!: string;

  @NullableSmallintColumn('facts_messages')
  factsMessages!: number | null;

  @NullableSmallintColumn('facts_turns')
  factsTurns!: number | null;

  @NullableSmallintColumn('facts_tools')
  factsTools!: number | null;

  @NullableIntColumn('facts_payload_bytes')
  factsPayloadBytes!: number | null;

  @NullableIntColumn('facts_token_estimate')
  factsTokenEstimate!: number | null;

  @VarcharColumn('facts_shape', 32)
  factsShape!: string;

  @NullableIntColumn('actual_input_tokens')
  actualInputTokens!: number | null;

  @NullableIntColumn('actual_output_tokens')
  actualOutputTokens!: number | null;

  /** US dollars; NULL when the model is unpriced. */
  @Column({ name: 'actual_cost', type: 'decimal', precision: 14, scale: 8, nullable: true })
  actualCost!: string | null;

  @VarcharColumn('response_model', 128)
  responseModel!: string;

  @NullableSmallintColumn('provider_retries')
  providerRetries!: number | null;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;
}
