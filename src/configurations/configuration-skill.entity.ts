import { Entity, PrimaryColumn } from 'typeorm';
import { Typo3UnsignedIntColumn } from '../db/columns';

/**
 * `tx_nrllm_configuration_skill_mm`: which skills a configuration injects, in
 * `sorting` order. nr_llm's table has no primary or unique key, which TypeORM
 * cannot describe, so the pair is declared primary here for the repository
 * only and the table is left out of schema generation (`synchronize: false`):
 * its migration is written by hand, exactly as ext_tables.sql has it.
 */
@Entity({ name: 'tx_nrllm_configuration_skill_mm', synchronize: false })
export class ConfigurationSkillEntity {
  @PrimaryColumn({ name: 'uid_local', type: 'int', width: 11, unsigned: true })
  uidLocal!: number;

  @PrimaryColumn({ name: 'uid_foreign', type: 'int', width: 11, unsigned: true })
  uidForeign!: number;

  @Typo3UnsignedIntColumn('sorting')
  sorting!: number;

  @Typo3UnsignedIntColumn('sorting_foreign')
  sortingForeign!: number;
}
