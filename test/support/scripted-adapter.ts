/**
 * A scripted fake model for loop tests (no network): each call takes the next
 * reply of the script and records the request it was given. Shared by the
 * engine's unit tests and the end-to-end tests.
 *
 *     const adapter = createScriptedAdapter([
 *       { toolCalls: [{ name: 'calculator', arguments: { expression: '2+3' } }], usage: [10, 5] },
 *       { content: 'It is 5.', usage: [12, 4] },
 *     ]);
 */

import type {
  AdapterType,
  ChatAdapter,
  ChatRequest,
  ChatResult,
  FinishReason,
  StreamEvent,
  ToolCall,
  ToolDefinition,
  Usage,
} from '../../src/providers/adapters/types';

export interface ScriptedToolCall {
  /** Default `call_<call number>_<index>`. */
  id?: string;
  name: string;
  /** A string is sent as is; anything else is JSON-encoded. Default `""`. */
  arguments?: string | Record<string, unknown>;
}

/** One answer of the fake model. */
export interface ScriptedAnswer {
  content?: string;
  thinking?: string | null;
  toolCalls?: ScriptedToolCall[];
  /** `[prompt, completion]` or a full usage; default 0 / 0. */
  usage?: readonly [number, number] | Usage;
  /** Default `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: FinishReason;
  rawFinishReason?: string | null;
  warnings?: string[];
  /** Returned only when the request asked for raw capture; default `{ scripted: true, call: N }`. */
  raw?: unknown;
  /** Wait this long before answering (the request's signal still cancels). */
  delayMs?: number;
  /** For `stream`: the content deltas; default the whole content as one delta. */
  contentChunks?: string[];
}

export type ScriptedReply =
  | ScriptedAnswer
  /** The call fails with this error (e.g. a provider error class). */
  | { error: unknown }
  /** The call never answers; it rejects once the request's signal aborts. */
  | { hang: true }
  /** Computes the answer from the request (call number starts at 1). */
  | ((request: ChatRequest, callNumber: number) => ScriptedAnswer | Promise<ScriptedAnswer>);

/** A request as the fake model received it (a deep copy; the signal is left out). */
export interface RecordedRequest {
  messages: ChatRequest['messages'];
  tools: ToolDefinition[] | undefined;
  options: ChatRequest['options'];
}

export interface ScriptedAdapter extends ChatAdapter {
  readonly requests: RecordedRequest[];
  /** Replies not used yet. */
  remaining(): number;
}

export interface ScriptedAdapterOptions {
  adapterType?: AdapterType;
  /**
   * Keep a deep copy of every request in `requests` (default true, for tests to inspect). Benchmarks
   * turn it off: a provider keeps nothing of a request, and the copies, the whole transcript each,
   * lived as long as the run and made every young-generation collection copy them.
   */
  recordRequests?: boolean;
}

/** Builds the id-bearing tool call the model would send. */
export function scriptedToolCall(call: ScriptedToolCall, callNumber: number, index: number): ToolCall {
  const args = call.arguments ?? '';
  return {
    id: call.id ?? `call_${callNumber}_${index + 1}`,
    type: 'function',
    function: { name: call.name, arguments: typeof args === 'string' ? args : JSON.stringify(args) },
  };
}

function toUsage(usage: ScriptedAnswer['usage']): Usage {
  if (usage === undefined) {
    return { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
  }
  if (Array.isArray(usage)) {
    const [promptTokens, completionTokens] = usage as readonly [number, number];
    return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
  }
  return { ...(usage as Usage) };
}

function toResult(answer: ScriptedAnswer, request: ChatRequest, callNumber: number): ChatResult {
  const toolCalls = (answer.toolCalls ?? []).map((call, index) => scriptedToolCall(call, callNumber, index));
  const result: ChatResult = {
    content: answer.content ?? '',
    thinking: answer.thinking ?? null,
    toolCalls,
    finishReason: answer.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop'),
    rawFinishReason: answer.rawFinishReason ?? null,
    usage: toUsage(answer.usage),
    warnings: answer.warnings ?? [],
  };
  if (request.options.captureRaw === true) {
    result.raw = answer.raw ?? { scripted: true, call: callNumber };
  }
  return result;
}

function abortError(): Error {
  const error = new Error('The scripted call was aborted.');
  error.name = 'AbortError';
  return error;
}

function wait(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(abortError());
      return;
    }
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(abortError());
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    // A hanging call must not keep the process alive on its own.
    timer.unref();
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

function isErrorReply(reply: ScriptedReply): reply is { error: unknown } {
  return typeof reply === 'object' && 'error' in reply;
}

function isHangReply(reply: ScriptedReply): reply is { hang: true } {
  return typeof reply === 'object' && 'hang' in reply;
}

export function createScriptedAdapter(
  script: readonly ScriptedReply[],
  options: ScriptedAdapterOptions = {},
): ScriptedAdapter {
  const queue = [...script];
  const requests: RecordedRequest[] = [];
  const record = options.recordRequests ?? true;
  let calls = 0;

  async function answer(request: ChatRequest): Promise<{ result: ChatResult; chunks: string[] }> {
    if (record) {
      requests.push(
        structuredClone({ messages: request.messages, tools: request.tools, options: request.options }) as RecordedRequest,
      );
    }
    const callNumber = (calls += 1);
    const reply = queue.shift();
    if (reply === undefined) {
      throw new Error(`createScriptedAdapter: no scripted reply for call ${callNumber}`);
    }
    if (isErrorReply(reply)) {
      throw reply.error;
    }
    if (isHangReply(reply)) {
      await wait(2 ** 31 - 1, request.signal);
      throw abortError();
    }
    const scripted = typeof reply === 'function' ? await reply(request, callNumber) : reply;
    if (scripted.delayMs !== undefined) {
      await wait(scripted.delayMs, request.signal);
    }
    const result = toResult(scripted, request, callNumber);
    const chunks = scripted.contentChunks ?? (result.content === '' ? [] : [result.content]);
    return { result, chunks };
  }

  return {
    adapterType: options.adapterType ?? 'custom',
    requests,
    remaining: () => queue.length,
    async chat(request: ChatRequest): Promise<ChatResult> {
      return (await answer(request)).result;
    },
    async *stream(request: ChatRequest): AsyncIterable<StreamEvent> {
      const { result, chunks } = await answer(request);
      if (result.thinking !== null && result.thinking !== '') {
        yield { type: 'thinking', text: result.thinking };
      }
      for (const text of chunks) {
        yield { type: 'content', text };
      }
      yield { type: 'done', result };
    },
  };
}
