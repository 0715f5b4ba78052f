import { Column, Entity, Index, PrimaryGeneratedColumn } from 'typeorm';
import { MediumTextColumn, UnsignedIntColumn, VarcharColumn } from '../db/columns';

/**
 * `promptwire_prompt_version`: one stored state of a snippet, configuration or
 * skill. Version 1 is the first state the service saw; each API write and
 * each change noticed in the TYPO3 tables adds the next number. The unique
 * index is what keeps two instances from numbering a change twice.
 */
@Entity({ name: 'promptwire_prompt_version' })
@Index('promptwire_prompt_version_record', ['kind', 'recordUid', 'version'], { unique: true })
export class PromptVersionEntity {
  @PrimaryGeneratedColumn({ name: 'id', type: 'int', unsigned: true })
  id!: number;

  /** snippet, configuration or skill */
  @VarcharColumn('kind', 16)
  kind!: string;

  /** The TYPO3 uid of the versioned row. */
  @UnsignedIntColumn('record_uid')
  recordUid!: number;

  @UnsignedIntColumn('version')
  version!: number;

  /** The state as JSON (see version-state.ts). */
  @MediumTextColumn({ name: 'state' })
  state!: string;

  /** sha256 of the state: the change detector compares it with the row it reads. */
  @VarcharColumn('fingerprint', 64)
  fingerprint!: string;

  /** api or external */
  @VarcharColumn('source', 16)
  source!: string;

  /** The token name behind an API write; null for external changes. */
  @Column({ name: 'author', type: 'varchar', length: 255, nullable: true })
  author!: string | null;

  @UnsignedIntColumn('created_at')
  createdAt!: number;
}
