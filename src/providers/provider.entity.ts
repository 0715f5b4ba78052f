import { Column, Entity, Index } from 'typeorm';
import { FlagColumn, IntColumn, UnsignedIntColumn, VarcharColumn } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/** `tx_nrllm_provider`: an endpoint and its credentials (behaviour.md §1). */
@Entity({ name: 'tx_nrllm_provider' })
@Index('tx_nrllm_provider_parent', ['pid'])
@Index('tx_nrllm_provider_identifier', ['identifier'])
export class ProviderEntity extends Typo3Record {
  @VarcharColumn('identifier', 100)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  @VarcharColumn('adapter_type', 50)
  adapterType!: string;

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

  @IntColumn('api_timeout', 30)
  apiTimeout!: number;

  @IntColumn('max_retries', 3)
  maxRetries!: number;

  @Column({ name: 'options', type: 'text', nullable: true })
  options!: string | null;

  @FlagColumn('is_active', 1)
  isActive!: boolean;

  @IntColumn('priority', 50)
  priority!: number;

  @UnsignedIntColumn('sorting')
  sorting!: number;
}
