import { Entity, PrimaryColumn } from 'typeorm';
import { Typo3UnsignedIntColumn } from '../db/columns';

/**
 * `tx_nrllm_task_skill_mm`: which skills a task adds to its configuration's,
 * in `sorting` order. Like the configuration's relation table it has no
 * primary key in nr_llm, which TypeORM cannot describe: the pair is declared
 * primary for the repository only, the table is left out of schema
 * generation, and its migration is written by hand as ext_tables.sql has it.
 */
@Entity({ name: 'tx_nrllm_task_skill_mm', synchronize: false })
export class TaskSkillEntity {
  @PrimaryColumn({ name: 'uid_local', type: 'int', width: 11, unsigned: true })
  uidLocal!: number;

  @PrimaryColumn({ name: 'uid_foreign', type: 'int', width: 11, unsigned: true })
  uidForeign!: number;

  @Typo3UnsignedIntColumn('sorting')
  sorting!: number;

  @Typo3UnsignedIntColumn('sorting_foreign')
  sortingForeign!: number;
}
