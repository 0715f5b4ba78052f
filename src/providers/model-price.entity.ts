import { Column, Entity, PrimaryColumn } from 'typeorm';
import { UnsignedIntColumn } from '../db/columns';

/**
 * Prices TYPO3's `tx_nrllm_model` has no column for, kept in the service's own
 * table keyed by the model's uid (behaviour.md §1: never add a column to a
 * TYPO3 table). US cents per million tokens; NULL = not priced separately.
 */
@Entity({ name: 'promptwire_model_price' })
export class ModelPriceEntity {
  @PrimaryColumn({ name: 'model_uid', type: 'int', unsigned: true })
  modelUid!: number;

  @Column({ name: 'cost_cache_read', type: 'int', unsigned: true, nullable: true })
  costCacheRead!: number | null;

  @Column({ name: 'cost_cache_write', type: 'int', unsigned: true, nullable: true })
  costCacheWrite!: number | null;

  @Column({ name: 'cost_reasoning', type: 'int', unsigned: true, nullable: true })
  costReasoning!: number | null;

  @UnsignedIntColumn('tstamp')
  tstamp!: number;
}
