import { Column, Entity, Index } from 'typeorm';
import { FlagColumn, UnsignedIntColumn, VarcharColumn, textTransformer } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/** `tx_nrllm_promptsnippet`: a tagged prompt fragment (behaviour.md §1, §3). */
@Entity({ name: 'tx_nrllm_promptsnippet' })
@Index('tx_nrllm_promptsnippet_parent', ['pid'])
@Index('tx_nrllm_promptsnippet_identifier', ['identifier'])
@Index('tx_nrllm_promptsnippet_active_sorting', ['isActive', 'sorting', 'name'])
export class PromptSnippetEntity extends Typo3Record {
  @VarcharColumn('identifier', 100)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  /** CSV, free vocabulary; read through the tag rules, never split ad hoc. */
  @VarcharColumn('tags', 255)
  tags!: string;

  @Column({ name: 'snippet', type: 'text', transformer: textTransformer })
  snippet!: string;

  /** A JSON object as text; rows from other programs may hold anything here. */
  @Column({ name: 'metadata', type: 'text', nullable: true })
  metadata!: string | null;

  @FlagColumn('is_active', 1)
  isActive!: boolean;

  @UnsignedIntColumn('sorting')
  sorting!: number;
}
