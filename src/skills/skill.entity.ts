import { Column, Entity, Index } from 'typeorm';
import { FlagColumn, MediumTextColumn, VarcharColumn, textTransformer } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/** `tx_nrllm_skill`: reviewed reference prose injected into runs (behaviour.md §6). */
@Entity({ name: 'tx_nrllm_skill' })
@Index('tx_nrllm_skill_parent', ['pid'])
@Index('tx_nrllm_skill_identifier', ['identifier'])
export class SkillEntity extends Typo3Record {
  @VarcharColumn('identifier', 100)
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

  @FlagColumn('enabled', 0)
  enabled!: boolean;

  @FlagColumn('orphaned', 0)
  orphaned!: boolean;
}
