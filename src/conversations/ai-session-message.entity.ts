import { Column, Entity, Index } from 'typeorm';
import { integerTransformer, MediumTextColumn, textTransformer, Typo3UidColumn, Typo3UnsignedIntColumn, VarcharColumn } from '../db/columns';

/** A nullable count: NULL stays null (no fit was evaluated), anything else reads as an integer. */
const nullableCount = {
  to: (value: number | null | undefined) => value,
  from: (value: unknown) => (value === null || value === undefined ? null : integerTransformer.from(value) as number),
};

/**
 * `tx_nrllm_ai_session_message`: one turn of a conversation, numbered per
 * session from 0 (nr_llm's ext_tables.sql, ADR-083 and ADR-121). The
 * unique key on (session, sequence) decides which of two concurrent turns
 * owns a slot. The system prompt is never stored.
 */
@Entity({ name: 'tx_nrllm_ai_session_message' })
@Index('tx_nrllm_ai_session_message_parent', ['pid'])
@Index('tx_nrllm_ai_session_message_session_sequence', ['session', 'sequence'], { unique: true })
export class AiSessionMessageEntity {
  @Typo3UidColumn({ unsigned: true })
  uid!: number;

  @Typo3UnsignedIntColumn('pid')
  pid!: number;

  @Typo3UnsignedIntColumn('session')
  session!: number;

  @Typo3UnsignedIntColumn('sequence')
  sequence!: number;

  /** `user` or `assistant`. */
  @VarcharColumn('role', 32)
  role!: string;

  @MediumTextColumn({ name: 'content', nullable: true, transformer: textTransformer })
  content!: string;

  /** The model the provider reported (assistant rows; '' on user rows). */
  @VarcharColumn('model', 128)
  model!: string;

  @Typo3UnsignedIntColumn('prompt_tokens')
  promptTokens!: number;

  @Typo3UnsignedIntColumn('completion_tokens')
  completionTokens!: number;

  @Typo3UnsignedIntColumn('total_tokens')
  totalTokens!: number;

  /** Older turns left out of what was sent for this turn; NULL: no fit was evaluated. */
  @Column({ name: 'dropped_turns', type: 'int', width: 11, unsigned: true, nullable: true, default: null, transformer: nullableCount })
  droppedTurns!: number | null;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;
}
