import { Column, Entity, Index } from 'typeorm';
import { MediumTextColumn, Typo3SwitchColumn, Typo3TextColumn, Typo3UnsignedIntColumn, VarcharColumn, textTransformer } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/**
 * `tx_nrllm_skill`: reviewed reference prose injected into runs, as nr_llm's
 * ext_tables.sql defines it. nr_llm materialises skills from a source (a
 * repository); the identifier is unique per source, not overall.
 */
@Entity({ name: 'tx_nrllm_skill' })
@Index('tx_nrllm_skill_parent', ['pid'])
@Index('tx_nrllm_skill_source', ['source'])
// MySQL: a 191-character prefix index, written by hand in the migration (TypeORM has no prefix indexes).
@Index('tx_nrllm_skill_identifier', ['identifier'])
export class SkillEntity extends Typo3Record {
  /** `tx_nrllm_skill_source` uid; 0 for skills written through this service. */
  @Typo3UnsignedIntColumn('source')
  source!: number;

  @VarcharColumn('identifier', 512)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  @MediumTextColumn({ name: 'body', nullable: true, transformer: textTransformer })
  body!: string;

  /** sha256 hex of `body` when it was reviewed; a mismatch keeps the skill out of runs. */
  @VarcharColumn('body_checksum', 64)
  bodyChecksum!: string;

  @VarcharColumn('source_sha', 64)
  sourceSha!: string;

  @Typo3TextColumn('raw_frontmatter')
  rawFrontmatter!: string | null;

  /** `full` or `partial`; a partial skill drops the lines that need scripts (see the skill block). */
  @VarcharColumn('support_status', 20, { default: 'full' })
  supportStatus!: string;

  @Typo3TextColumn('unsupported_notes')
  unsupportedNotes!: string | null;

  @Typo3TextColumn('allowed_tools')
  allowedTools!: string | null;

  @VarcharColumn('trust_level', 20, { default: 'untrusted' })
  trustLevel!: string;

  @Typo3TextColumn('injection_scan')
  injectionScan!: string | null;

  @VarcharColumn('data_class', 32)
  dataClass!: string;

  @Typo3SwitchColumn('orphaned', 0)
  orphaned!: boolean;

  @Typo3SwitchColumn('enabled', 0)
  enabled!: boolean;
}
