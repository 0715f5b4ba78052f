import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { MediumTextColumn, UnsignedIntColumn, VarcharColumn } from '../db/columns';

/**
 * `promptwire_configuration_release`: a configuration frozen under a label
 * (`production`, `staging`, …). Rows are never changed: publishing a label
 * again adds a row, and the newest row of a (configuration, label) pair is
 * what the label means now, so older releases stay readable and a run that
 * used one keeps pointing at exactly what it ran.
 */
@Entity({ name: 'promptwire_configuration_release' })
@Index('promptwire_configuration_release_label', ['configurationUid', 'label', 'id'])
export class ConfigurationReleaseEntity {
  @PrimaryGeneratedColumn({ name: 'id', type: 'int', unsigned: true })
  id!: number;

  /** The TYPO3 uid of the configuration. */
  @UnsignedIntColumn('configuration_uid')
  configurationUid!: number;

  /** Lower case; see release-rules.ts. */
  @VarcharColumn('label', 64)
  label!: string;

  /** The configuration version the release was taken from. */
  @UnsignedIntColumn('configuration_version')
  configurationVersion!: number;

  /** The model the release calls (its provider is looked up at run time); 0: none. */
  @UnsignedIntColumn('model_uid')
  modelUid!: number;

  /** The system prompt with the snippet block appended, as a run sends it. */
  @MediumTextColumn({ name: 'effective_system_prompt' })
  effectiveSystemPrompt!: string;

  /** JSON object: the call options as they were built at publication. */
  @MediumTextColumn({ name: 'call_options' })
  callOptions!: string;

  /** JSON: `ReleasedRecord[]` of the composed snippets, in prompt order. */
  @MediumTextColumn({ name: 'snippets' })
  snippets!: string;

  /** JSON: `ReleasedSkill[]`, the attached skills in injection order with what a run injects of each. */
  @MediumTextColumn({ name: 'skills' })
  skills!: string;

  /** The token name of the publisher. */
  @Column({ name: 'author', type: 'varchar', length: 255, nullable: true })
  author!: string | null;

  @UnsignedIntColumn('created_at')
  createdAt!: number;
}
