import { Arg, Authorized, Ctx, FieldResolver, ID, Int, Mutation, Query, Resolver, Root, Subscription, type SubscribeResolverData } from 'type-graphql';
import type { StoredConversation } from './conversation.repository';
import { Role } from '../auth/roles';
import { checkFirst } from '../db/keyset';
import { type ConnectionView, toConnection } from '../graphql/connection';
import type { GraphQLContext } from '../graphql/context';
import { toAgentRun } from '../runs';
import { BadUserInputError, UnauthenticatedError } from '../shared/errors';
import { Conversation, ConversationConnection, ConversationFilter, ConversationMessage, SendMessageInput, SentMessage, StartConversationInput, toConversation, toConversationMessage } from './conversation.types';

function callerOf(context: GraphQLContext): NonNullable<GraphQLContext['caller']> {
  if (!context.caller) throw new UnauthenticatedError('Authentication required');
  return context.caller;
}

@Resolver(() => Conversation)
export class ConversationResolver {
  @Authorized(Role.VIEWER)
  @Query(() => Conversation, { nullable: true, description: 'A conversation of the caller (ADMIN: anyone\'s); null when there is none or it belongs to someone else.' })
  async conversation(@Ctx() context: GraphQLContext, @Arg('id', () => ID) id: string): Promise<Conversation | null> {
    const stored = await context.services.conversations.get(callerOf(context), id);
    return stored ? toConversation(stored) : null;
  }

  @Authorized(Role.VIEWER)
  @Query(() => ConversationConnection, { description: 'The caller\'s conversations (ADMIN: everyone\'s), newest activity first, a page of `first` (at most 500) after the cursor `after`.' })
  async conversationsConnection(
    @Ctx() context: GraphQLContext,
    @Arg('first', () => Int, { nullable: true, defaultValue: 20 }) first: number | null = 20,
    @Arg('after', () => String, { nullable: true }) after: string | null = null,
    @Arg('filter', () => ConversationFilter, { nullable: true }) filter: ConversationFilter | null = null,
  ): Promise<ConnectionView<Conversation>> {
    const page = await context.services.conversations.page(callerOf(context), filter ?? {}, checkFirst(first ?? 20), after);
    return toConnection(page, toConversation);
  }

  @FieldResolver(() => [ConversationMessage], { description: 'Stored messages with sequence > afterSequence, in order, at most `first` (≤ 500); every message is kept, also those a turn left out to fit the context window.' })
  async messages(
    @Root() conversation: Conversation,
    @Ctx() context: GraphQLContext,
    @Arg('afterSequence', () => Int, { nullable: true, defaultValue: -1 }) afterSequence: number | null = -1,
    @Arg('first', () => Int, { nullable: true, defaultValue: 100 }) first: number | null = 100,
  ): Promise<ConversationMessage[]> {
    if (afterSequence !== null && !Number.isInteger(afterSequence)) throw new BadUserInputError('afterSequence must be a whole number', 'afterSequence');
    const rows = await context.services.conversations.messages(conversation.sessionUid, afterSequence ?? -1, checkFirst(first ?? 100));
    return rows.map((row) => toConversationMessage(conversation.id, row));
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Conversation, { description: 'Opens a conversation on a configuration. Unknown configuration: NOT_FOUND; inactive, or a title over 255 characters: BAD_USER_INPUT.' })
  async startConversation(@Ctx() context: GraphQLContext, @Arg('input', () => StartConversationInput) input: StartConversationInput): Promise<Conversation> {
    return toConversation({ session: await context.services.conversations.start(callerOf(context), input), owner: null });
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => SentMessage, {
    description:
      'Sends one user message: stores it at the next sequence and starts the run that answers it (QUEUED; watch it with runTrace and runDeltas). The run sends the configuration\'s system prompt, the stored history (the oldest whole turns left out when it would not fit the context window; the first user message never) and this message; its END stores the answer. While a turn\'s run is going: CONFLICT with extensions.runId. Unknown or foreign conversation: NOT_FOUND; empty content, or a configuration no longer usable: BAD_USER_INPUT. A refusal writes nothing.',
  })
  async sendMessage(@Ctx() context: GraphQLContext, @Arg('input', () => SendMessageInput) input: SendMessageInput): Promise<SentMessage> {
    const sent = await context.services.conversations.send(callerOf(context), input, { trace: context.trace });
    return { conversation: toConversation(sent.conversation), userMessage: toConversationMessage(sent.conversation.session.uuid, sent.userMessage), run: toAgentRun(sent.run) };
  }

  @Subscription(() => Conversation, {
    description:
      'The conversation now, then again each time it changes: a turn taken (activeRunId set, the user message stored), its reply stored (activeRunId null again), on any instance; ends when the conversation is deleted. Select `messages(afterSequence)` to read what is new. Unknown or foreign: NOT_FOUND.',
    subscribe: ({ args, context }: SubscribeResolverData<unknown, { id: string }, GraphQLContext>) => context.services.conversations.watch(callerOf(context), args.id),
  })
  conversationUpdated(@Root() stored: StoredConversation, @Arg('id', () => ID) _id: string): Conversation {
    return toConversation(stored);
  }

  @Authorized(Role.EDITOR)
  @Mutation(() => Boolean, { description: 'Deletes a conversation and all its messages (as TYPO3 does: rows are removed). Unknown or foreign: NOT_FOUND.' })
  async deleteConversation(@Ctx() context: GraphQLContext, @Arg('id', () => ID) id: string): Promise<boolean> {
    await context.services.conversations.delete(callerOf(context), id);
    return true;
  }
}
