import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { MediumTextColumn, UnsignedIntColumn, VarcharColumn } from '../db/columns';

/**
 * `promptwire_task_release`: a task frozen under a label, as a configuration
 * release freezes a configuration. Rows are never changed: publishing the
 * label again adds a row, and the newest row of a (task, label) pair is what
 * the label means now. A task run with the label sends this state, with the
 * configuration's release of the same label.
 */
@Entity({ name: 'promptwire_task_release' })
@Index('promptwire_task_release_label', ['taskUid', 'label', 'id'])
export class TaskReleaseEntity {
  @PrimaryGeneratedColumn({ name: 'id', type: 'int', unsigned: true })
  id!: number;

  /** The TYPO3 uid of the task. */
  @UnsignedIntColumn('task_uid')
  taskUid!: number;

  /** Lower case (the release label rules). */
  @VarcharColumn('label', 64)
  label!: string;

  /** The task version the release was taken from. */
  @UnsignedIntColumn('task_version')
  taskVersion!: number;

  /** JSON: the frozen `TaskState` (template, variables, schema, skills, configuration). */
  @MediumTextColumn({ name: 'state' })
  state!: string;

  /** The token name of the publisher. */
  @Column({ name: 'author', type: 'varchar', length: 255, nullable: true })
  author!: string | null;

  @UnsignedIntColumn('created_at')
  createdAt!: number;
}
