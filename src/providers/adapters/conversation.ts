/**
 * Reading the service's OpenAI-shaped history for providers that shape it
 * differently (Anthropic, Gemini, Ollama).
 */
import type { ChatMessage, ToolCall } from './types';

export type NonSystemMessage = Exclude<ChatMessage, { role: 'system' }>;

/**
 * Lifts every system message out of the history. Anthropic and Gemini take
 * one top-level system text, not system turns. Several system messages are
 * normal here — the configuration's prompt plus one per forced snippet
 * (behaviour.md §8) — so they are joined with a blank line, in order, and none
 * is dropped. A system message in the middle of the history is lifted too:
 * neither provider has a place for it between turns.
 */
export function liftSystemMessages(messages: readonly ChatMessage[]): { system: string | null; turns: NonSystemMessage[] } {
  const systemTexts: string[] = [];
  const turns: NonSystemMessage[] = [];
  for (const message of messages) {
    if (message.role === 'system') {
      if (message.content !== '') systemTexts.push(message.content);
    } else {
      turns.push(message);
    }
  }
  return { system: systemTexts.length === 0 ? null : systemTexts.join('\n\n'), turns };
}

/**
 * Tool names by call id, from the assistant turns. Gemini's functionResponse
 * and Ollama's tool message are matched by function name, while the service's
 * tool message only carries the call id.
 */
export function toolNamesById(messages: readonly ChatMessage[]): Map<string, string> {
  const names = new Map<string, string>();
  for (const message of messages) {
    if (message.role === 'assistant') {
      for (const call of message.tool_calls ?? []) names.set(call.id, call.function.name);
    }
  }
  return names;
}

/**
 * The ids to send a provider for the calls and results of `messages`, by the
 * service's call id: the provider's own id where the service gave a call
 * another one (`ToolCall.wireId`); ids not in the map are sent as they are.
 */
export function wireToolCallIds(messages: readonly ChatMessage[]): Map<string, string> {
  const ids = new Map<string, string>();
  for (const message of messages) {
    if (message.role === 'assistant') {
      for (const call of message.tool_calls ?? []) if (call.wireId !== undefined) ids.set(call.id, call.wireId);
    }
  }
  return ids;
}

/** The id a call or a result goes to the provider with (see `wireToolCallIds`). */
export function wireToolCallId(ids: ReadonlyMap<string, string>, id: string): string {
  return ids.get(id) ?? id;
}

export type ReplayFamily = 'anthropic' | 'gemini';

export function encodeReplay(family: ReplayFamily, payload: string): string {
  return `${family}:${payload}`;
}

/** The replay state a call carries for this family; state written by another family is ignored. */
export function decodeReplay(call: ToolCall, family: ReplayFamily): string | null {
  const replay = call.providerReplay;
  const prefix = `${family}:`;
  return typeof replay === 'string' && replay.startsWith(prefix) ? replay.slice(prefix.length) : null;
}
