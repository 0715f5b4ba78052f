import { MaxLength } from 'class-validator';
import { Field, Float, ID, InputType, Int, ObjectType } from 'type-graphql';
import { connectionTypes } from '../graphql/connection';
import { DateTimeScalar } from '../graphql/scalars';
import { AgentRun } from '../runs';
import { fromUnix } from '../shared/time';
import type { AiSessionMessageEntity } from './ai-session-message.entity';
import type { StoredConversation } from './conversation.repository';
import { MAX_TITLE_LENGTH, messageIdOf } from './conversation-rules';

@ObjectType({ description: 'A multi-turn conversation (nr_llm\'s tx_nrllm_ai_session): its messages are the authority; every turn is a run.' })
export class Conversation {
  /** The session's uid, for field resolvers. */
  sessionUid!: number;
  @Field(() => ID, { description: 'The session\'s uuid (v4).' }) id!: string;
  @Field() title!: string;
  @Field({ description: 'The configuration the conversation runs on; "" for the installation\'s default, resolved on every turn.' }) configurationIdentifier!: string;
  @Field(() => Int, { description: 'Messages stored (a summary that only grows; the messages are the authority).' }) messageCount!: number;
  @Field(() => Int, { description: 'The TYPO3 backend user the conversation belongs to (0: none; it then belongs to the token that opened it).' }) beUser!: number;
  @Field(() => DateTimeScalar) lastActivity!: Date;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => ID, { nullable: true, description: 'The run of the turn under way (watch it with runTrace); null when the conversation is idle and takes a message.' }) activeRunId!: string | null;
}

@ObjectType({ simpleResolvers: true, description: 'One stored message of a conversation (tx_nrllm_ai_session_message). The system prompt is never stored.' })
export class ConversationMessage {
  @Field(() => ID, { description: '`<conversation id>:<sequence>`, stable: the id a chat front end keys the message by.' }) id!: string;
  @Field(() => Int, { description: 'From 0, per conversation, without gaps unless rows were deleted by hand.' }) sequence!: number;
  @Field({ description: '`user` or `assistant`.' }) role!: string;
  @Field() content!: string;
  @Field({ description: 'The model the provider reported (assistant messages); "" on user messages.' }) model!: string;
  @Field(() => Int) promptTokens!: number;
  @Field(() => Int) completionTokens!: number;
  @Field(() => Int) totalTokens!: number;
  @Field(() => Int, { nullable: true, description: 'User messages: older turns left out of what was sent for this turn so it would fit the context window (0: none); null: no fit was made (the default configuration, or a row from before fitting).' })
  droppedTurns!: number | null;
  @Field(() => DateTimeScalar) createdAt!: Date;
}

@ObjectType({ description: 'A message sent: the stored user message and the run that answers it (watch it with runTrace).' })
export class SentMessage {
  @Field(() => Conversation) conversation!: Conversation;
  @Field(() => ConversationMessage) userMessage!: ConversationMessage;
  @Field(() => AgentRun) run!: AgentRun;
}

export const { ConnectionType: ConversationConnection } = connectionTypes(Conversation, 'Conversation', 'A page of conversations, newest activity first, with cursors.');

@InputType()
export class StartConversationInput {
  @Field(() => String, { nullable: true, description: 'Configuration identifier; absent or "": the installation\'s default, resolved on every turn.' }) configuration?: string | null;
  @MaxLength(10_000)
  @Field(() => String, { nullable: true, description: `At most ${MAX_TITLE_LENGTH} characters.` })
  title?: string | null;
}

@InputType({ description: 'One user message; the run options apply to this turn only.' })
export class SendMessageInput {
  @Field(() => ID) conversationId!: string;
  @Field({ description: 'The message (not empty, at most 1 MB).' }) content!: string;
  @Field(() => [String], { nullable: true, description: 'Tools this turn may call; absent or []: none (a conversation is plain chat). Only the final answer is stored.' }) tools?: string[] | null;
  @Field(() => [String], { nullable: true, description: 'Tools whose calls wait for a person\'s approval in this turn.' }) approvalRequired?: string[] | null;
  @Field(() => Int, { nullable: true }) approvalTimeoutSeconds?: number | null;
  @Field(() => Int, { nullable: true, description: 'Default 5, clamped to 1..20.' }) maxRounds?: number | null;
  @Field(() => Int, { nullable: true }) maxTokens?: number | null;
  @Field(() => Float, { nullable: true }) temperature?: number | null;
  @Field(() => Boolean, { nullable: true, defaultValue: true, description: 'Stream model output and publish it on runDeltas.' }) stream?: boolean | null;
  @Field(() => Int, { nullable: true }) maxTotalTokens?: number | null;
  @Field(() => Float, { nullable: true }) maxCost?: number | null;
}

@InputType({ description: 'Filters of conversationsConnection; given ones combine with AND.' })
export class ConversationFilter {
  @Field(() => String, { nullable: true, description: 'Conversations on this configuration identifier ("" for the default).' }) configuration?: string | null;
  @Field(() => String, { nullable: true, description: 'Text found in the title, case-insensitively.' }) search?: string | null;
}

export function toConversation({ session, owner }: StoredConversation): Conversation {
  return Object.assign(new Conversation(), {
    sessionUid: session.uid,
    id: session.uuid,
    title: session.title,
    configurationIdentifier: session.configurationIdentifier,
    messageCount: session.messageCount,
    beUser: session.beUser,
    lastActivity: fromUnix(session.lastActivity),
    createdAt: fromUnix(session.crdate),
    activeRunId: owner?.activeRun ? owner.activeRun : null,
  });
}

export function toConversationMessage(sessionUuid: string, row: AiSessionMessageEntity): ConversationMessage {
  return {
    id: messageIdOf(sessionUuid, row.sequence),
    sequence: row.sequence,
    role: row.role,
    content: row.content,
    model: row.model,
    promptTokens: row.promptTokens,
    completionTokens: row.completionTokens,
    totalTokens: row.totalTokens,
    droppedTurns: row.droppedTurns,
    createdAt: fromUnix(row.crdate),
  };
}
