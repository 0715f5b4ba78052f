import { Entity, Index } from 'typeorm';
import { Typo3UidColumn, Typo3UnsignedIntColumn, VarcharColumn } from '../db/columns';

/**
 * `tx_nrllm_ai_session`: one conversation (nr_llm's ext_tables.sql, ADR-083).
 * There is no deleted or hidden column: a session is deleted physically,
 * with its messages.
 */
@Entity({ name: 'tx_nrllm_ai_session' })
@Index('tx_nrllm_ai_session_parent', ['pid'])
@Index('tx_nrllm_ai_session_session_uuid', ['uuid'], { unique: true })
@Index('tx_nrllm_ai_session_be_user', ['beUser', 'lastActivity'])
@Index('tx_nrllm_ai_session_inactivity', ['lastActivity'])
export class AiSessionEntity {
  @Typo3UidColumn({ unsigned: true })
  uid!: number;

  @Typo3UnsignedIntColumn('pid')
  pid!: number;

  @VarcharColumn('uuid', 36)
  uuid!: string;

  /** The TYPO3 backend user the conversation belongs to (0: none; see promptwire_conversation). */
  @Typo3UnsignedIntColumn('be_user')
  beUser!: number;

  /** '' means the installation's default configuration. */
  @VarcharColumn('configuration_identifier', 150)
  configurationIdentifier!: string;

  @VarcharColumn('title', 255)
  title!: string;

  /** A summary that only ever grows (the messages' sequences are the authority). */
  @Typo3UnsignedIntColumn('message_count')
  messageCount!: number;

  /** Unix seconds; the retention purge goes by it. */
  @Typo3UnsignedIntColumn('last_activity')
  lastActivity!: number;

  @Typo3UnsignedIntColumn('tstamp')
  tstamp!: number;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;
}
