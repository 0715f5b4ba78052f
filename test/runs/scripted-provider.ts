/**
 * A scripted OpenAI-compatible provider for end-to-end run tests: a real
 * node:http server on 127.0.0.1, port 0, answering `POST /chat/completions`
 * in the OpenAI wire format — a JSON body, or an SSE stream (`data: {...}`
 * chunks, a final usage chunk when `stream_options.include_usage` asks for
 * it, then `data: [DONE]`) when the request says `stream: true`.
 *
 * It answers from a queue of scripted replies, in order, and records every
 * request it receives. When the queue is empty it answers 418 with a message
 * saying so (a 4xx is not retried), so a test that under-scripts fails loudly
 * instead of hanging.
 */
import { createServer, type IncomingHttpHeaders, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ScriptedToolCall {
  /** Defaults to `call_<request>_<index>`. */
  id?: string;
  name: string;
  /** A string is sent verbatim (it may be invalid JSON on purpose); an object is JSON-encoded. */
  arguments: string | Record<string, unknown>;
}

export interface ScriptedReply {
  /** The assistant's content. */
  text?: string;
  /** Sent as `reasoning_content`. */
  thinking?: string;
  toolCalls?: ScriptedToolCall[];
  /** Reported usage; omitted from the answer when absent. */
  usage?: { prompt: number; completion: number };
  /** Defaults to `tool_calls` when there are tool calls, else `stop`. */
  finishReason?: string;
  /** Wait this long before answering (the client may give up first). */
  delayMs?: number;
  /** Wait for this before answering. */
  gate?: Promise<void>;
  /** Streaming: how the content is cut into delta chunks (must join to `text`). */
  contentChunks?: string[];
  /** Streaming: pause between chunks. */
  chunkDelayMs?: number;
  /** Streaming: after this many frames are written, wait for `gate` before the rest. */
  holdAfter?: { frames: number; gate: Promise<void> };
  /** Answer with this HTTP status and `errorBody` instead of a completion. */
  status?: number;
  errorBody?: string;
  /** Extra top-level fields of the answer (non-streaming) or of every frame (streaming), e.g. what a proxy echoes. */
  extra?: Record<string, unknown>;
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: IncomingHttpHeaders;
  /** The request body exactly as received. */
  text: string;
  body: Record<string, unknown>;
  /** The JSON body answered (non-streaming), or the list of SSE chunk objects sent (streaming). */
  answered: unknown;
  /** SSE chunks written so far (streaming only). */
  chunksSent: number;
  /** True once the client went away before the answer was complete. */
  closedEarly: boolean;
  /** Resolves when the exchange is over, either way. */
  finished: Promise<void>;
}

export class ScriptedProvider {
  readonly requests: RecordedRequest[] = [];
  private readonly queue: ScriptedReply[] = [];
  private readonly waiters: { count: number; resolve: () => void }[] = [];

  private constructor(
    private readonly server: Server,
    readonly url: string,
  ) {}

  static async start(): Promise<ScriptedProvider> {
    let provider: ScriptedProvider | null = null;
    const server = createServer((request, response) => {
      provider?.handle(request, response).catch((error: unknown) => {
        if (!response.headersSent) response.writeHead(599, { 'content-type': 'text/plain' });
        response.end(`scripted provider crashed: ${String(error)}`);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const { port } = server.address() as AddressInfo;
    provider = new ScriptedProvider(server, `http://127.0.0.1:${port}`);
    return provider;
  }

  /** Queues replies, answered in order, one per request. */
  script(...replies: ScriptedReply[]): this {
    this.queue.push(...replies);
    return this;
  }

  get pending(): number {
    return this.queue.length;
  }

  /** Resolves with the `count`-th request (1-based) once it has arrived. */
  async waitForRequest(count: number, timeoutMs = 10_000): Promise<RecordedRequest> {
    if (this.requests.length < count) {
      await withTimeout(
        new Promise<void>((resolve) => this.waiters.push({ count, resolve })),
        timeoutMs,
        `the scripted provider did not receive request #${count} (got ${this.requests.length})`,
      );
    }
    return this.requests[count - 1]!;
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  private async handle(request: IncomingMessage, response: ServerResponse): Promise<void> {
    const chunks: Buffer[] = [];
    for await (const chunk of request) chunks.push(chunk as Buffer);
    const text = Buffer.concat(chunks).toString('utf8');
    let body: Record<string, unknown> = {};
    try {
      body = JSON.parse(text) as Record<string, unknown>;
    } catch {
      // Recorded as is; the test asserts on it.
    }

    let finish!: () => void;
    const record: RecordedRequest = {
      method: request.method ?? '',
      path: request.url ?? '',
      headers: request.headers,
      text,
      body,
      answered: undefined,
      chunksSent: 0,
      closedEarly: false,
      finished: new Promise<void>((resolve) => (finish = resolve)),
    };
    const index = this.requests.push(record);
    for (const waiter of this.waiters.filter((w) => w.count <= this.requests.length)) {
      this.waiters.splice(this.waiters.indexOf(waiter), 1);
      waiter.resolve();
    }

    let closed = false;
    const closedSignal = new Promise<void>((resolve) =>
      response.on('close', () => {
        closed = true;
        if (!response.writableFinished) record.closedEarly = true;
        resolve();
        finish();
      }),
    );
    const pause = (ms: number): Promise<void> => {
      let timer: NodeJS.Timeout | undefined;
      return Promise.race([new Promise<void>((resolve) => (timer = setTimeout(resolve, ms))), closedSignal]).finally(() => clearTimeout(timer));
    };

    if (request.method !== 'POST' || !(request.url ?? '').endsWith('/chat/completions')) {
      response.writeHead(404, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: `scripted provider: no route ${request.method} ${request.url}` } }));
      return;
    }

    const reply = this.queue.shift();
    if (reply === undefined) {
      response.writeHead(418, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ error: { message: `scripted provider: no reply queued for request #${index}` } }));
      return;
    }
    if (reply.gate) await Promise.race([reply.gate, closedSignal]);
    if (reply.delayMs) await pause(reply.delayMs);
    if (closed) return;

    if (reply.status !== undefined) {
      response.writeHead(reply.status, { 'content-type': 'application/json' });
      response.end(reply.errorBody ?? JSON.stringify({ error: { message: `scripted failure ${reply.status}` } }));
      return;
    }

    const model = typeof body.model === 'string' ? body.model : 'scripted-model';
    const id = `chatcmpl-scripted-${index}`;
    const created = Math.floor(Date.now() / 1000);
    const toolCalls = (reply.toolCalls ?? []).map((call, i) => ({
      id: call.id ?? `call_${index}_${i}`,
      type: 'function' as const,
      function: { name: call.name, arguments: typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments) },
    }));
    const finishReason = reply.finishReason ?? (toolCalls.length > 0 ? 'tool_calls' : 'stop');
    const usage = reply.usage
      ? { prompt_tokens: reply.usage.prompt, completion_tokens: reply.usage.completion, total_tokens: reply.usage.prompt + reply.usage.completion }
      : undefined;

    if (body.stream !== true) {
      const message: Record<string, unknown> = { role: 'assistant', content: reply.text ?? (toolCalls.length > 0 ? null : '') };
      if (reply.thinking !== undefined) message.reasoning_content = reply.thinking;
      if (toolCalls.length > 0) message.tool_calls = toolCalls;
      const answer: Record<string, unknown> = {
        id,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message, logprobs: null, finish_reason: finishReason }],
        ...reply.extra,
      };
      if (usage) answer.usage = usage;
      record.answered = answer;
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify(answer));
      return;
    }

    const base = { id, object: 'chat.completion.chunk', created, model, ...reply.extra };
    const frames: Record<string, unknown>[] = [];
    const delta = (d: Record<string, unknown>, finish: string | null = null) => frames.push({ ...base, choices: [{ index: 0, delta: d, logprobs: null, finish_reason: finish }] });
    delta({ role: 'assistant', content: '' });
    if (reply.thinking !== undefined) delta({ reasoning_content: reply.thinking });
    const content = reply.text ?? '';
    const pieces = reply.contentChunks ?? (content === '' ? [] : splitInto(content, 3));
    if (pieces.join('') !== content) throw new Error('contentChunks must join to text');
    for (const piece of pieces) delta({ content: piece });
    toolCalls.forEach((call, i) => {
      delta({ tool_calls: [{ index: i, id: call.id, type: 'function', function: { name: call.function.name, arguments: '' } }] });
      // Arguments arrive in fragments, as OpenAI sends them.
      for (const fragment of splitInto(call.function.arguments, 2)) delta({ tool_calls: [{ index: i, function: { arguments: fragment } }] });
    });
    delta({}, finishReason);
    const streamOptions = body.stream_options as { include_usage?: boolean } | undefined;
    if (usage && streamOptions?.include_usage === true) frames.push({ ...base, choices: [], usage });
    record.answered = frames;

    response.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache', connection: 'keep-alive' });
    for (const frame of frames) {
      if (closed) return;
      response.write(`data: ${JSON.stringify(frame)}\n\n`);
      record.chunksSent += 1;
      if (reply.chunkDelayMs) await pause(reply.chunkDelayMs);
      if (reply.holdAfter && record.chunksSent === reply.holdAfter.frames) await Promise.race([reply.holdAfter.gate, closedSignal]);
    }
    if (closed) return;
    response.end('data: [DONE]\n\n');
  }
}

/** Cuts text into `parts` pieces of about the same length (fewer when it is short). */
function splitInto(text: string, parts: number): string[] {
  const chars = Array.from(text);
  if (chars.length === 0) return [];
  const size = Math.ceil(chars.length / parts);
  const out: string[] = [];
  for (let i = 0; i < chars.length; i += size) out.push(chars.slice(i, i + size).join(''));
  return out;
}

export function withTimeout<T>(promise: Promise<T>, ms: number, message: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${message} (after ${ms} ms)`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** A promise with its resolver, to hold a scripted reply until the test lets it go. */
export function gate(): { promise: Promise<void>; open: () => void } {
  let open!: () => void;
  const promise = new Promise<void>((resolve) => (open = resolve));
  return { promise, open };
}
