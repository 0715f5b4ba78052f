/**
 * Ollama's native chat API: `POST {base}/api/chat`, `stream: false` for a
 * whole answer or NDJSON lines when streaming (behaviour.md §9). No key is
 * needed locally; one is sent as a bearer token when set (Ollama behind an
 * authenticating proxy, or ollama.com).
 *
 * Ollama sends native `message.thinking`, tool calls with object arguments
 * and usually no call ids — ids are invented, random per call, so they stay
 * unique across rounds. Tool results are matched by `tool_name`, looked up
 * from the assistant turn that made the call.
 *
 * A whole answer is decoded as a stream of one line, so `chat` and `stream`
 * cannot drift apart.
 */
import { z } from 'zod/v4';

import { acceptedKeys, jsonOutputOf, passThrough, readSampling } from './call-options';
import { toolNamesById } from './conversation';
import { resolveBaseUrl } from './credentials';
import { ProviderResponseError, excerptBody } from './errors';
import {
  type DecodedResult,
  HttpChatAdapter,
  type StreamDecoder,
  type StreamDelta,
  type WireRequest,
  incompleteStream,
} from './http-chat-adapter';
import { type RawToolCall, argumentsAsObject, normaliseToolCalls } from './tool-calls';
import type { ChatMessage, ChatRequest, FinishReason } from './types';
import { buildUsage } from './usage';
import { type WireContext, parseWire } from './wire';

export const OLLAMA_DEFAULT_URL = 'http://localhost:11434';

const MODEL_OPTION = 'options.';

/** Top-level request fields, and runtime parameters that go inside `options`. */
const ACCEPTED_OPTIONS = acceptedKeys(
  ['think', 'keep_alive', 'format'],
  [
    'top_k',
    'seed',
    'num_ctx',
    'stop',
    'repeat_penalty',
    'repeat_last_n',
    'min_p',
    'typical_p',
    'num_keep',
    'mirostat',
    'mirostat_tau',
    'mirostat_eta',
  ].map((key) => [key, `${MODEL_OPTION}${key}`] as const),
);

// ---- wire schemas (lenient) ----

const toolCallSchema = z.looseObject({
  id: z.string().nullish(),
  function: z.looseObject({ name: z.string().nullish(), arguments: z.unknown() }).nullish(),
});

const lineSchema = z.looseObject({
  /** The model that answered (every line names it). */
  model: z.string().nullish().catch(null),
  message: z
    .looseObject({
      content: z.string().nullish(),
      thinking: z.string().nullish(),
      tool_calls: z.array(z.unknown()).nullish(),
    })
    .nullish(),
  done: z.boolean().nullish(),
  done_reason: z.string().nullish(),
  prompt_eval_count: z.number().nullish(),
  eval_count: z.number().nullish(),
  error: z.unknown(),
});

export class OllamaAdapter extends HttpChatAdapter {
  readonly adapterType = 'ollama' as const;
  protected readonly framing = 'ndjson' as const;
  protected readonly requiresApiKey = false;

  protected buildRequest(request: ChatRequest, stream: boolean, warnings: string[], apiKey: string | null): WireRequest {
    const base = resolveBaseUrl(this.settings, OLLAMA_DEFAULT_URL);
    // An endpoint entered as `http://host:11434/api` must not become `/api/api/chat`.
    const url = base.endsWith('/api') ? `${base}/chat` : `${base}/api/chat`;
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      accept: stream ? 'application/x-ndjson' : 'application/json',
    };
    if (apiKey !== null) headers.authorization = `Bearer ${apiKey}`;

    const sampling = readSampling(request.options, warnings);
    const modelOptions: Record<string, unknown> = {};
    if (sampling.temperature !== undefined) modelOptions.temperature = sampling.temperature;
    if (sampling.topP !== undefined) modelOptions.top_p = sampling.topP;
    if (sampling.maxTokens !== undefined) modelOptions.num_predict = sampling.maxTokens;
    if (sampling.frequencyPenalty !== undefined) modelOptions.frequency_penalty = sampling.frequencyPenalty;
    if (sampling.presencePenalty !== undefined) modelOptions.presence_penalty = sampling.presencePenalty;

    const body: Record<string, unknown> = {
      model: request.options.model,
      messages: toWireMessages(request.messages),
      // Ollama streams unless told otherwise.
      stream,
    };
    if (request.tools !== undefined && request.tools.length > 0) {
      body.tools = request.tools.map((tool) => ({
        type: 'function',
        function: { name: tool.name, description: tool.description, parameters: tool.parameters },
      }));
    }
    for (const [key, value] of Object.entries(passThrough(request.options, ACCEPTED_OPTIONS, 'ollama', warnings))) {
      if (key.startsWith(MODEL_OPTION)) modelOptions[key.slice(MODEL_OPTION.length)] = value;
      else body[key] = value;
    }
    const json = jsonOutputOf(request.options);
    if (json) body.format = json.schema ?? 'json';
    if (Object.keys(modelOptions).length > 0) body.options = modelOptions;
    return { url, headers, body };
  }

  protected decodeResponse(body: unknown, context: WireContext): DecodedResult {
    const decoder = new OllamaDecoder(context, true);
    decoder.accept(body);
    return decoder.finish();
  }

  protected createStreamDecoder(context: WireContext): StreamDecoder {
    return new OllamaDecoder(context, false);
  }
}

function toWireMessages(messages: readonly ChatMessage[]): Record<string, unknown>[] {
  const names = toolNamesById(messages);
  return messages.map((message) => {
    switch (message.role) {
      case 'system':
      case 'user':
        return { role: message.role, content: message.content };
      case 'assistant': {
        const wire: Record<string, unknown> = { role: 'assistant', content: message.content ?? '' };
        if (message.tool_calls !== undefined && message.tool_calls.length > 0) {
          wire.tool_calls = message.tool_calls.map((call) => ({
            function: { name: call.function.name, arguments: argumentsAsObject(call.function.arguments) },
          }));
        }
        return wire;
      }
      case 'tool': {
        const wire: Record<string, unknown> = { role: 'tool', content: message.content };
        const name = names.get(message.tool_call_id);
        if (name !== undefined) wire.tool_name = name;
        return wire;
      }
    }
  });
}

const DONE_REASONS: Readonly<Record<string, FinishReason>> = {
  stop: 'stop',
  length: 'length',
};

class OllamaDecoder implements StreamDecoder {
  complete = false;
  private content = '';
  private thinking = '';
  private readonly rawCalls: RawToolCall[] = [];
  private doneReason: string | null = null;
  private promptTokens: number | null = null;
  private completionTokens: number | null = null;
  private model: string | null = null;

  /** `whole`: a non-streamed answer, complete by definition even if it omits the end marker. */
  constructor(
    private readonly context: WireContext,
    private readonly whole: boolean,
  ) {}

  accept(frame: unknown): StreamDelta[] {
    const line = parseWire(lineSchema, frame, this.context, 'chat response');
    if (line.error !== undefined && line.error !== null) {
      // Ollama reports a failure mid-stream (model unloaded, out of memory) as `{"error": "..."}`.
      throw new ProviderResponseError(
        { provider: this.context.provider, bodyExcerpt: excerptBody(JSON.stringify({ error: line.error }), this.context.apiKey) },
        'provider reported an error',
      );
    }
    if (typeof line.model === 'string' && line.model !== '') this.model = line.model;
    const out: StreamDelta[] = [];
    const message = line.message;
    if (typeof message?.thinking === 'string' && message.thinking !== '') {
      this.thinking += message.thinking;
      out.push({ type: 'thinking', text: message.thinking });
    }
    if (typeof message?.content === 'string' && message.content !== '') {
      this.content += message.content;
      out.push({ type: 'content', text: message.content });
    }
    for (const item of message?.tool_calls ?? []) {
      const parsed = toolCallSchema.safeParse(item);
      this.rawCalls.push(
        parsed.success
          ? { id: parsed.data.id ?? null, name: parsed.data.function?.name ?? null, arguments: parsed.data.function?.arguments }
          : {},
      );
    }
    if (line.done === true) {
      this.complete = true;
      this.doneReason = line.done_reason ?? null;
      this.promptTokens = line.prompt_eval_count ?? null;
      this.completionTokens = line.eval_count ?? null;
    }
    return out;
  }

  finish(): DecodedResult {
    if (!this.whole && !this.complete) throw incompleteStream(this.context, 'no line with done: true');
    const toolCalls = normaliseToolCalls(this.rawCalls, this.context);
    // Older Ollama versions send `done` without a reason; that is a natural stop.
    let finishReason: FinishReason = this.doneReason === null ? 'stop' : (DONE_REASONS[this.doneReason] ?? 'other');
    if (finishReason === 'stop' && toolCalls.length > 0) finishReason = 'tool_calls';
    return {
      content: this.content,
      thinking: this.thinking === '' ? null : this.thinking,
      toolCalls,
      finishReason,
      rawFinishReason: this.doneReason,
      // Ollama leaves out `prompt_eval_count` when the whole prompt came from its cache.
      usage: buildUsage({ prompt: this.promptTokens, completion: this.completionTokens }),
      ...(this.model ? { model: this.model } : {}),
    };
  }
}
