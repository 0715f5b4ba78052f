import { Entity, Index, PrimaryColumn } from 'typeorm';
import { UnsignedIntColumn } from '../db/columns';

/** `tx_nrllm_configuration_skill_mm`: which skills a configuration injects, in `sorting` order. */
@Entity({ name: 'tx_nrllm_configuration_skill_mm' })
@Index('tx_nrllm_configuration_skill_mm_uid_foreign', ['uidForeign'])
export class ConfigurationSkillEntity {
  @PrimaryColumn({ name: 'uid_local', type: 'int', unsigned: true })
  uidLocal!: number;

  @PrimaryColumn({ name: 'uid_foreign', type: 'int', unsigned: true })
  uidForeign!: number;

  @UnsignedIntColumn('sorting')
  sorting!: number;

  @UnsignedIntColumn('sorting_foreign')
  sortingForeign!: number;
}
