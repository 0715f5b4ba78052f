/**
 * The chat page's side of the useChat endpoint (`/api/chat`): a message sent
 * as `useChat` sends it, and the UI message stream read as it arrives. Only
 * the chunks the page shows are read (the reply's id, its text, an error).
 */
import { readToken } from '../shared/session';

export const CHAT_PATH = '/api/chat';

/** The reply as streamed so far. */
export interface StreamedReply {
  /** `<conversation id>:<sequence>`: the id the stored reply will have. */
  messageId: string;
  text: string;
  state: 'streaming' | 'done' | 'paused' | 'error';
  error: string | null;
}

/** The server refused (busy, unknown conversation, bad token …): its own message. */
export class ChatRefusal extends Error {
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message);
    this.name = 'ChatRefusal';
  }
}

function headers(json: boolean): Record<string, string> {
  const token = readToken();
  return { ...(json ? { 'content-type': 'application/json' } : {}), ...(token ? { authorization: `Bearer ${token}` } : {}) };
}

async function refusalOf(response: Response): Promise<ChatRefusal> {
  try {
    const body = (await response.json()) as { errors?: { message: string; extensions?: { code?: string } }[] };
    const first = body.errors?.[0];
    if (first) return new ChatRefusal(first.message, first.extensions?.code ?? null);
  } catch {
    // Not JSON: the status says it.
  }
  return new ChatRefusal(`The server answered ${response.status}.`, null);
}

/** A stream being read: `done` settles when it ends. */
export interface ReadingReply {
  done: Promise<void>;
}

/** Sends one message; resolves once the server took it (the stream is then read into `onReply`), rejects with its refusal. */
export async function sendChatMessage(conversationId: string, text: string, onReply: (reply: StreamedReply) => void, signal?: AbortSignal): Promise<ReadingReply> {
  const message = { id: `console-${Date.now()}-${Math.random().toString(36).slice(2)}`, role: 'user', parts: [{ type: 'text', text }] };
  const response = await fetch(CHAT_PATH, { method: 'POST', headers: headers(true), body: JSON.stringify({ id: conversationId, messages: [message], trigger: 'submit-message' }), signal });
  if (!response.ok) throw await refusalOf(response);
  return { done: readReply(response, onReply) };
}

/** The turn under way, replayed from its start (null when the conversation is idle). */
export async function resumeChatStream(conversationId: string, onReply: (reply: StreamedReply) => void, signal?: AbortSignal): Promise<ReadingReply | null> {
  const response = await fetch(`${CHAT_PATH}/${encodeURIComponent(conversationId)}/stream`, { headers: headers(false), signal });
  if (response.status === 204) return null;
  if (!response.ok) throw await refusalOf(response);
  return { done: readReply(response, onReply) };
}

async function readReply(response: Response, onReply: (reply: StreamedReply) => void): Promise<void> {
  const reply: StreamedReply = { messageId: '', text: '', state: 'streaming', error: null };
  const reader = response.body!.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    let end: number;
    while ((end = buffer.indexOf('\n\n')) >= 0) {
      const event = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      for (const line of event.split('\n')) {
        if (!line.startsWith('data: ')) continue;
        const data = line.slice(6);
        if (data === '[DONE]') continue;
        apply(reply, JSON.parse(data) as { type: string; [field: string]: unknown });
        onReply({ ...reply });
      }
    }
  }
  if (reply.state === 'streaming') {
    reply.state = 'done';
    onReply({ ...reply });
  }
}

function apply(reply: StreamedReply, chunk: { type: string; [field: string]: unknown }): void {
  switch (chunk.type) {
    case 'start':
      reply.messageId = String(chunk.messageId ?? '');
      break;
    case 'text-delta':
      reply.text += String(chunk.delta ?? '');
      break;
    case 'tool-approval-request':
      reply.state = 'paused';
      break;
    case 'error':
      reply.state = 'error';
      reply.error = String(chunk.errorText ?? 'The turn failed.');
      break;
    case 'finish':
      if (reply.state === 'streaming') reply.state = 'done';
      break;
    default:
      break;
  }
}
