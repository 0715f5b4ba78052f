import { Column, Entity, Index, PrimaryColumn } from 'typeorm';
import { MediumTextColumn } from '../db/columns';

/**
 * `promptwire_run_provenance`: what prompt a run started with. For a run of
 * a release: the release and its label; for every run: the snippet versions
 * composed into its system prompt; for a task run: the task and its version. Written with the run; TYPO3's
 * `tx_nrllm_agentrun` is not changed for it.
 */
@Entity({ name: 'promptwire_run_provenance' })
@Index('promptwire_run_provenance_release', ['releaseId'])
export class RunProvenanceEntity {
  @PrimaryColumn({ name: 'run_uid', type: 'int', unsigned: true })
  runUid!: number;

  /** `promptwire_configuration_release.id`; null: the run composed the configuration as it was. */
  @Column({ name: 'release_id', type: 'int', unsigned: true, nullable: true })
  releaseId!: number | null;

  /** The label the run was started with. */
  @Column({ name: 'label', type: 'varchar', length: 64, nullable: true })
  label!: string | null;

  /** JSON: `ReleasedRecord[]` of the composed snippets, in prompt order. */
  @MediumTextColumn({ name: 'snippets' })
  snippets!: string;

  /** The `tx_nrllm_task` uid of a task run; null: not a task run. */
  @Column({ name: 'task_uid', type: 'int', unsigned: true, nullable: true })
  taskUid!: number | null;

  /** The task's identifier when the run started. */
  @Column({ name: 'task_identifier', type: 'varchar', length: 100, nullable: true })
  taskIdentifier!: string | null;

  /** The stored version of the task the run sent; null: not known. */
  @Column({ name: 'task_version', type: 'int', unsigned: true, nullable: true })
  taskVersion!: number | null;
}
