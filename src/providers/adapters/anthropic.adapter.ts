/**
 * Anthropic Messages API: `POST {base}/messages` with `x-api-key` and
 * `anthropic-version` (behaviour.md §9).
 *
 * Conversions at this edge:
 * - system messages → the top-level `system` text (all of them, joined; see
 *   `liftSystemMessages`);
 * - assistant tool calls → `tool_use` blocks; tool results → `tool_result`
 *   blocks in a user turn, consecutive results sharing one turn, as the API
 *   requires all results of one assistant turn to come back together;
 * - native `thinking` blocks → `thinking`;
 * - usage: `input_tokens` counts only the uncached part of the prompt, so
 *   `promptTokens` = input + cache reads + cache writes, which makes it mean
 *   "the whole prompt" as it does for every other provider.
 */
import { z } from 'zod/v4';

import { acceptedKeys, passThrough, readSampling } from './call-options';
import { decodeReplay, encodeReplay, liftSystemMessages, wireToolCallId, wireToolCallIds } from './conversation';
import { resolveBaseUrl } from './credentials';
import {
  type ProviderError,
  ProviderAuthenticationError,
  ProviderConnectionError,
  ProviderRateLimitError,
  ProviderResponseError,
  excerptBody,
} from './errors';
import {
  type DecodedResult,
  HttpChatAdapter,
  type StreamDecoder,
  type StreamDelta,
  type WireRequest,
  incompleteStream,
} from './http-chat-adapter';
import { type RawToolCall, argumentsAsObject, normaliseToolCall, uniqueToolCallIds } from './tool-calls';
import type { ChatMessage, ChatRequest, FinishReason, ToolCall } from './types';
import { buildUsage } from './usage';
import { type WireContext, parseWire } from './wire';

export const ANTHROPIC_DEFAULT_URL = 'https://api.anthropic.com/v1';
export const ANTHROPIC_VERSION = '2023-06-01';
/** The API requires `max_tokens`; used when the configuration and the model give none. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096;

const ACCEPTED_OPTIONS = acceptedKeys(
  ['top_k', 'stop_sequences', 'metadata', 'thinking', 'service_tier'],
  [['stop', 'stop_sequences']],
);

// ---- wire schemas (lenient) ----

const usageSchema = z.looseObject({
  input_tokens: z.number().nullish(),
  output_tokens: z.number().nullish(),
  cache_creation_input_tokens: z.number().nullish(),
  cache_read_input_tokens: z.number().nullish(),
});
type WireUsage = z.output<typeof usageSchema>;

const blockSchema = z.looseObject({
  type: z.string(),
  text: z.string().nullish(),
  thinking: z.string().nullish(),
  signature: z.string().nullish(),
  data: z.string().nullish(),
  id: z.string().nullish(),
  name: z.string().nullish(),
  input: z.unknown(),
});

const messageSchema = z.looseObject({
  /** The model that answered (e.g. the dated snapshot of an alias). */
  model: z.string().nullish().catch(null),
  content: z.array(z.unknown()).nullish(),
  stop_reason: z.string().nullish(),
  usage: usageSchema.nullish(),
});

const eventSchema = z.looseObject({
  type: z.string(),
  index: z.number().nullish(),
  content_block: z.unknown(),
  delta: z
    .looseObject({
      type: z.string().nullish(),
      text: z.string().nullish(),
      thinking: z.string().nullish(),
      signature: z.string().nullish(),
      partial_json: z.string().nullish(),
      stop_reason: z.string().nullish(),
    })
    .nullish(),
  message: z.looseObject({ usage: usageSchema.nullish(), model: z.string().nullish().catch(null) }).nullish(),
  usage: usageSchema.nullish(),
  error: z.looseObject({ type: z.string().nullish(), message: z.string().nullish() }).nullish(),
});

/** A response content block as this adapter uses it; the same shape whether read whole or assembled from a stream. */
type Block =
  | { type: 'text'; text: string }
  | { type: 'thinking'; thinking: string; signature: string }
  | { type: 'redacted_thinking'; data: string }
  /** `input`: the object, or for a stream the concatenated JSON text when it does not parse. */
  | { type: 'tool_use'; id: string | null; name: string | null; input: unknown };

/** Signed thinking blocks to send back in front of the tool calls they led to. */
const replayBlocksSchema = z.array(
  z.union([
    z.object({ type: z.literal('thinking'), thinking: z.string(), signature: z.string() }),
    z.object({ type: z.literal('redacted_thinking'), data: z.string() }),
  ]),
);
type ReplayBlock = z.output<typeof replayBlocksSchema>[number];

export class AnthropicAdapter extends HttpChatAdapter {
  readonly adapterType = 'anthropic' as const;
  protected readonly framing = 'sse' as const;
  protected readonly requiresApiKey = true;

  protected buildRequest(request: ChatRequest, stream: boolean, warnings: string[], apiKey: string | null): WireRequest {
    const base = resolveBaseUrl(this.settings, ANTHROPIC_DEFAULT_URL);
    const url = base.endsWith('/messages') ? base : `${base}/messages`;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: stream ? 'text/event-stream' : 'application/json',
      'anthropic-version': ANTHROPIC_VERSION,
    };
    if (apiKey !== null) headers['x-api-key'] = apiKey;

    const { system, turns } = liftSystemMessages(request.messages);
    const sampling = readSampling(request.options, warnings);
    const extra = passThrough(request.options, ACCEPTED_OPTIONS, 'anthropic', warnings);
    if (typeof extra.stop_sequences === 'string') extra.stop_sequences = [extra.stop_sequences];

    const body: Record<string, unknown> = {
      model: request.options.model,
      max_tokens: sampling.maxTokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
      messages: toWireMessages(turns),
    };
    if (system !== null) body.system = system;
    if (sampling.temperature !== undefined) {
      if (isThinkingEnabled(extra.thinking)) {
        // The API refuses any temperature but 1 while extended thinking is on.
        if (sampling.temperature !== 1) warnings.push('temperature is not supported by anthropic with extended thinking');
      } else if (sampling.temperature > 1) {
        warnings.push(`temperature ${sampling.temperature} is above anthropic's maximum; sent 1`);
        body.temperature = 1;
      } else {
        body.temperature = sampling.temperature;
      }
    }
    if (sampling.topP !== undefined) body.top_p = sampling.topP;
    if (sampling.frequencyPenalty !== undefined) warnings.push('frequency_penalty is not supported by anthropic');
    if (sampling.presencePenalty !== undefined) warnings.push('presence_penalty is not supported by anthropic');
    if (request.tools !== undefined && request.tools.length > 0) {
      body.tools = request.tools.map((tool) => ({
        name: tool.name,
        description: tool.description,
        input_schema: tool.parameters,
      }));
    }
    Object.assign(body, extra);
    if (stream) body.stream = true;
    return { url, headers, body };
  }

  protected decodeResponse(body: unknown, context: WireContext): DecodedResult {
    const message = parseWire(messageSchema, body, context, 'message');
    const blocks: Block[] = [];
    for (const item of message.content ?? []) {
      const parsed = blockSchema.safeParse(item);
      if (!parsed.success) continue;
      const block = toBlock(parsed.data);
      if (block !== null) blocks.push(block);
    }
    return fromBlocks(blocks, message.stop_reason ?? null, message.usage ?? {}, message.model ?? null, context);
  }

  protected createStreamDecoder(context: WireContext): StreamDecoder {
    return new AnthropicStreamDecoder(context);
  }
}

function isThinkingEnabled(thinking: unknown): boolean {
  return typeof thinking === 'object' && thinking !== null && (thinking as { type?: unknown }).type === 'enabled';
}

type WireMessage = { role: 'user' | 'assistant'; content: string | Record<string, unknown>[] };

function toWireMessages(turns: ReadonlyArray<Exclude<ChatMessage, { role: 'system' }>>): WireMessage[] {
  const out: WireMessage[] = [];
  const ids = wireToolCallIds(turns);
  /** The user turn collecting the results of the preceding assistant turn's calls. */
  let toolResults: Record<string, unknown>[] | null = null;
  for (const message of turns) {
    if (message.role === 'tool') {
      const block = { type: 'tool_result', tool_use_id: wireToolCallId(ids, message.tool_call_id), content: message.content };
      if (toolResults === null) {
        toolResults = [block];
        out.push({ role: 'user', content: toolResults });
      } else {
        toolResults.push(block);
      }
      continue;
    }
    toolResults = null;
    if (message.role === 'user') {
      out.push({ role: 'user', content: message.content });
      continue;
    }
    const blocks: Record<string, unknown>[] = [];
    const calls = message.tool_calls ?? [];
    if (calls.length > 0) blocks.push(...replayedThinking(calls[0]));
    if (message.content !== null && message.content !== '') blocks.push({ type: 'text', text: message.content });
    for (const call of calls) {
      blocks.push({ type: 'tool_use', id: wireToolCallId(ids, call.id), name: call.function.name, input: argumentsAsObject(call.function.arguments) });
    }
    // The API refuses empty assistant turns and empty text blocks; an empty turn carries nothing anyway.
    if (blocks.length === 0) continue;
    out.push({ role: 'assistant', content: blocks });
  }
  return out;
}

function replayedThinking(call: ToolCall | undefined): ReplayBlock[] {
  if (call === undefined) return [];
  const payload = decodeReplay(call, 'anthropic');
  if (payload === null) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(payload);
  } catch {
    return [];
  }
  // Stored state can be edited or truncated; a broken replay is dropped rather than sent.
  const blocks = replayBlocksSchema.safeParse(parsed);
  return blocks.success ? blocks.data : [];
}

function toBlock(block: z.output<typeof blockSchema>): Block | null {
  switch (block.type) {
    case 'text':
      return { type: 'text', text: block.text ?? '' };
    case 'thinking':
      return { type: 'thinking', thinking: block.thinking ?? '', signature: block.signature ?? '' };
    case 'redacted_thinking':
      return { type: 'redacted_thinking', data: block.data ?? '' };
    case 'tool_use':
      return { type: 'tool_use', id: block.id ?? null, name: block.name ?? null, input: block.input };
    default:
      // Server tool blocks (web search results, …) carry nothing the service uses.
      return null;
  }
}

const STOP_REASONS: Readonly<Record<string, FinishReason>> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  max_tokens: 'length',
  model_context_window_exceeded: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
};

function fromBlocks(blocks: Block[], stopReason: string | null, usage: WireUsage, model: string | null, context: WireContext): DecodedResult {
  let content = '';
  const thinking: string[] = [];
  const replay: ReplayBlock[] = [];
  const rawCalls: RawToolCall[] = [];
  for (const block of blocks) {
    switch (block.type) {
      case 'text':
        content += block.text;
        break;
      case 'thinking':
        if (block.thinking !== '') thinking.push(block.thinking);
        if (block.signature !== '') replay.push({ type: 'thinking', thinking: block.thinking, signature: block.signature });
        break;
      case 'redacted_thinking':
        replay.push({ type: 'redacted_thinking', data: block.data });
        break;
      case 'tool_use':
        rawCalls.push({ id: block.id, name: block.name, arguments: block.input });
        break;
    }
  }
  const toolCalls: ToolCall[] = [];
  for (const raw of rawCalls) {
    // With extended thinking the next request must start the assistant turn with these blocks.
    if (toolCalls.length === 0 && replay.length > 0) raw.providerReplay = encodeReplay('anthropic', JSON.stringify(replay));
    const call = normaliseToolCall(raw, context);
    if (call !== null) toolCalls.push(call);
  }
  return {
    content,
    thinking: thinking.length === 0 ? null : thinking.join('\n\n'),
    toolCalls: uniqueToolCallIds(toolCalls),
    finishReason: stopReason === null ? 'other' : (STOP_REASONS[stopReason] ?? 'other'),
    rawFinishReason: stopReason,
    usage: toUsage(usage),
    ...(model ? { model } : {}),
  };
}

function toUsage(usage: WireUsage): DecodedResult['usage'] {
  const input = usage.input_tokens ?? 0;
  const cacheRead = usage.cache_read_input_tokens;
  const cacheWrite = usage.cache_creation_input_tokens;
  return buildUsage({
    // `input_tokens` excludes cached tokens: the whole prompt is the sum of the three.
    prompt: Math.max(0, input) + Math.max(0, cacheRead ?? 0) + Math.max(0, cacheWrite ?? 0),
    completion: usage.output_tokens,
    cachedInput: cacheRead,
    cacheWrite,
  });
}

/** An `error` event inside a 200 stream, e.g. `overloaded_error` half-way through an answer. */
function streamErrorEvent(error: { type?: string | null; message?: string | null }, context: WireContext): ProviderError {
  const init = {
    provider: context.provider,
    bodyExcerpt: excerptBody(`${error.type ?? 'error'}: ${error.message ?? ''}`, context.apiKey),
  };
  switch (error.type) {
    case 'overloaded_error':
    case 'api_error':
      return new ProviderConnectionError(init, 'server error');
    case 'rate_limit_error':
      return new ProviderRateLimitError(init);
    case 'authentication_error':
    case 'permission_error':
      return new ProviderAuthenticationError(init);
    default:
      return new ProviderResponseError(init, 'provider reported an error');
  }
}

interface StreamBlock {
  type: string;
  text: string;
  thinking: string;
  signature: string;
  data: string;
  id: string | null;
  name: string | null;
  /** Concatenated `input_json_delta` fragments. */
  json: string;
  /** The `input` of `content_block_start`; used when no fragments follow. */
  startInput: unknown;
}

class AnthropicStreamDecoder implements StreamDecoder {
  complete = false;
  private readonly blocks = new Map<number, StreamBlock>();
  private stopReason: string | null = null;
  private usage: WireUsage = {};
  /** Named by `message_start`. */
  private model: string | null = null;

  constructor(private readonly context: WireContext) {}

  accept(frame: unknown): StreamDelta[] {
    const event = parseWire(eventSchema, frame, this.context, 'stream event');
    switch (event.type) {
      case 'message_start':
        this.mergeUsage(event.message?.usage);
        if (event.message?.model) this.model = event.message.model;
        return [];
      case 'content_block_start':
        this.startBlock(event.index, event.content_block);
        return [];
      case 'content_block_delta':
        return this.applyDelta(event.index, event.delta);
      case 'message_delta':
        if (typeof event.delta?.stop_reason === 'string') this.stopReason = event.delta.stop_reason;
        // Cumulative counts: later values replace earlier ones.
        this.mergeUsage(event.usage);
        return [];
      case 'message_stop':
        this.complete = true;
        return [];
      case 'error':
        throw streamErrorEvent(event.error ?? {}, this.context);
      default:
        // `ping`, `content_block_stop` and event types added later.
        return [];
    }
  }

  finish(): DecodedResult {
    if (!this.complete && this.stopReason === null) throw incompleteStream(this.context, 'no message_stop');
    const blocks: Block[] = [];
    for (const index of [...this.blocks.keys()].sort((a, b) => a - b)) {
      const block = this.blocks.get(index);
      if (block === undefined) continue;
      const done = toBlock({ ...block, input: block.type === 'tool_use' ? streamedInput(block) : undefined });
      if (done !== null) blocks.push(done);
    }
    return fromBlocks(blocks, this.stopReason, this.usage, this.model, this.context);
  }

  private startBlock(index: number | null | undefined, raw: unknown): void {
    if (typeof index !== 'number') return;
    const parsed = blockSchema.safeParse(raw);
    const start: z.output<typeof blockSchema> = parsed.success ? parsed.data : { type: 'unknown', input: undefined };
    this.blocks.set(index, {
      type: start.type,
      text: start.text ?? '',
      thinking: start.thinking ?? '',
      signature: start.signature ?? '',
      data: start.data ?? '',
      id: start.id ?? null,
      name: start.name ?? null,
      json: '',
      startInput: start.input,
    });
  }

  private applyDelta(index: number | null | undefined, delta: z.output<typeof eventSchema>['delta']): StreamDelta[] {
    const block = typeof index === 'number' ? this.blocks.get(index) : undefined;
    if (block === undefined || delta === null || delta === undefined) return [];
    switch (delta.type) {
      case 'text_delta':
        if (typeof delta.text !== 'string' || delta.text === '') return [];
        block.text += delta.text;
        return [{ type: 'content', text: delta.text }];
      case 'thinking_delta':
        if (typeof delta.thinking !== 'string' || delta.thinking === '') return [];
        block.thinking += delta.thinking;
        return [{ type: 'thinking', text: delta.thinking }];
      case 'signature_delta':
        block.signature += delta.signature ?? '';
        return [];
      case 'input_json_delta':
        block.json += delta.partial_json ?? '';
        return [];
      default:
        return [];
    }
  }

  private mergeUsage(usage: WireUsage | null | undefined): void {
    if (usage === null || usage === undefined) return;
    const merged: WireUsage = { ...this.usage };
    for (const key of ['input_tokens', 'output_tokens', 'cache_creation_input_tokens', 'cache_read_input_tokens'] as const) {
      const value = usage[key];
      if (typeof value === 'number') merged[key] = value;
    }
    this.usage = merged;
  }
}

/**
 * The streamed tool input as an object, so the arguments string is the same
 * canonical JSON a non-streamed answer gives; text that does not parse is
 * passed on as text and the call is then skipped as malformed.
 */
function streamedInput(block: StreamBlock): unknown {
  if (block.json.trim() === '') return block.startInput ?? {};
  try {
    return JSON.parse(block.json) as unknown;
  } catch {
    return block.json;
  }
}
