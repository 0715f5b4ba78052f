import { Entity, Index, PrimaryColumn } from 'typeorm';
import { UnsignedIntColumn, VarcharColumn } from '../db/columns';

/**
 * `promptwire_conversation`: what this service keeps about a session beside
 * TYPO3's row. `owner_token`: the API token that opened it when that token
 * acts as no backend user (a session with be_user > 0 belongs to that user,
 * whichever token acts as them). `active_run`: the run of the turn under
 * way ('' when idle), which a second message is refused with; claiming it
 * is how a turn takes the conversation.
 */
@Entity({ name: 'promptwire_conversation' })
@Index('promptwire_conversation_active_run_uid', ['activeRunUid'])
export class ConversationOwnerEntity {
  @PrimaryColumn({ name: 'session_uid', type: 'int', unsigned: true })
  sessionUid!: number;

  @UnsignedIntColumn('owner_token')
  ownerToken!: number;

  @VarcharColumn('active_run', 36)
  activeRun!: string;

  @UnsignedIntColumn('active_run_uid')
  activeRunUid!: number;
}
