/**
 * Small helpers for the conversation suites: the GraphQL operations a chat
 * front end sends, and waits for a turn to end.
 */
import type { TestServer } from '../support/server';
import { RUN_FIELDS, type RunKit, type RunView } from '../runs/run-kit';

export const CONVERSATION_FIELDS = 'id title configurationIdentifier messageCount beUser lastActivity createdAt';
export const MESSAGE_FIELDS = 'id sequence role content model promptTokens completionTokens totalTokens droppedTurns createdAt';

export interface ConversationView {
  id: string;
  title: string;
  configurationIdentifier: string;
  messageCount: number;
  beUser: number;
  lastActivity: string;
  createdAt: string;
}

export interface MessageView {
  id: string;
  sequence: number;
  role: string;
  content: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  droppedTurns: number | null;
  createdAt: string;
}

export interface SentView {
  conversation: ConversationView;
  userMessage: MessageView;
  run: RunView;
}

export const START = `mutation($input: StartConversationInput!) { startConversation(input: $input) { ${CONVERSATION_FIELDS} } }`;
export const SEND = `mutation($input: SendMessageInput!) { sendMessage(input: $input) { conversation { ${CONVERSATION_FIELDS} } userMessage { ${MESSAGE_FIELDS} } run { ${RUN_FIELDS} } } }`;
export const GET = `query($id: ID!, $after: Int, $first: Int) { conversation(id: $id) { ${CONVERSATION_FIELDS} messages(afterSequence: $after, first: $first) { ${MESSAGE_FIELDS} } } }`;

export class ConversationKit {
  constructor(
    private readonly ts: () => TestServer,
    private readonly runs: RunKit,
  ) {}

  async start(input: { configuration?: string; title?: string }, token?: string): Promise<ConversationView> {
    return (await this.ts().ok<{ startConversation: ConversationView }>(START, { input }, token)).startConversation;
  }

  async send(conversationId: string, content: string, options: Record<string, unknown> = {}, token?: string): Promise<SentView> {
    return (await this.ts().ok<{ sendMessage: SentView }>(SEND, { input: { conversationId, content, ...options } }, token)).sendMessage;
  }

  /** Sends and waits for the turn's run to end. */
  async turn(conversationId: string, content: string, options: Record<string, unknown> = {}, token?: string): Promise<SentView & { ended: Awaited<ReturnType<RunKit['waitForRun']>> }> {
    const sent = await this.send(conversationId, content, options, token);
    return { ...sent, ended: await this.runs.waitForRun(sent.run.id) };
  }

  async get(id: string, token?: string, page: { after?: number; first?: number } = {}): Promise<(ConversationView & { messages: MessageView[] }) | null> {
    return (await this.ts().ok<{ conversation: (ConversationView & { messages: MessageView[] }) | null }>(GET, { id, ...page }, token)).conversation;
  }

  async messages(id: string, token?: string): Promise<MessageView[]> {
    const conversation = await this.get(id, token, { first: 500 });
    if (!conversation) throw new Error(`conversation ${id} not found`);
    return conversation.messages;
  }
}

/** A string of exactly `bytes` ASCII bytes. */
export function text(bytes: number, letter = 'a'): string {
  return letter.repeat(bytes);
}
