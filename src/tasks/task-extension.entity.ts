import { Entity, PrimaryColumn } from 'typeorm';
import { MediumTextColumn } from '../db/columns';

/**
 * `promptwire_task_extension`: what a task has here beyond nr_llm's columns,
 * one row per task (none: no declared variables, no schema). TYPO3's table
 * is not changed for it.
 */
@Entity({ name: 'promptwire_task_extension' })
export class TaskExtensionEntity {
  @PrimaryColumn({ name: 'task_uid', type: 'int', unsigned: true })
  taskUid!: number;

  /** JSON: `DeclaredVariable[]` in declaration order. */
  @MediumTextColumn({ name: 'variables' })
  variables!: string;

  /** JSON Schema text of a JSON task's answer; null: none. */
  @MediumTextColumn({ name: 'output_schema', nullable: true })
  outputSchema!: string | null;
}
