/**
 * Google Gemini API: `POST {base}/models/{model}:generateContent` (and
 * `:streamGenerateContent?alt=sse`), key in `x-goog-api-key` so it never
 * appears in a URL or an access log (behaviour.md §9).
 *
 * Conversions at this edge:
 * - system messages → `systemInstruction` (all of them, joined; see
 *   `liftSystemMessages`);
 * - assistant turns → role `model` with `functionCall` parts; tool results →
 *   `functionResponse` parts in one user turn, named by looking the call id up
 *   in the earlier assistant turn (Gemini matches results by function name);
 * - Gemini usually sends no call ids, so ids are invented, random per call,
 *   never positional: unique across rounds;
 * - a call's `thoughtSignature` travels in `providerReplay`; Gemini 3 refuses
 *   a replayed call without one.
 *
 * A whole answer is decoded as a stream of one chunk, so `chat` and `stream`
 * cannot drift apart.
 */
import { z } from 'zod/v4';

import { acceptedKeys, jsonOutputOf, passThrough, readSampling } from './call-options';
import { decodeReplay, encodeReplay, liftSystemMessages, toolNamesById } from './conversation';
import { resolveBaseUrl } from './credentials';
import {
  type DecodedResult,
  HttpChatAdapter,
  type StreamDecoder,
  type StreamDelta,
  type WireRequest,
  incompleteStream,
} from './http-chat-adapter';
import { type RawToolCall, argumentsAsObject, normaliseToolCalls } from './tool-calls';
import type { ChatMessage, ChatRequest, FinishReason, ToolCall } from './types';
import { buildUsage, ZERO_USAGE } from './usage';
import { type WireContext, parseWire } from './wire';

export const GEMINI_DEFAULT_URL = 'https://generativelanguage.googleapis.com/v1beta';

/**
 * Google documents this value for function calls that have no signature of
 * their own (history written by another model, or by a caller that dropped
 * it): Gemini 3 then skips the check instead of refusing the request.
 */
export const GEMINI_SKIP_SIGNATURE = 'skip_thought_signature_validator';

const GENERATION_CONFIG = 'generationConfig.';

/** Option key → wire key; `generationConfig.` ones go inside `generationConfig`. */
const ACCEPTED_OPTIONS = acceptedKeys(
  ['safetySettings', 'toolConfig', 'cachedContent'],
  [
    ['top_k', `${GENERATION_CONFIG}topK`],
    ['topK', `${GENERATION_CONFIG}topK`],
    ['stop', `${GENERATION_CONFIG}stopSequences`],
    ['stopSequences', `${GENERATION_CONFIG}stopSequences`],
    ['seed', `${GENERATION_CONFIG}seed`],
    ['thinkingConfig', `${GENERATION_CONFIG}thinkingConfig`],
    ['responseMimeType', `${GENERATION_CONFIG}responseMimeType`],
    ['responseSchema', `${GENERATION_CONFIG}responseSchema`],
    ['responseJsonSchema', `${GENERATION_CONFIG}responseJsonSchema`],
  ],
);

// ---- wire schemas (lenient) ----

const partSchema = z.looseObject({
  text: z.string().nullish(),
  thought: z.boolean().nullish(),
  thoughtSignature: z.string().nullish(),
  functionCall: z
    .looseObject({
      id: z.string().nullish(),
      name: z.string().nullish(),
      args: z.unknown(),
    })
    .nullish(),
});

const usageSchema = z.looseObject({
  promptTokenCount: z.number().nullish(),
  candidatesTokenCount: z.number().nullish(),
  cachedContentTokenCount: z.number().nullish(),
  thoughtsTokenCount: z.number().nullish(),
  toolUsePromptTokenCount: z.number().nullish(),
});
type WireUsage = z.output<typeof usageSchema>;

const responseSchema = z.looseObject({
  candidates: z
    .array(
      z.looseObject({
        content: z.looseObject({ parts: z.array(z.unknown()).nullish() }).nullish(),
        finishReason: z.string().nullish(),
      }),
    )
    .nullish(),
  usageMetadata: usageSchema.nullish(),
  promptFeedback: z.looseObject({ blockReason: z.string().nullish() }).nullish(),
  /** The model that answered (e.g. `gemini-2.5-flash-001` for `gemini-2.5-flash`). */
  modelVersion: z.string().nullish().catch(null),
});

export class GeminiAdapter extends HttpChatAdapter {
  readonly adapterType = 'gemini' as const;
  protected readonly framing = 'sse' as const;
  protected readonly requiresApiKey = true;

  protected buildRequest(request: ChatRequest, stream: boolean, warnings: string[], apiKey: string | null): WireRequest {
    const base = resolveBaseUrl(this.settings, GEMINI_DEFAULT_URL);
    const model = modelPath(request.options.model);
    const url = stream ? `${base}/${model}:streamGenerateContent?alt=sse` : `${base}/${model}:generateContent`;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: stream ? 'text/event-stream' : 'application/json',
    };
    if (apiKey !== null) headers['x-goog-api-key'] = apiKey;

    const { system, turns } = liftSystemMessages(request.messages);
    const sampling = readSampling(request.options, warnings);
    const generationConfig: Record<string, unknown> = {};
    if (sampling.temperature !== undefined) generationConfig.temperature = sampling.temperature;
    if (sampling.topP !== undefined) generationConfig.topP = sampling.topP;
    if (sampling.maxTokens !== undefined) generationConfig.maxOutputTokens = sampling.maxTokens;
    if (sampling.frequencyPenalty !== undefined) generationConfig.frequencyPenalty = sampling.frequencyPenalty;
    if (sampling.presencePenalty !== undefined) generationConfig.presencePenalty = sampling.presencePenalty;

    const body: Record<string, unknown> = {
      contents: this.toContents(turns, toolNamesById(request.messages)),
    };
    if (system !== null) body.systemInstruction = { parts: [{ text: system }] };
    if (request.tools !== undefined && request.tools.length > 0) {
      body.tools = [
        {
          functionDeclarations: request.tools.map((tool) => ({
            name: tool.name,
            description: tool.description,
            // Full JSON Schema; `parameters` takes only an OpenAPI subset and refuses e.g. `additionalProperties`.
            parametersJsonSchema: tool.parameters,
          })),
        },
      ];
    }
    for (const [key, value] of Object.entries(passThrough(request.options, ACCEPTED_OPTIONS, 'gemini', warnings))) {
      if (key.startsWith(GENERATION_CONFIG)) {
        const wireKey = key.slice(GENERATION_CONFIG.length);
        generationConfig[wireKey] = wireKey === 'stopSequences' && typeof value === 'string' ? [value] : value;
      } else {
        body[key] = value;
      }
    }
    const json = jsonOutputOf(request.options);
    if (json) {
      generationConfig.responseMimeType = 'application/json';
      if (json.schema) generationConfig.responseJsonSchema = json.schema;
    }
    if (Object.keys(generationConfig).length > 0) body.generationConfig = generationConfig;
    return { url, headers, body };
  }

  protected decodeResponse(body: unknown, context: WireContext): DecodedResult {
    const decoder = new GeminiDecoder(context, true);
    decoder.accept(body);
    return decoder.finish();
  }

  protected createStreamDecoder(context: WireContext): StreamDecoder {
    return new GeminiDecoder(context, false);
  }

  private toContents(turns: ReadonlyArray<Exclude<ChatMessage, { role: 'system' }>>, names: Map<string, string>): unknown[] {
    const contents: { role: 'user' | 'model'; parts: Record<string, unknown>[] }[] = [];
    let toolResults: Record<string, unknown>[] | null = null;
    for (const message of turns) {
      if (message.role === 'tool') {
        const name = names.get(message.tool_call_id);
        if (name === undefined) {
          this.deps.logger.warn(
            { provider: this.settings.identifier, toolCallId: message.tool_call_id },
            'tool result for a call id no assistant turn made; sent under the name "unknown"',
          );
        }
        const part = { functionResponse: { name: name ?? 'unknown', response: { name: name ?? 'unknown', content: message.content } } };
        if (toolResults === null) {
          toolResults = [part];
          contents.push({ role: 'user', parts: toolResults });
        } else {
          toolResults.push(part);
        }
        continue;
      }
      toolResults = null;
      if (message.role === 'user') {
        contents.push({ role: 'user', parts: [{ text: message.content }] });
        continue;
      }
      const parts: Record<string, unknown>[] = [];
      if (message.content !== null && message.content !== '') parts.push({ text: message.content });
      (message.tool_calls ?? []).forEach((call: ToolCall, position: number) => {
        const part: Record<string, unknown> = {
          functionCall: { name: call.function.name, args: argumentsAsObject(call.function.arguments) },
        };
        // Gemini signs the first call of a step; only that one is required back.
        const signature = decodeReplay(call, 'gemini') ?? (position === 0 ? GEMINI_SKIP_SIGNATURE : null);
        if (signature !== null) part.thoughtSignature = signature;
        parts.push(part);
      });
      if (parts.length > 0) contents.push({ role: 'model', parts });
    }
    return contents;
  }
}

/** `gemini-2.5-flash` → `models/gemini-2.5-flash`; names already carrying a collection are kept. */
function modelPath(model: string): string {
  const trimmed = model.trim();
  if (trimmed.startsWith('models/') || trimmed.startsWith('tunedModels/')) return trimmed;
  return `models/${encodeURIComponent(trimmed)}`;
}

const FINISH_REASONS: Readonly<Record<string, FinishReason>> = {
  STOP: 'stop',
  MAX_TOKENS: 'length',
  SAFETY: 'content_filter',
  RECITATION: 'content_filter',
  BLOCKLIST: 'content_filter',
  PROHIBITED_CONTENT: 'content_filter',
  SPII: 'content_filter',
  IMAGE_SAFETY: 'content_filter',
  MALFORMED_FUNCTION_CALL: 'error',
  UNEXPECTED_TOOL_CALL: 'error',
};

/** Reads response chunks: a streamed answer chunk by chunk, a whole answer as its only chunk. */
class GeminiDecoder implements StreamDecoder {
  readonly complete = false;
  private content = '';
  private thinking = '';
  private readonly rawCalls: RawToolCall[] = [];
  private rawFinishReason: string | null = null;
  private blockReason: string | null = null;
  private usage: WireUsage | null = null;
  private model: string | null = null;

  /** `whole`: a non-streamed answer, complete by definition even if it omits the end marker. */
  constructor(
    private readonly context: WireContext,
    private readonly whole: boolean,
  ) {}

  accept(frame: unknown): StreamDelta[] {
    const chunk = parseWire(responseSchema, frame, this.context, 'generateContent response');
    if (chunk.usageMetadata !== null && chunk.usageMetadata !== undefined) this.usage = chunk.usageMetadata;
    if (typeof chunk.modelVersion === 'string' && chunk.modelVersion !== '') this.model = chunk.modelVersion;
    if (typeof chunk.promptFeedback?.blockReason === 'string') this.blockReason = chunk.promptFeedback.blockReason;
    const candidate = chunk.candidates?.[0];
    if (candidate === undefined) return [];
    if (typeof candidate.finishReason === 'string') this.rawFinishReason = candidate.finishReason;
    const out: StreamDelta[] = [];
    for (const item of candidate.content?.parts ?? []) {
      const parsed = partSchema.safeParse(item);
      if (!parsed.success) continue;
      const part = parsed.data;
      if (part.functionCall !== null && part.functionCall !== undefined) {
        const call: RawToolCall = { id: part.functionCall.id ?? null, name: part.functionCall.name ?? null, arguments: part.functionCall.args };
        if (typeof part.thoughtSignature === 'string' && part.thoughtSignature !== '') {
          call.providerReplay = encodeReplay('gemini', part.thoughtSignature);
        }
        this.rawCalls.push(call);
      } else if (typeof part.text === 'string' && part.text !== '') {
        if (part.thought === true) {
          this.thinking += part.text;
          out.push({ type: 'thinking', text: part.text });
        } else {
          this.content += part.text;
          out.push({ type: 'content', text: part.text });
        }
      }
    }
    return out;
  }

  finish(): DecodedResult {
    if (!this.whole && this.rawFinishReason === null && this.blockReason === null) {
      throw incompleteStream(this.context, 'no finishReason');
    }
    const toolCalls = normaliseToolCalls(this.rawCalls, this.context);
    let finishReason: FinishReason;
    let rawFinishReason = this.rawFinishReason;
    if (rawFinishReason === null && this.blockReason !== null) {
      // The prompt itself was blocked: no candidate at all.
      finishReason = 'content_filter';
      rawFinishReason = this.blockReason;
    } else {
      finishReason = rawFinishReason === null ? 'other' : (FINISH_REASONS[rawFinishReason] ?? 'other');
      // Gemini ends a function-calling turn with STOP.
      if (finishReason === 'stop' && toolCalls.length > 0) finishReason = 'tool_calls';
    }
    return {
      content: this.content,
      thinking: this.thinking === '' ? null : this.thinking,
      toolCalls,
      finishReason,
      rawFinishReason,
      usage: this.usage === null ? { ...ZERO_USAGE } : toUsage(this.usage),
      ...(this.model ? { model: this.model } : {}),
    };
  }
}

/**
 * Thought tokens are billed as output but not counted in
 * `candidatesTokenCount`, so they are added to completion (and reported as
 * reasoning, part of completion as with OpenAI). Tool-use prompt tokens are
 * input the same way.
 */
function toUsage(usage: WireUsage): DecodedResult['usage'] {
  return buildUsage({
    prompt: Math.max(0, usage.promptTokenCount ?? 0) + Math.max(0, usage.toolUsePromptTokenCount ?? 0),
    completion: Math.max(0, usage.candidatesTokenCount ?? 0) + Math.max(0, usage.thoughtsTokenCount ?? 0),
    cachedInput: usage.cachedContentTokenCount,
    reasoning: usage.thoughtsTokenCount,
  });
}
