import { Column, Entity, Index } from 'typeorm';
import { Typo3IntColumn, Typo3SwitchColumn, Typo3UnsignedIntColumn, VarcharColumn } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/** `tx_nrllm_provider`: an endpoint and its credentials, as nr_llm's ext_tables.sql defines it. */
@Entity({ name: 'tx_nrllm_provider' })
@Index('tx_nrllm_provider_parent', ['pid'])
@Index('tx_nrllm_provider_identifier', ['identifier'])
@Index('tx_nrllm_provider_priority_active', ['priority', 'isActive'])
export class ProviderEntity extends Typo3Record {
  @VarcharColumn('identifier', 100)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  /** nr_llm's SQL default is '' (no adapter chosen yet): such a provider reads, but cannot be called. */
  @VarcharColumn('adapter_type', 50)
  adapterType!: string;

  /** nr_llm's declared inference zone; carried, not interpreted here. */
  @VarcharColumn('trust_zone', 20)
  trustZone!: string;

  @VarcharColumn('endpoint_url', 500)
  endpointUrl!: string;

  /**
   * A secret. Written by this service as `pwenc:v1:…` (AES-256-GCM), by TYPO3
   * as a vault identifier, or `env:NAME`. Never leaves the service.
   */
  @VarcharColumn('api_key', 500)
  apiKey!: string;

  @VarcharColumn('organization_id', 100)
  organizationId!: string;

  @Typo3IntColumn('api_timeout', 120)
  apiTimeout!: number;

  @Typo3IntColumn('max_retries', 3)
  maxRetries!: number;

  @Column({ name: 'options', type: 'text', nullable: true })
  options!: string | null;

  @Typo3SwitchColumn('is_active', 1)
  isActive!: boolean;

  @Typo3IntColumn('priority', 50)
  priority!: number;

  @Typo3UnsignedIntColumn('sorting')
  sorting!: number;
}
