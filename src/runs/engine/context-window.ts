/**
 * Fitting the agent loop's transcript into the model's context window
 * (behaviour.md §7), with nr_llm's numbers: its `ContextWindowManager::fit`
 * and `TranscriptEstimator::estimate` are the reference.
 *
 * Pure functions: no tokenizer, no I/O. The estimate is a content-aware byte
 * heuristic that errs high; a per-run calibration factor starts at 1.15 and
 * grows toward the prompt token counts providers report, so the estimate is
 * never trusted below what a provider has shown to be real. Pruning drops the
 * oldest whole turns (an assistant message with its tool results), so the
 * pairing between a tool call and its result that providers insist on is
 * never broken by the pruning itself.
 *
 * The state a run carries from one send to the next (`ContextCalibration`)
 * is rebuilt from the stored steps by the run machine's fold, so a resumed
 * run fits exactly as it would have without the interruption.
 */

import type { ChatMessage, ToolDefinition } from '../../providers/adapters/types';
import { phpJsonDecode, phpJsonEncode, phpValueOf } from '../../shared/php-json';
import { PrefixMemo } from '../../shared/prefix-memo';
import { rememberedArgumentBytes, rememberedByMessage, rememberedSchemaBytes } from './estimate-memo';
import type { ContextBudgetReport } from './loop-step';

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
/** The smallest response reserve when neither the run nor the model names one. */
export const MIN_RESERVE_TOKENS = 1000;
/** Share of the window reserved for the response when neither the run nor the model names one. */
export const RESERVE_FRACTION = 0.02;
/**
 * The calibration factor of a first send, before any provider reported a
 * prompt token count: the estimate is taken 15 % high. The factor only grows
 * from there, so no send of a run is estimated below × 1.15.
 */
export const CALIBRATION_SEED = 1.15;

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
  /**
   * The `max_tokens` the run itself asked for (startRun's `maxTokens`), not
   * the configuration's: as in nr_llm, whose loop reserves its run options'
   * value and otherwise the model's. Absent or ≤ 0 = not set.
   */
  runMaxTokens?: number | null;
  /** `tx_nrllm_model.max_output_tokens`; 0 (or less) = unknown. */
  modelMaxOutputTokens?: number | null;
}

/**
 * The window, reserve, safety margin and budget of a run's calls. The
 * unknown model gives 8192 − 1000 − 246 = 6946; a 128000 model with 16384
 * output tokens 128000 − 16384 − 3840 = 107776, whatever `max_tokens` its
 * configuration sets.
 */
export function contextBudget(input: ContextBudgetInput): ContextBudget {
  const window = input.contextLength > 0 ? input.contextLength : UNKNOWN_CONTEXT_WINDOW;
  const runMaxTokens = input.runMaxTokens ?? 0;
  const modelMaxOutputTokens = input.modelMaxOutputTokens ?? 0;
  let reserve: number;
  if (runMaxTokens > 0) {
    reserve = runMaxTokens;
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
 * The bytes a tool call's arguments are counted with: nr_llm holds the
 * arguments decoded (text PHP cannot decode, or that is no object or list,
 * holds as no arguments) and counts them re-encoded with PHP's default
 * `json_encode`, no arguments as `{}`. So `{"a": 1}` counts as `{"a":1}`, a
 * slash as `\/` and "é" as `\u00e9`. Arguments PHP could not encode again
 * (a number beyond the float range) count as sent.
 */
export function toolCallArgumentBytes(text: string): number {
  const decoded = phpJsonDecode(text);
  if (!(decoded instanceof Map) || decoded.size === 0) {
    return 2;
  }
  const encoded = phpJsonEncode(decoded);
  return encoded === null ? utf8Bytes(text) : utf8Bytes(encoded);
}

/**
 * The tool schemas as they go on the wire (`{"type":"function","function":
 * {"name","description","parameters"}}` each), as PHP's `json_encode` with
 * unescaped slashes and unicode writes the list: `[]` when no tool is offered.
 */
export function toolSchemaJson(tools: readonly ToolDefinition[]): string {
  // PHP's json_encode fails only on what no tool schema holds (an unpaired surrogate); it then counts nothing.
  return phpJsonEncode(phpValueOf(tools.map(wireTool)), SCHEMA_JSON_FLAGS) ?? '';
}

const SCHEMA_JSON_FLAGS = { unescapedSlashes: true, unescapedUnicode: true } as const;

function wireTool(tool: ToolDefinition): { type: 'function'; function: ToolDefinition } {
  return { type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.parameters } };
}

/** One tool's entry of `toolSchemaJson`, in UTF-8 bytes; null when it cannot be encoded. */
function wireToolBytes(tool: ToolDefinition): number | null {
  const encoded = phpJsonEncode(phpValueOf(wireTool(tool)), SCHEMA_JSON_FLAGS);
  return encoded === null ? null : utf8Bytes(encoded);
}

/**
 * `utf8Bytes(toolSchemaJson(tools))`, from each tool's entry (a list is its
 * entries between brackets, separated by commas; one entry that cannot be
 * encoded fails the list), each entry measured once per tool definition.
 */
export function toolSchemaBytes(tools: readonly ToolDefinition[]): number {
  let bytes = 2 + Math.max(0, tools.length - 1);
  for (const tool of tools) {
    const entry = rememberedSchemaBytes(tool, wireToolBytes);
    if (entry === null) return 0;
    bytes += entry;
  }
  return bytes;
}

/**
 * The raw (uncalibrated) token estimate of sending `messages` with `tools`
 * offered.
 *
 * 8 tokens per message and 12 per tool call; then the UTF-8 bytes of each
 * content class are summed over the whole send and divided, each sum rounded
 * up on its own:
 * - dense (÷ 2.5): tool-message content, call ids (on the assistant's calls
 *   and on tool messages), tool call arguments (`toolCallArgumentBytes`) and
 *   the tool schema list (`toolSchemaJson`, `[]` without tools);
 * - prose (÷ 3.5): every other message content (system prompt, snippet
 *   messages, the user message with its skill block, assistant text) and the
 *   names of requested tool calls.
 *
 * A user message "Go" alone is 8 + 1 + 1 (`[]`) = 10.
 */
export function estimateTokens(messages: readonly ChatMessage[], tools: readonly ToolDefinition[] = []): number {
  return tokensOf(totalsOf.of(messages), toolSchemaBytes(tools));
}

/** One message's share of an estimate: overhead tokens, prose and dense bytes (sums, divided only at the end). */
interface EstimateParts {
  overhead: number;
  prose: number;
  dense: number;
  /** Tool messages (no part of the estimate: a list without any needs no pairing check). */
  toolMessages: number;
}

function emptyParts(): EstimateParts {
  return { overhead: 0, prose: 0, dense: 0, toolMessages: 0 };
}

function addParts(total: EstimateParts, parts: Readonly<EstimateParts>, sign = 1): void {
  total.overhead += sign * parts.overhead;
  total.prose += sign * parts.prose;
  total.dense += sign * parts.dense;
  total.toolMessages += sign * parts.toolMessages;
}

/** `messageParts`, measured once per message object (estimate-memo). */
const partsOf = rememberedByMessage(messageParts);

/**
 * The sums over a list of messages, a list that extends one summed before
 * summing only what it adds (prefix-memo). Up to this many messages of the
 * list may differ from the remembered one's: a run's system prompt, forced
 * snippets and the user message carrying the skill block are made again on
 * every assembly.
 */
const REMADE_MESSAGES = 8;
const totalsOf = new PrefixMemo<ChatMessage, EstimateParts>(
  {
    empty: emptyParts,
    copy: (total) => ({ ...total }),
    add: (total, message) => addParts(total, partsOf(message)),
    remove: (total, message) => addParts(total, partsOf(message), -1),
  },
  REMADE_MESSAGES,
);

function messageParts(message: ChatMessage): EstimateParts {
  const parts: EstimateParts = { overhead: MESSAGE_OVERHEAD_TOKENS, prose: 0, dense: 0, toolMessages: 0 };
  switch (message.role) {
    case 'system':
    case 'user':
      parts.prose += utf8Bytes(message.content);
      break;
    case 'assistant':
      parts.prose += utf8Bytes(message.content ?? '');
      for (const call of message.tool_calls ?? []) {
        parts.overhead += TOOL_CALL_OVERHEAD_TOKENS;
        parts.prose += utf8Bytes(call.function.name);
        parts.dense += rememberedArgumentBytes(call.function.arguments, toolCallArgumentBytes);
        parts.dense += utf8Bytes(call.id);
      }
      break;
    case 'tool':
      parts.toolMessages = 1;
      parts.dense += utf8Bytes(message.content);
      parts.dense += utf8Bytes(message.tool_call_id);
      break;
    default: {
      const unreachable: never = message;
      throw new Error(`Unknown message role in ${JSON.stringify(unreachable)}`);
    }
  }
  return parts;
}

/** The raw estimate from summed parts and the tool schema list's bytes (dense). */
function tokensOf(parts: EstimateParts, schemaBytes: number): number {
  return parts.overhead + Math.ceil(parts.prose / PROSE_BYTES_PER_TOKEN) + Math.ceil((parts.dense + schemaBytes) / DENSE_BYTES_PER_TOKEN);
}

/** The calibrated estimate: the raw estimate scaled by a factor of at least 1, rounded up. */
export function calibratedEstimate(rawEstimate: number, factor: number): number {
  return Math.ceil(rawEstimate * Math.max(1, factor));
}

/** What a run's fitting carries from one send to the next. */
export interface ContextCalibration {
  /** The factor estimates are scaled by (≥ 1.15). */
  factor: number;
  /** The calibrated estimate the last measured fit approved; null before the first. */
  lastSentEstimate: number | null;
}

/**
 * The state of a first send: the loop's first call, and the first call after
 * a person decided pending tool calls (nr_llm's loop starts its fitting afresh
 * when it resumes).
 */
export function firstSendCalibration(): ContextCalibration {
  return { factor: CALIBRATION_SEED, lastSentEstimate: null };
}

/**
 * The state after a provider answered: the factor grows to the reported
 * prompt tokens divided by the calibrated estimate last approved, if that is
 * larger. It never shrinks; nothing changes before a measured fit (or when
 * the provider reported no prompt tokens).
 */
export function calibrateFromUsage(calibration: ContextCalibration, reportedPromptTokens: number): ContextCalibration {
  const last = calibration.lastSentEstimate;
  if (last === null || !(last > 0)) {
    return calibration;
  }
  return { ...calibration, factor: Math.max(calibration.factor, reportedPromptTokens / last) };
}

/**
 * The state after a fit was recorded: a measured fit's estimate is what the
 * next reported usage is divided by; a fit that sent as is without measuring
 * (reported with budget 0) leaves the last measured one in place.
 */
export function calibrationAfterFit(calibration: ContextCalibration, report: Pick<ContextBudgetReport, 'budget' | 'estimate'> | null | undefined): ContextCalibration {
  if (!report || !(report.budget > 0) || typeof report.estimate !== 'number') {
    return calibration;
  }
  return { ...calibration, lastSentEstimate: report.estimate };
}

export interface ContextFit {
  /** What to send: the input as is when it fits or is not measured, else the pruned list. */
  messages: ChatMessage[];
  /** The CONTEXT step's figures. */
  report: ContextBudgetReport;
  /**
   * Why the transcript went out as is without being measured (the report is
   * then all zeros): a budget ≤ 0, or a tool message whose call id no
   * earlier assistant message declared. Null when measured.
   */
  deferred: 'no_budget' | 'unpaired_tool_message' | null;
  /**
   * The calibrated estimate of `messages` with the tools, also where the
   * report says 0 (the run's own token budget is checked against it).
   */
  sentEstimate: number;
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
 * Whether every tool message answers a call id an earlier assistant message
 * declared (an empty id never does). An assistant call still without its
 * result is fine: that is the newest turn, waiting.
 */
export function toolMessagesArePaired(messages: readonly ChatMessage[]): boolean {
  const declared = new Set<string>();
  for (const message of messages) {
    if (message.role === 'assistant') {
      for (const call of message.tool_calls ?? []) {
        declared.add(call.id);
      }
    } else if (message.role === 'tool' && (message.tool_call_id === '' || !declared.has(message.tool_call_id))) {
      return false;
    }
  }
  return true;
}

/**
 * Fits a transcript to a budget (§7), with the calibration factor of this
 * send.
 *
 * - A budget ≤ 0 (a reserve larger than the window): the messages go out as
 *   they are, reported as 0 / 0 (every figure 0), nothing is measured.
 * - Within budget: the messages go out as they are.
 * - Over budget: the head is kept, and the oldest whole turns are dropped
 *   while more than one remains and the rest is still over budget; `fits` is
 *   false when even that floor is over budget (the caller must not send).
 * - When the list so chosen has a tool message whose call id no earlier
 *   assistant message declared, the fit is abandoned: the input goes out as
 *   it is, reported as 0 / 0, and the provider is left to judge it.
 */
export function fitContext(
  messages: readonly ChatMessage[],
  tools: readonly ToolDefinition[],
  budget: ContextBudget,
  factor: number,
): ContextFit {
  const measure = (candidate: readonly ChatMessage[]): number => calibratedEstimate(estimateTokens(candidate, tools), factor);
  const asIs = (deferred: 'no_budget' | 'unpaired_tool_message'): ContextFit => ({
    messages: [...messages],
    report: { window: 0, reserve: 0, safety: 0, budget: 0, estimate: 0, droppedTurns: 0, calibration: factor, fits: true },
    deferred,
    sentEstimate: measure(messages),
  });

  if (budget.budget <= 0) {
    return asIs('no_budget');
  }

  let candidate: ChatMessage[] = [...messages];
  const totals = totalsOf.of(candidate);
  let estimate = calibratedEstimate(tokensOf(totals, toolSchemaBytes(tools)), factor);
  let droppedTurns = 0;
  if (estimate > budget.budget) {
    // Each message is measured once; dropping a turn subtracts its share, so
    // a long conversation fits in one pass (the sums give the same estimate
    // as measuring each candidate list anew).
    const { head, turns } = partitionTranscript(messages);
    const schemaBytes = toolSchemaBytes(tools);
    const total = emptyParts();
    for (const message of head) addParts(total, partsOf(message));
    const turnParts = turns.map((turn) => {
      const parts = emptyParts();
      for (const message of turn) addParts(parts, partsOf(message));
      addParts(total, parts);
      return parts;
    });
    while (turns.length - droppedTurns > 1 && estimate > budget.budget) {
      addParts(total, turnParts[droppedTurns]!, -1);
      droppedTurns += 1;
      estimate = calibratedEstimate(tokensOf(total, schemaBytes), factor);
    }
    if (droppedTurns > 0) candidate = [...head, ...turns.slice(droppedTurns).flat()];
  }

  // Without tool messages there is nothing to pair (the walk over a long conversation is left out).
  if (totals.toolMessages > 0 && !toolMessagesArePaired(candidate)) {
    return asIs('unpaired_tool_message');
  }
  return {
    messages: candidate,
    report: { ...budget, estimate, droppedTurns, calibration: factor, fits: estimate <= budget.budget },
    deferred: null,
    sentEstimate: estimate,
  };
}
