/**
 * The OpenAI chat-completions wire family: `openai`, `openrouter`, `mistral`,
 * `groq` and `custom` (any compatible server: vLLM, LM Studio, llama.cpp, …).
 * `POST {base}/chat/completions`, bearer key (behaviour.md §9).
 *
 * The service's messages are already OpenAI-shaped, so the request is nearly
 * a copy. The answer's reasoning can come three ways and all end in
 * `thinking`: `reasoning_content` (DeepSeek, vLLM), `reasoning` (OpenRouter,
 * Groq), thinking chunks in an array content (Mistral Magistral), or
 * `<think>…</think>` inside the content (models served without a reasoning
 * parser).
 */
import { z } from 'zod/v4';

import { acceptedKeys, jsonOutputOf, passThrough, readSampling } from './call-options';
import { resolveBaseUrl } from './credentials';
import { ProviderResponseError, excerptBody } from './errors';
import {
  type AdapterDependencies,
  type DecodedResult,
  HttpChatAdapter,
  type StreamDecoder,
  type StreamDelta,
  type WireRequest,
  incompleteStream,
} from './http-chat-adapter';
import { wireToolCallId, wireToolCallIds } from './conversation';
import { ThinkTagSplitter } from './think-tags';
import { type RawToolCall, isJsonObject, normaliseToolCalls } from './tool-calls';
import type { AdapterType, ChatMessage, ChatRequest, FinishReason, ProviderSettings } from './types';
import { buildUsage, ZERO_USAGE } from './usage';
import { type WireContext, parseWire } from './wire';

export type OpenAiCompatibleType = Extract<AdapterType, 'openai' | 'openrouter' | 'mistral' | 'groq' | 'custom'>;

export const OPENAI_COMPATIBLE_DEFAULT_URLS: Readonly<Record<OpenAiCompatibleType, string | null>> = {
  openai: 'https://api.openai.com/v1',
  openrouter: 'https://openrouter.ai/api/v1',
  mistral: 'https://api.mistral.ai/v1',
  groq: 'https://api.groq.com/openai/v1',
  // Any compatible server: there is no sensible default, the provider row must name it.
  custom: null,
};

const COMMON_KEYS = ['stop', 'seed', 'response_format', 'tool_choice', 'parallel_tool_calls', 'user', 'logit_bias', 'logprobs', 'top_logprobs'];

/**
 * Extra options each service documents. Unknown parameters are rejected by
 * OpenAI and Mistral (400/422), so only these are sent; `custom` passes all.
 */
const ACCEPTED_OPTIONS: Readonly<Record<OpenAiCompatibleType, ReadonlyMap<string, string> | 'any'>> = {
  openai: acceptedKeys([
    ...COMMON_KEYS,
    'reasoning_effort',
    'service_tier',
    'metadata',
    'store',
    'verbosity',
    'prediction',
  ]),
  openrouter: acceptedKeys([
    ...COMMON_KEYS,
    'reasoning',
    'reasoning_effort',
    'include_reasoning',
    'verbosity',
    'provider',
    'transforms',
    'models',
    'route',
    'top_k',
    'top_a',
    'min_p',
    'repetition_penalty',
    'usage',
  ]),
  mistral: acceptedKeys(
    ['stop', 'random_seed', 'response_format', 'tool_choice', 'parallel_tool_calls', 'safe_prompt', 'prompt_mode', 'prediction'],
    [['seed', 'random_seed']],
  ),
  groq: acceptedKeys([...COMMON_KEYS, 'reasoning_effort', 'reasoning_format', 'include_reasoning', 'service_tier']),
  custom: 'any',
};

// ---- wire schemas (lenient: unknown fields pass, nearly everything optional) ----

/** Array content: Mistral's reasoning models send `[{type: "thinking", thinking: [...]}, {type: "text", text}]`. */
const contentPartSchema = z.looseObject({
  type: z.string().nullish(),
  text: z.string().nullish(),
  thinking: z.union([z.string(), z.array(z.looseObject({ text: z.string().nullish() }))]).nullish(),
});
const contentSchema = z.union([z.string(), z.array(z.unknown())]).nullish();

/**
 * Tool calls are read field by field into the service's own shape, so their
 * schema strips unknown keys instead of copying them: with hundreds of calls
 * in one answer the copy is most of the validation cost.
 */
const toolCallSchema = z.object({
  /** Read with `callId`: some compatible servers send numbers. */
  id: z.unknown(),
  function: z.object({ name: z.string().nullish(), arguments: z.unknown() }),
});
type WireToolCall = z.output<typeof toolCallSchema>;

/** Streamed calls add the `index` that ties fragments together; the function may be absent from a fragment. */
const toolCallDeltaSchema = z.object({
  index: z.number().nullish(),
  id: z.unknown(),
  function: z.object({ name: z.string().nullish(), arguments: z.unknown() }).nullish(),
});
type WireToolCallDelta = z.output<typeof toolCallDeltaSchema>;

/** An unreadable entry becomes null instead of failing the body; it is then skipped with a warning. */
const toolCallsSchema = z.array(toolCallSchema.nullable().catch(null)).nullish();
const toolCallDeltasSchema = z.array(toolCallDeltaSchema.nullable().catch(null)).nullish();

const usageSchema = z.looseObject({
  prompt_tokens: z.number().nullish(),
  completion_tokens: z.number().nullish(),
  prompt_tokens_details: z.looseObject({ cached_tokens: z.number().nullish() }).nullish(),
  completion_tokens_details: z.looseObject({ reasoning_tokens: z.number().nullish() }).nullish(),
});

const errorSchema = z.unknown();

const messageFields = {
  content: contentSchema,
  refusal: z.string().nullish(),
  reasoning_content: z.string().nullish(),
  reasoning: z.string().nullish(),
};
const messageSchema = z.looseObject({ ...messageFields, tool_calls: toolCallsSchema });
const deltaSchema = z.looseObject({ ...messageFields, tool_calls: toolCallDeltasSchema });

const responseSchema = z.looseObject({
  model: z.string().nullish().catch(null),
  choices: z.array(z.looseObject({ message: messageSchema.nullish(), finish_reason: z.string().nullish() })).nullish(),
  usage: usageSchema.nullish(),
  error: errorSchema,
});

const chunkSchema = z.looseObject({
  model: z.string().nullish().catch(null),
  choices: z.array(z.looseObject({ delta: deltaSchema.nullish(), finish_reason: z.string().nullish() })).nullish(),
  usage: usageSchema.nullish(),
  /** Groq reports stream usage here instead of `usage`. */
  x_groq: z.looseObject({ usage: usageSchema.nullish() }).nullish(),
  error: errorSchema,
});

type WireUsage = z.output<typeof usageSchema>;

export class OpenAiCompatibleAdapter extends HttpChatAdapter {
  readonly adapterType: OpenAiCompatibleType;
  protected readonly framing = 'sse' as const;
  protected readonly requiresApiKey: boolean;

  constructor(settings: ProviderSettings & { adapterType: OpenAiCompatibleType }, deps: AdapterDependencies) {
    super(settings, deps);
    this.adapterType = settings.adapterType;
    // A custom server (a local vLLM, LM Studio) often has no key at all.
    this.requiresApiKey = settings.adapterType !== 'custom';
  }

  protected buildRequest(request: ChatRequest, stream: boolean, warnings: string[], apiKey: string | null): WireRequest {
    const base = resolveBaseUrl(this.settings, OPENAI_COMPATIBLE_DEFAULT_URLS[this.adapterType]);
    // Tolerate a pasted full URL.
    const url = base.endsWith('/chat/completions') ? base : `${base}/chat/completions`;

    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: stream ? 'text/event-stream' : 'application/json',
    };
    if (apiKey !== null) headers.authorization = `Bearer ${apiKey}`;
    if (this.adapterType === 'openai' && this.settings.organizationId.trim() !== '') {
      headers['openai-organization'] = this.settings.organizationId.trim();
    }

    const sampling = readSampling(request.options, warnings);
    const body: Record<string, unknown> = {
      model: request.options.model,
      messages: toWireMessages(request.messages),
    };
    if (sampling.temperature !== undefined) body.temperature = sampling.temperature;
    if (sampling.topP !== undefined) body.top_p = sampling.topP;
    if (sampling.frequencyPenalty !== undefined) body.frequency_penalty = sampling.frequencyPenalty;
    if (sampling.presencePenalty !== undefined) body.presence_penalty = sampling.presencePenalty;
    if (sampling.maxTokens !== undefined) {
      // OpenAI's reasoning models refuse `max_tokens`; `max_completion_tokens` works for all its chat models.
      body[this.adapterType === 'openai' ? 'max_completion_tokens' : 'max_tokens'] = sampling.maxTokens;
    }
    if (request.tools !== undefined && request.tools.length > 0) {
      body.tools = request.tools.map((tool) => ({
        type: 'function',
        function: { name: tool.name, description: tool.description, parameters: tool.parameters },
      }));
    }
    Object.assign(body, passThrough(request.options, ACCEPTED_OPTIONS[this.adapterType], this.adapterType, warnings));
    const json = jsonOutputOf(request.options);
    if (json) body.response_format = json.schema ? { type: 'json_schema', json_schema: { name: 'output', schema: json.schema } } : { type: 'json_object' };
    if (stream) {
      body.stream = true;
      // Without it OpenAI sends no usage in a stream. Mistral always sends it and rejects unknown fields.
      if (this.adapterType !== 'mistral') body.stream_options = { include_usage: true };
    }
    return { url, headers, body };
  }

  protected decodeResponse(body: unknown, context: WireContext): DecodedResult {
    const response = parseWire(responseSchema, body, context, 'chat completion');
    throwIfErrorBody(response.error, context);
    const choice = response.choices?.[0];
    if (choice === undefined) throw new ProviderResponseError({ provider: context.provider }, 'chat completion has no choices');
    const message = choice.message;
    const content = readContent(message?.content);
    const splitter = new ThinkTagSplitter();
    splitter.push(content.text);
    splitter.end();
    const rawCalls = (message?.tool_calls ?? []).map(toRawToolCall);
    return assemble({
      split: splitter.result(),
      refusal: message?.refusal ?? '',
      nativeThinking: (message?.reasoning_content ?? message?.reasoning ?? '') + content.thinking,
      rawCalls,
      rawFinishReason: choice.finish_reason ?? null,
      usage: response.usage ?? null,
      model: response.model ?? null,
      context,
    });
  }

  protected createStreamDecoder(context: WireContext): StreamDecoder {
    return new OpenAiStreamDecoder(context);
  }

  protected override isEndSentinel(data: string): boolean {
    return data.trim() === '[DONE]';
  }
}

function toWireMessages(messages: readonly ChatMessage[]): Record<string, unknown>[] {
  const ids = wireToolCallIds(messages);
  return messages.map((message) => toWireMessage(message, ids));
}

/** `ids`: the provider's own call ids, where the service gave a call another one (`wireToolCallIds`). */
function toWireMessage(message: ChatMessage, ids: ReadonlyMap<string, string>): Record<string, unknown> {
  switch (message.role) {
    case 'system':
    case 'user':
      return { role: message.role, content: message.content };
    case 'assistant': {
      const wire: Record<string, unknown> = { role: 'assistant', content: message.content };
      // OpenAI refuses an empty `tool_calls` array; `providerReplay` belongs to other families.
      if (message.tool_calls !== undefined && message.tool_calls.length > 0) {
        wire.tool_calls = message.tool_calls.map((call) => ({
          id: wireToolCallId(ids, call.id),
          type: 'function',
          function: { name: call.function.name, arguments: call.function.arguments },
        }));
      }
      return wire;
    }
    case 'tool':
      return { role: 'tool', tool_call_id: wireToolCallId(ids, message.tool_call_id), content: message.content };
  }
}

/** Text and thinking of a string or array content. */
function readContent(content: z.output<typeof contentSchema>): { text: string; thinking: string } {
  if (content === null || content === undefined) return { text: '', thinking: '' };
  if (typeof content === 'string') return { text: content, thinking: '' };
  let text = '';
  let thinking = '';
  for (const item of content) {
    const part = contentPartSchema.safeParse(item);
    if (!part.success) continue;
    if (part.data.type === 'text' && typeof part.data.text === 'string') text += part.data.text;
    if (part.data.type === 'thinking') {
      const value = part.data.thinking;
      if (typeof value === 'string') thinking += value;
      else if (Array.isArray(value)) for (const piece of value) thinking += piece.text ?? '';
    }
  }
  return { text, thinking };
}

function toRawToolCall(item: WireToolCall | null): RawToolCall {
  // An unreadable entry becomes a nameless call, which `normaliseToolCall` skips with a warning.
  if (item === null) return {};
  return { id: callId(item.id), name: item.function.name ?? null, arguments: item.function.arguments };
}

/** The call id as text; null (an id is then invented) when there is none. */
function callId(value: unknown): string | null {
  if (typeof value === 'string' && value !== '') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return null;
}

function throwIfErrorBody(error: unknown, context: WireContext): void {
  if (error === undefined || error === null) return;
  // OpenRouter reports upstream failures inside a 200 body or stream.
  throw new ProviderResponseError(
    { provider: context.provider, bodyExcerpt: excerptBody(JSON.stringify({ error }), context.apiKey) },
    'provider reported an error',
  );
}

const FINISH_REASONS: Readonly<Record<string, FinishReason>> = {
  stop: 'stop',
  length: 'length',
  tool_calls: 'tool_calls',
  // The pre-tools name of the same thing, still sent by some compatible servers.
  function_call: 'tool_calls',
  content_filter: 'content_filter',
  error: 'error',
};

function assemble(parts: {
  split: { content: string; thinking: string | null };
  /** OpenAI's refusal text; it stands in for the answer when there is no content. */
  refusal: string;
  nativeThinking: string;
  rawCalls: RawToolCall[];
  rawFinishReason: string | null;
  usage: WireUsage | null;
  /** The model the provider reported, if it did. */
  model: string | null;
  context: WireContext;
}): DecodedResult {
  const toolCalls = normaliseToolCalls(parts.rawCalls, parts.context);
  let finishReason: FinishReason = parts.rawFinishReason === null ? 'other' : (FINISH_REASONS[parts.rawFinishReason] ?? 'other');
  // Several compatible servers say `stop` while returning calls; the calls are what matters.
  if (finishReason === 'stop' && toolCalls.length > 0) finishReason = 'tool_calls';
  const thinking = [parts.nativeThinking.trim(), parts.split.thinking ?? ''].filter((text) => text !== '').join('\n\n');
  return {
    content: parts.split.content === '' ? parts.refusal : parts.split.content,
    thinking: thinking === '' ? null : thinking,
    toolCalls,
    finishReason,
    rawFinishReason: parts.rawFinishReason,
    usage: parts.usage === null ? { ...ZERO_USAGE } : toUsage(parts.usage),
    ...(parts.model ? { model: parts.model } : {}),
  };
}

function toUsage(usage: WireUsage): DecodedResult['usage'] {
  return buildUsage({
    prompt: usage.prompt_tokens,
    completion: usage.completion_tokens,
    cachedInput: usage.prompt_tokens_details?.cached_tokens,
    reasoning: usage.completion_tokens_details?.reasoning_tokens,
  });
}

interface PendingToolCall {
  id: string | null;
  name: string;
  /** Argument fragments as streamed, or a whole object from servers that send one. */
  arguments: string | Record<string, unknown>;
}

class OpenAiStreamDecoder implements StreamDecoder {
  readonly complete = false;
  private readonly splitter = new ThinkTagSplitter();
  private nativeThinking = '';
  private refusal = '';
  private readonly calls: PendingToolCall[] = [];
  private readonly callsByIndex = new Map<number, PendingToolCall>();
  private rawFinishReason: string | null = null;
  private usage: WireUsage | null = null;
  private model: string | null = null;

  constructor(private readonly context: WireContext) {}

  accept(frame: unknown): StreamDelta[] {
    const chunk = parseWire(chunkSchema, frame, this.context, 'stream chunk');
    throwIfErrorBody(chunk.error, this.context);
    const usage = chunk.usage ?? chunk.x_groq?.usage;
    if (usage !== null && usage !== undefined) this.usage = usage;
    if (typeof chunk.model === 'string' && chunk.model !== '') this.model = chunk.model;
    const choice = chunk.choices?.[0];
    if (choice === undefined) return [];
    if (typeof choice.finish_reason === 'string') this.rawFinishReason = choice.finish_reason;
    const delta = choice.delta;
    if (delta === null || delta === undefined) return [];

    const out: StreamDelta[] = [];
    const native = delta.reasoning_content ?? delta.reasoning ?? '';
    const content = readContent(delta.content);
    const thinkingDelta = native + content.thinking;
    if (thinkingDelta !== '') {
      this.nativeThinking += thinkingDelta;
      out.push({ type: 'thinking', text: thinkingDelta });
    }
    if (typeof delta.refusal === 'string' && delta.refusal !== '') {
      this.refusal += delta.refusal;
      out.push({ type: 'content', text: delta.refusal });
    }
    if (content.text !== '') {
      for (const segment of this.splitter.push(content.text)) {
        out.push({ type: segment.kind === 'content' ? 'content' : 'thinking', text: segment.text });
      }
    }
    for (const item of delta.tool_calls ?? []) this.acceptToolCallDelta(item);
    return out;
  }

  finish(sawEndSentinel: boolean): DecodedResult {
    if (!sawEndSentinel && this.rawFinishReason === null) {
      throw incompleteStream(this.context, 'no finish_reason and no [DONE]');
    }
    this.splitter.end();
    return assemble({
      split: this.splitter.result(),
      refusal: this.refusal,
      nativeThinking: this.nativeThinking,
      rawCalls: this.calls.map((call) => ({ id: call.id, name: call.name, arguments: call.arguments })),
      rawFinishReason: this.rawFinishReason,
      usage: this.usage,
      model: this.model,
      context: this.context,
    });
  }

  /**
   * Deltas of one call share an `index`; the first carries id and name, the
   * rest argument fragments. A server that sends whole calls without an index
   * starts a new call each time it sends an id.
   */
  private acceptToolCallDelta(item: WireToolCallDelta | null): void {
    if (item === null) {
      this.calls.push({ id: null, name: '', arguments: '' });
      return;
    }
    const { index, function: fn } = item;
    const id = callId(item.id);
    let call = typeof index === 'number' ? this.callsByIndex.get(index) : undefined;
    if (call === undefined && typeof index !== 'number') {
      const last = this.calls[this.calls.length - 1];
      call = id !== null ? this.calls.find((known) => known.id === id) : last;
    }
    // Same index, different id: a server reusing index 0 for every call.
    if (call !== undefined && id !== null && call.id !== null && call.id !== id) call = undefined;
    if (call === undefined) {
      call = { id: null, name: '', arguments: '' };
      this.calls.push(call);
      if (typeof index === 'number') this.callsByIndex.set(index, call);
    }
    if (id !== null && call.id === null) call.id = id;
    if (typeof fn?.name === 'string' && fn.name !== '' && call.name === '') call.name = fn.name;
    const args = fn?.arguments;
    if (typeof args === 'string') {
      call.arguments = typeof call.arguments === 'string' ? call.arguments + args : args;
    } else if (isJsonObject(args)) {
      call.arguments = args;
    }
  }
}
