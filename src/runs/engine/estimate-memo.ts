/**
 * Remembered parts of the token estimate (the performance trick behind
 * `estimateTokens`, in this one module).
 *
 * A run estimates its whole transcript before every call, and the context
 * fitting measures it again for every turn it drops, so without this the
 * estimate decodes and re-encodes every tool call's arguments, and encodes
 * the tool schemas, once per round: work and garbage that grow with the
 * square of a run's length, for figures that never change. The rules stay in
 * `context-window.ts` (`toolCallArgumentBytes`, `toolSchemaJson`); this module
 * only keeps their results:
 *
 * - argument bytes by the arguments' text (a string key, so nothing can change
 *   behind the memo), at most `ARGUMENT_ENTRIES` texts, forgotten all at once
 *   when full (long texts are not kept: they are measured every time);
 * - a tool schema's bytes by its `ToolDefinition` object. Tool definitions
 *   are values: the registry and the MCP discovery make new ones, never change
 *   one in place;
 * - a message's share of the estimate by its `ChatMessage` object. Messages
 *   are values too (nothing changes a message once it is made): a run's
 *   first-call fit, its loop's fit and every later round measure the same
 *   objects, and a conversation's history keeps its message objects from
 *   turn to turn (history-cache), so a long conversation is measured once,
 *   not on every turn.
 */
import type { ChatMessage, ToolDefinition } from '../../providers/adapters/types';

/** Texts whose argument bytes are kept; a run's calls are far fewer. */
export const ARGUMENT_ENTRIES = 4096;
/** Longer argument texts are not kept (the memo must stay small). */
export const ARGUMENT_MAX_CHARS = 16_384;

const argumentBytes = new Map<string, number>();
const schemaBytes = new WeakMap<ToolDefinition, number | null>();

/** `measure(text)`, remembered by the text. */
export function rememberedArgumentBytes(text: string, measure: (text: string) => number): number {
  const known = argumentBytes.get(text);
  if (known !== undefined) return known;
  const bytes = measure(text);
  if (text.length <= ARGUMENT_MAX_CHARS) {
    if (argumentBytes.size >= ARGUMENT_ENTRIES) argumentBytes.clear();
    argumentBytes.set(text, bytes);
  }
  return bytes;
}

/** `measure`, remembered by the message object (one memo per measure); a result is shared, never to be changed. */
export function rememberedByMessage<T extends object>(measure: (message: ChatMessage) => T): (message: ChatMessage) => Readonly<T> {
  const known = new WeakMap<ChatMessage, T>();
  return (message) => {
    let share = known.get(message);
    if (share === undefined) known.set(message, (share = measure(message)));
    return share;
  };
}

/** `measure(tool)`, remembered by the tool definition (null: it cannot be encoded). */
export function rememberedSchemaBytes(tool: ToolDefinition, measure: (tool: ToolDefinition) => number | null): number | null {
  if (schemaBytes.has(tool)) return schemaBytes.get(tool)!;
  const bytes = measure(tool);
  schemaBytes.set(tool, bytes);
  return bytes;
}
