/**
 * The conversation rules of nr_llm (ADR-083, ADR-121), as pure functions:
 * what input is accepted, who may see a session, how a stored message is
 * replayed, what reply a finished turn stores, how sequences are allocated,
 * and when a session is old enough to purge.
 */
import type { Role } from '../auth/roles';
import type { ChatMessage } from '../providers/adapters/types';

export type MessageRole = 'user' | 'assistant';

/** `tx_nrllm_ai_session.title` is varchar(255). */
export const MAX_TITLE_LENGTH = 255;
/** The largest message a turn takes, as for a run's prompt. */
export const MAX_MESSAGE_BYTES = 1_000_000;
/** Tries to take the next sequence before a turn gives up (nr_llm's). */
export const SEQUENCE_ATTEMPTS = 5;
/** nr_llm's privacy window for conversations: 30 days by default. */
export const DEFAULT_RETENTION_DAYS = 30;

export type Check = { ok: true } | { ok: false; message: string };

export function checkTitle(title: string): Check {
  if ([...title].length > MAX_TITLE_LENGTH) return { ok: false, message: `title must be at most ${MAX_TITLE_LENGTH} characters` };
  return { ok: true };
}

export function checkMessageContent(content: string): Check {
  if (content.trim() === '') return { ok: false, message: 'content is required: a message cannot be empty' };
  if (Buffer.byteLength(content, 'utf8') > MAX_MESSAGE_BYTES) return { ok: false, message: `content must be at most ${MAX_MESSAGE_BYTES} bytes (UTF-8)` };
  return { ok: true };
}

/** Who asks: a token's role, its uid and the backend user it acts as (0: none). */
export interface ConversationActor {
  role: Role;
  tokenUid: number;
  beUser: number;
}

/**
 * Whether `actor` may read and continue a session: an ADMIN always; a
 * session of a backend user belongs to every token acting as that user (as
 * in TYPO3); a session without one belongs to the token that opened it.
 * Anyone else is told the session does not exist.
 */
export function mayAccess(actor: ConversationActor, session: { beUser: number }, ownerToken: number | null): boolean {
  if (actor.role === 'ADMIN') return true;
  if (session.beUser > 0) return actor.beUser === session.beUser;
  return ownerToken !== null && ownerToken > 0 && ownerToken === actor.tokenUid;
}

/** The token a new session records as its owner: only a token that acts as no backend user needs one. */
export function ownerTokenOf(actor: ConversationActor): number {
  return actor.beUser > 0 ? 0 : actor.tokenUid;
}

/** A message's id as a chat front end sees it: the session's uuid and the message's sequence. */
export function messageIdOf(sessionUuid: string, sequence: number): string {
  return `${sessionUuid}:${sequence}`;
}

/**
 * A stored message as the model gets it again: `{role, content}` (the
 * history is the session's rows in sequence order, each replayed). A row
 * with any other role (written by hand) is left out: null.
 */
export function replayedMessage(row: { role: string; content: string }): ChatMessage | null {
  if (row.role === 'user') return { role: 'user', content: row.content };
  if (row.role === 'assistant') return { role: 'assistant', content: row.content };
  return null;
}

/** The text a turn fails with when its session's configuration can no longer be used (nr_llm's). */
export function unusableConfigurationMessage(identifier: string, reason: string): string {
  return `The configuration "${identifier}" this session was opened with is no longer usable: ${reason}`;
}

/**
 * What a user row records as dropped turns: NULL for a session on the
 * default configuration (nr_llm runs no fit there), otherwise the first
 * call's fit (0: evaluated, nothing dropped).
 */
export function droppedTurnsToStore(configurationIdentifier: string, droppedTurns: number): number | null {
  return configurationIdentifier === '' ? null : droppedTurns;
}

/** The end of a turn's run, as far as the reply goes. */
export interface TurnEnd {
  status: string;
  finalContent: string | null;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  model?: string | null;
}

/**
 * The assistant row a finished turn stores: only a completed run with an
 * answer has one (a failed or cancelled turn leaves its user row alone, as
 * nr_llm's does when the provider call throws). Token counts are clamped to
 * the unsigned int columns.
 */
export function replyOf(end: TurnEnd, fallbackModel: string): { content: string; model: string; promptTokens: number; completionTokens: number; totalTokens: number } | null {
  if (end.status !== 'COMPLETED' || end.finalContent === null) return null;
  return {
    content: end.finalContent,
    model: (end.model || fallbackModel).slice(0, 128),
    promptTokens: unsignedInt(end.promptTokens),
    completionTokens: unsignedInt(end.completionTokens),
    totalTokens: unsignedInt(end.totalTokens),
  };
}

function unsignedInt(value: number): number {
  if (!Number.isFinite(value) || value < 0) return 0;
  return Math.min(Math.trunc(value), 4_294_967_295);
}

/** 1 … SEQUENCE_ATTEMPTS. */
export function nextSequenceAttempts(): number[] {
  return Array.from({ length: SEQUENCE_ATTEMPTS }, (_, index) => index + 1);
}

export function sequenceAllocationFailed(sessionUid: number): Error {
  return new Error(`Could not allocate a message sequence for session ${sessionUid} after ${SEQUENCE_ATTEMPTS} attempts.`);
}

/** A driver error (possibly wrapped by TypeORM) saying an insert hit a unique key. */
export function isUniqueViolation(error: unknown): boolean {
  const candidate = error as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = candidate?.driverError?.code ?? candidate?.code;
  return code === 'ER_DUP_ENTRY' || code === 'SQLITE_CONSTRAINT_UNIQUE' || code === 'SQLITE_CONSTRAINT_PRIMARYKEY';
}

/** Sessions idle since before this moment (unix seconds) are purged. */
export function retentionCutoff(nowSeconds: number, retentionDays: number): number {
  return nowSeconds - retentionDays * 86_400;
}

/** The run options a chat client may set in its request body (beside `id` and `messages`). */
export interface ChatTurnOptions {
  tools?: string[];
  approvalRequired?: string[];
}

/** A decision a chat client sent back on a tool call waiting for approval (`addToolApprovalResponse`). */
export interface ChatToolDecision {
  toolCallId: string;
  approve: boolean;
  reason?: string;
}

/**
 * A `useChat` request as this service reads it: a new user message for the
 * conversation, or the decisions on the tool calls its turn waits on.
 */
export type ChatRequestCheck =
  | { ok: true; kind: 'message'; conversationId: string; content: string; options: ChatTurnOptions }
  | { ok: true; kind: 'decisions'; conversationId: string; decisions: ChatToolDecision[] }
  | { ok: false; message: string };

/** How many tool names a chat request may list, and how long each may be. */
const MAX_CHAT_TOOLS = 64;
const MAX_TOOL_NAME_LENGTH = 128;

/**
 * Reads the body `useChat` posts (`{id, messages, trigger?, messageId?}`,
 * messages as the AI SDK's UI messages, plus the client's `body` fields):
 * `id` names the conversation. When the last message is the assistant's
 * with tool calls answered by `addToolApprovalResponse` (state
 * `approval-responded`), those answers are the request; otherwise only the
 * last user message is taken (the text of its text parts), and `tools` and
 * `approvalRequired` of the body set the turn's tools as `sendMessage`'s do.
 * The client's copy of the history is ignored, since the stored messages are
 * the authority. A regenerate is refused: it would store the question twice.
 */
export function readChatRequest(body: unknown): ChatRequestCheck {
  if (typeof body !== 'object' || body === null || Array.isArray(body)) return { ok: false, message: 'The body must be a JSON object: {id, messages}.' };
  const { id, messages, trigger, tools, approvalRequired } = body as { id?: unknown; messages?: unknown; trigger?: unknown; tools?: unknown; approvalRequired?: unknown };
  if (typeof id !== 'string' || id.trim() === '') return { ok: false, message: 'id must name the conversation (its id, from startConversation).' };
  if (trigger !== undefined && trigger !== 'submit-message') {
    return { ok: false, message: `trigger "${String(trigger)}" is not supported: send a new message instead (the stored messages are never rewritten).` };
  }
  if (!Array.isArray(messages) || messages.length === 0) return { ok: false, message: 'messages must be a non-empty list ending with the new user message.' };
  const final = messages[messages.length - 1] as { role?: unknown; parts?: unknown } | null;
  if (typeof final === 'object' && final !== null && final.role === 'assistant') {
    const decisions = toolDecisionsOf(final.parts);
    if (decisions.length > 0) return { ok: true, kind: 'decisions', conversationId: id, decisions };
  }
  const options: ChatTurnOptions = {};
  for (const [name, value] of [['tools', tools], ['approvalRequired', approvalRequired]] as const) {
    if (value === undefined || value === null) continue;
    if (!Array.isArray(value) || value.length > MAX_CHAT_TOOLS || !value.every((entry) => typeof entry === 'string' && entry !== '' && entry.length <= MAX_TOOL_NAME_LENGTH)) {
      return { ok: false, message: `${name} must be a list of at most ${MAX_CHAT_TOOLS} tool names (see the tools query).` };
    }
    options[name] = value as string[];
  }
  const last = [...messages].reverse().find((message): message is { role: 'user'; parts?: unknown; content?: unknown } => typeof message === 'object' && message !== null && (message as { role?: unknown }).role === 'user');
  if (!last) return { ok: false, message: 'messages holds no user message.' };
  const parts = Array.isArray(last.parts) ? last.parts : [];
  const texts = parts.filter((part): part is { type: 'text'; text: string } => typeof part === 'object' && part !== null && (part as { type?: unknown }).type === 'text' && typeof (part as { text?: unknown }).text === 'string');
  // AI SDK 4's messages carried their text in `content`.
  const content = texts.length > 0 ? texts.map((part) => part.text).join('\n') : typeof last.content === 'string' ? last.content : '';
  const check = checkMessageContent(content);
  if (!check.ok) return check;
  return { ok: true, kind: 'message', conversationId: id, content, options };
}

/** The answered approvals among an assistant message's tool parts (`tool-<name>` or `dynamic-tool`, state `approval-responded`). */
function toolDecisionsOf(parts: unknown): ChatToolDecision[] {
  if (!Array.isArray(parts)) return [];
  const decisions: ChatToolDecision[] = [];
  for (const part of parts as { type?: unknown; state?: unknown; toolCallId?: unknown; approval?: { approved?: unknown; reason?: unknown } }[]) {
    if (typeof part !== 'object' || part === null || typeof part.type !== 'string') continue;
    if (part.type !== 'dynamic-tool' && !part.type.startsWith('tool-')) continue;
    if (part.state !== 'approval-responded' || typeof part.toolCallId !== 'string' || typeof part.approval?.approved !== 'boolean') continue;
    const reason = typeof part.approval.reason === 'string' && part.approval.reason !== '' ? part.approval.reason : undefined;
    decisions.push({ toolCallId: part.toolCallId, approve: part.approval.approved, ...(reason !== undefined ? { reason } : {}) });
  }
  return decisions;
}
