import { Column, Entity, Index } from 'typeorm';
import { Typo3SwitchColumn, Typo3UnsignedIntColumn, VarcharColumn, textTransformer } from '../db/columns';
import { Typo3Record } from '../db/typo3-record';

/** `tx_nrllm_promptsnippet`: a tagged prompt fragment, as nr_llm's ext_tables.sql defines it. */
@Entity({ name: 'tx_nrllm_promptsnippet' })
@Index('tx_nrllm_promptsnippet_parent', ['pid'])
@Index('tx_nrllm_promptsnippet_identifier', ['identifier'])
@Index('tx_nrllm_promptsnippet_active_sorted', ['isActive', 'sorting', 'name'])
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

  /** nr_llm's sensitivity ceiling; carried, not interpreted here. */
  @VarcharColumn('data_class', 32)
  dataClass!: string;

  /** The fragment; NULL in a row TYPO3 wrote without one reads as ''. */
  @Column({ name: 'snippet', type: 'text', nullable: true, transformer: textTransformer })
  snippet!: string;

  /** A JSON object as text; rows from other programs may hold anything here. */
  @Column({ name: 'metadata', type: 'text', nullable: true })
  metadata!: string | null;

  @Typo3SwitchColumn('is_active', 1)
  isActive!: boolean;

  @Typo3UnsignedIntColumn('sorting')
  sorting!: number;
}
