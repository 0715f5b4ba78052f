/**
 * Tool calls as the service sees them, whatever the provider sent: arguments
 * always a JSON object serialised to a string, blank arguments as `{}`, an id
 * on every call. A call without a name or with arguments that are not a JSON
 * object is skipped with a logged warning (behaviour.md §9): one bad call must
 * not sink the others or the run.
 */
import { randomUUID } from 'node:crypto';

import type { ToolCall } from './types';

export interface ToolCallWarner {
  warn(obj: object, msg: string): void;
}

export interface RawToolCall {
  id?: string | null;
  name?: string | null;
  /** A JSON string (OpenAI), an object (Anthropic, Gemini, Ollama), or nothing. */
  arguments?: unknown;
  providerReplay?: string;
}

/**
 * A fresh id for providers that send none (Gemini, Ollama). Random rather than
 * positional: `call_0` in round 1 and `call_0` in round 2 would make the tool
 * results of the two rounds indistinguishable.
 */
export function newToolCallId(): string {
  return `call_${randomUUID().replace(/-/g, '')}`;
}

export function normaliseToolCall(
  raw: RawToolCall,
  context: { provider: string; logger: ToolCallWarner; newToolCallId: () => string },
): ToolCall | null {
  const name = typeof raw.name === 'string' ? raw.name.trim() : '';
  const id = typeof raw.id === 'string' && raw.id !== '' ? raw.id : context.newToolCallId();
  const args = serialiseArguments(raw.arguments);
  if (name === '' || args === null) {
    context.logger.warn(
      { provider: context.provider, toolCallId: id, toolName: name === '' ? null : name },
      name === '' ? 'skipped a tool call without a function name' : 'skipped a tool call whose arguments are not a JSON object',
    );
    return null;
  }
  const call: ToolCall = { id, type: 'function', function: { name, arguments: args } };
  if (raw.providerReplay !== undefined) call.providerReplay = raw.providerReplay;
  return call;
}

/** The usable calls of `raws`, in order (the unusable ones are skipped with a warning), each with an id of its own (`uniqueToolCallIds`). */
export function normaliseToolCalls(raws: readonly RawToolCall[], context: Parameters<typeof normaliseToolCall>[1]): ToolCall[] {
  const calls: ToolCall[] = [];
  for (const raw of raws) {
    const call = normaliseToolCall(raw, context);
    if (call !== null) calls.push(call);
  }
  return uniqueToolCallIds(calls);
}

/**
 * The calls of one answer, each with an id no other call of the answer has.
 * A provider that repeats an id (two calls `call_1`) keeps both calls: the
 * first keeps the id, a later one gets `<id>#2` (`#3`, …; the first suffix
 * no call of the answer has), the same on every reading of the same answer,
 * and remembers the provider's id in `wireId` for the wire formats that pair
 * results with calls by id. Calls are new objects; `calls` is not changed.
 */
export function uniqueToolCallIds(calls: readonly ToolCall[]): ToolCall[] {
  const taken = new Set(calls.map((call) => call.id));
  const assigned = new Set<string>();
  return calls.map((call) => {
    if (!assigned.has(call.id)) {
      assigned.add(call.id);
      return call;
    }
    let suffix = 2;
    while (taken.has(`${call.id}#${suffix}`) || assigned.has(`${call.id}#${suffix}`)) suffix += 1;
    const id = `${call.id}#${suffix}`;
    assigned.add(id);
    return { ...call, id, wireId: call.wireId ?? call.id };
  });
}

/**
 * A JSON-object string, or null when the arguments are unusable. A string the
 * provider sent is kept byte for byte once it is known to parse, so what the
 * trace shows is what the model wrote.
 */
export function serialiseArguments(value: unknown): string | null {
  if (value === undefined || value === null) return '{}';
  if (typeof value === 'string') {
    if (isBlank(value)) return '{}';
    let parsed: unknown;
    try {
      parsed = JSON.parse(value);
    } catch {
      return null;
    }
    return isJsonObject(parsed) ? value : null;
  }
  return isJsonObject(value) ? JSON.stringify(value) : null;
}

/** Arguments of a call from the history as an object, for providers that want one (Anthropic, Gemini, Ollama). */
export function argumentsAsObject(args: string): Record<string, unknown> {
  if (args.trim() === '') return {};
  try {
    const parsed: unknown = JSON.parse(args);
    return isJsonObject(parsed) ? parsed : {};
  } catch {
    return {};
  }
}

/** Like `value.trim() === ''` without copying the string; arguments are usually long and start with `{`. */
function isBlank(value: string): boolean {
  for (let index = 0; index < value.length; index++) {
    const code = value.charCodeAt(index);
    if (code !== 0x20 && code !== 0x0a && code !== 0x0d && code !== 0x09) return false;
  }
  return true;
}

export function isJsonObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
