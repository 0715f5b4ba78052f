/**
 * Fitting the agent loop's transcript into the model's context window
 * (behaviour.md §7).
 *
 * Pure functions: no tokenizer, no I/O. The estimate is a content-aware byte
 * heuristic that errs high, and a calibration factor grown from the prompt
 * token counts providers report keeps it from under-counting. Pruning drops
 * the oldest whole turns (an assistant message with its tool results), so the
 * pairing between a tool call and its result that providers insist on is never
 * broken.
 */

import type { ChatMessage, ToolDefinition } from '../../providers/adapters/types';

/** Tokens charged per message for the role and wrapper tokens a provider adds. */
export const MESSAGE_OVERHEAD_TOKENS = 8;
/** Tokens charged per tool call on an assistant message. */
export const TOOL_CALL_OVERHEAD_TOKENS = 12;
/** UTF-8 bytes per token of ordinary text. */
export const PROSE_BYTES_PER_TOKEN = 3.5;
/** UTF-8 bytes per token of tool results and JSON (arguments, tool schemas, call ids): they tokenize denser. */
export const DENSE_BYTES_PER_TOKEN = 2.5;
/** The window assumed when the model's context length is unknown (0). */
export const UNKNOWN_CONTEXT_WINDOW = 8192;
/** Share of the window held back on top of the response reserve. */
export const SAFETY_FRACTION = 0.03;
/** The smallest response reserve when neither the call nor the model names one. */
export const MIN_RESERVE_TOKENS = 1000;
/** Share of the window reserved for the response when neither the call nor the model names one. */
export const RESERVE_FRACTION = 0.02;
/** The calibration factor a run starts with: the raw estimate as it is. */
export const INITIAL_CALIBRATION = 1;

/** The budget breakdown of §7, all in tokens. */
export interface ContextBudget {
  /** The model's context length, or 8192 when unknown. */
  window: number;
  /** Tokens held back for the response. */
  reserve: number;
  /** `ceil(window × 0.03)`. */
  safety: number;
  /** `window − reserve − safety`; ≤ 0 means "send as is". */
  budget: number;
}

export interface ContextBudgetInput {
  /** `tx_nrllm_model.context_length`; 0 (or less) = unknown. */
  contextLength: number;
  /** The call's `max_tokens`; absent or ≤ 0 = not set. */
  callMaxTokens?: number | null;
  /** `tx_nrllm_model.max_output_tokens`; 0 (or less) = unknown. */
  modelMaxOutputTokens?: number | null;
}

/**
 * The window, reserve, safety margin and budget for one call. The unknown
 * model gives 8192 − 1000 − 246 = 6946.
 */
export function contextBudget(input: ContextBudgetInput): ContextBudget {
  const window = input.contextLength > 0 ? input.contextLength : UNKNOWN_CONTEXT_WINDOW;
  const callMaxTokens = input.callMaxTokens ?? 0;
  const modelMaxOutputTokens = input.modelMaxOutputTokens ?? 0;
  let reserve: number;
  if (callMaxTokens > 0) {
    reserve = callMaxTokens;
  } else if (modelMaxOutputTokens > 0) {
    reserve = modelMaxOutputTokens;
  } else {
    reserve = Math.max(MIN_RESERVE_TOKENS, Math.ceil(window * RESERVE_FRACTION));
  }
  const safety = Math.ceil(window * SAFETY_FRACTION);
  return { window, reserve, safety, budget: window - reserve - safety };
}

function utf8Bytes(text: string): number {
  return Buffer.byteLength(text, 'utf8');
}

/**
 * The raw (uncalibrated) token estimate of sending `messages` with `tools`
 * offered.
 *
 * 8 tokens per message and 12 per tool call; then the UTF-8 bytes of each
 * content class are summed and divided, each sum rounded up on its own:
 * - dense (÷ 2.5): tool-message content, tool call arguments, call ids (on
 *   the assistant's calls and on tool messages), and the tool schemas offered
 *   (`JSON.stringify` of the definitions; nothing when no tool is offered);
 * - prose (÷ 3.5): every other message content (system prompt, snippet
 *   messages, the user message with its skill block, assistant text) and the
 *   names of requested tool calls.
 */
export function estimateTokens(messages: readonly ChatMessage[], tools: readonly ToolDefinition[] = []): number {
  let overhead = 0;
  let proseBytes = 0;
  let denseBytes = 0;
  for (const message of messages) {
    overhead += MESSAGE_OVERHEAD_TOKENS;
    switch (message.role) {
      case 'system':
      case 'user':
        proseBytes += utf8Bytes(message.content);
        break;
      case 'assistant':
        proseBytes += utf8Bytes(message.content ?? '');
        for (const call of message.tool_calls ?? []) {
          overhead += TOOL_CALL_OVERHEAD_TOKENS;
          proseBytes += utf8Bytes(call.function.name);
          denseBytes += utf8Bytes(call.function.arguments);
          denseBytes += utf8Bytes(call.id);
        }
        break;
      case 'tool':
        denseBytes += utf8Bytes(message.content);
        denseBytes += utf8Bytes(message.tool_call_id);
        break;
      default: {
        const unreachable: never = message;
        throw new Error(`Unknown message role in ${JSON.stringify(unreachable)}`);
      }
    }
  }
  if (tools.length > 0) {
    denseBytes += utf8Bytes(JSON.stringify(tools));
  }
  return overhead + Math.ceil(proseBytes / PROSE_BYTES_PER_TOKEN) + Math.ceil(denseBytes / DENSE_BYTES_PER_TOKEN);
}

/** The calibrated estimate: the raw estimate scaled by a factor of at least 1, rounded up. */
export function calibratedEstimate(rawEstimate: number, calibration: number): number {
  return Math.ceil(rawEstimate * Math.max(INITIAL_CALIBRATION, calibration));
}

/**
 * The calibration factor after a real call: the ratio of the prompt tokens
 * the provider reported to the raw estimate of what was sent, if that is
 * larger than the current factor. It only ever grows, so the estimate never
 * drifts below what providers have shown to be real. A call that reported no
 * prompt tokens (or an empty estimate) leaves the factor as it is.
 */
export function nextCalibration(current: number, reportedPromptTokens: number, rawEstimate: number): number {
  if (!(rawEstimate > 0) || !(reportedPromptTokens > 0)) {
    return current;
  }
  return Math.max(current, reportedPromptTokens / rawEstimate);
}

export interface ContextFit {
  /** What to send: a copy of the input when it fits, else the pruned list. */
  messages: ChatMessage[];
  /** How many whole turns were dropped. */
  droppedTurns: number;
  /** Calibrated estimate of `messages` with the tools. */
  estimate: number;
  /** The same before calibration; what the next calibration divides by. */
  rawEstimate: number;
  /** False when even the pruned floor exceeds the budget: the caller must not send it. */
  fits: boolean;
}

/**
 * Splits a transcript into its head (everything up to and including the first
 * user message) and its turns (each opening at an assistant message; a
 * fragment before the first assistant message is a turn of its own). Without a
 * user message the whole list is head.
 */
export function partitionTranscript(messages: readonly ChatMessage[]): { head: ChatMessage[]; turns: ChatMessage[][] } {
  const firstUser = messages.findIndex((message) => message.role === 'user');
  if (firstUser === -1) {
    return { head: [...messages], turns: [] };
  }
  const head = messages.slice(0, firstUser + 1);
  const turns: ChatMessage[][] = [];
  let current: ChatMessage[] | null = null;
  for (const message of messages.slice(firstUser + 1)) {
    if (message.role === 'assistant' || current === null) {
      current = [message];
      turns.push(current);
    } else {
      current.push(message);
    }
  }
  return { head, turns };
}

/**
 * Removes every tool message whose call id no earlier assistant message
 * declared. Providers refuse such a transcript; it can only arise when a turn
 * boundary was crossed, and the guard makes that impossible to send.
 */
export function dropOrphanedToolMessages(messages: readonly ChatMessage[]): ChatMessage[] {
  const declared = new Set<string>();
  const kept: ChatMessage[] = [];
  for (const message of messages) {
    if (message.role === 'assistant') {
      for (const call of message.tool_calls ?? []) {
        declared.add(call.id);
      }
    } else if (message.role === 'tool' && !declared.has(message.tool_call_id)) {
      continue;
    }
    kept.push(message);
  }
  return kept;
}

/**
 * Fits a transcript to a budget (§7).
 *
 * Within budget (or a budget ≤ 0, which means "send as is"): the messages are
 * returned unchanged. Over budget: the head is kept, and the oldest whole
 * turns are dropped while more than one remains and the rest is still over
 * budget. `fits` is false when even that floor is over budget. The result
 * never holds a tool message whose call id no earlier assistant message
 * declared.
 */
export function fitContext(
  messages: readonly ChatMessage[],
  tools: readonly ToolDefinition[],
  budget: number,
  calibration: number,
): ContextFit {
  const measure = (candidate: readonly ChatMessage[]): { raw: number; estimate: number } => {
    const raw = estimateTokens(candidate, tools);
    return { raw, estimate: calibratedEstimate(raw, calibration) };
  };

  const whole = dropOrphanedToolMessages(messages);
  const wholeSize = measure(whole);
  if (budget <= 0 || wholeSize.estimate <= budget) {
    return { messages: whole, droppedTurns: 0, estimate: wholeSize.estimate, rawEstimate: wholeSize.raw, fits: true };
  }

  const { head, turns } = partitionTranscript(whole);
  let kept = turns;
  let droppedTurns = 0;
  let candidate = whole;
  let size = wholeSize;
  while (kept.length > 1 && size.estimate > budget) {
    kept = kept.slice(1);
    droppedTurns += 1;
    candidate = dropOrphanedToolMessages([...head, ...kept.flat()]);
    size = measure(candidate);
  }
  return {
    messages: candidate,
    droppedTurns,
    estimate: size.estimate,
    rawEstimate: size.raw,
    fits: size.estimate <= budget,
  };
}
