/**
 * The demo model (`adapterType: "demo"`): a deterministic local model for
 * trying the service, building front ends and demos with no provider account
 * and no network. It sits behind the same `ChatAdapter` interface as the
 * HTTP adapters: it streams its answer in small deltas a few milliseconds
 * apart, reports usage, honours the request's abort signal and raw capture.
 *
 * What it answers (a pure function of the request, `demoAnswer`):
 * - `calculator` offered, no tool result in the conversation yet, and the
 *   last user message contains an arithmetic expression: a call of
 *   `calculator` with that expression;
 * - after a tool result: `The result is <result>.`;
 * - otherwise a short text about the prompt.
 */
import { ProviderCancelledError } from './errors';
import type { ChatAdapter, ChatMessage, ChatRequest, ChatResult, ProviderSettings, StreamEvent, ToolCall } from './types';
import { buildUsage } from './usage';

/** Milliseconds between two deltas unless the call options (a configuration's `options`) or the provider's options set `deltaDelayMs`. */
export const DEFAULT_DEMO_DELTA_DELAY_MS = 8;

/** What the demo model decided to say, before it is streamed. */
export interface DemoAnswer {
  thinking: string | null;
  content: string;
  toolCalls: ToolCall[];
}

/**
 * An arithmetic expression inside free text: digits, parentheses and
 * `+ - * / %` with at least one operator between two operands. The longest
 * such run wins ("What is (2 + 3) * 4?" gives "(2 + 3) * 4").
 */
export function findArithmeticExpression(text: string): string | null {
  let best: string | null = null;
  for (const match of text.matchAll(/[-+(]*[\d.][\d.\s+\-*/%()]*/g)) {
    const candidate = trimExpression(match[0]);
    if (!/[\d.)]\s*[-+*/%]\s*[-+(]*[\d.]/.test(candidate)) continue;
    if (best === null || candidate.length > best.length) best = candidate;
  }
  return best;
}

/** Drops trailing operators and unbalanced parentheses left by the surrounding prose. */
function trimExpression(raw: string): string {
  let expression = raw.trim().replace(/[\s+\-*/%(.]+$/, '');
  let depth = 0;
  for (const character of expression) {
    if (character === '(') depth += 1;
    if (character === ')') depth -= 1;
  }
  while (depth < 0 && expression.endsWith(')')) {
    expression = expression.slice(0, -1).trimEnd();
    depth += 1;
  }
  while (depth > 0 && expression.startsWith('(')) {
    expression = expression.slice(1).trimStart();
    depth -= 1;
  }
  return expression;
}

function lastUserMessage(messages: readonly ChatMessage[]): string {
  for (let index = messages.length - 1; index >= 0; index -= 1) {
    const message = messages[index]!;
    if (message.role === 'user') return message.content;
  }
  return '';
}

/** The demo model's decision for a request: deterministic, no randomness, no clock. */
export function demoAnswer(request: Pick<ChatRequest, 'messages' | 'tools'>): DemoAnswer {
  const { messages } = request;
  const toolResults = messages.filter((message): message is Extract<ChatMessage, { role: 'tool' }> => message.role === 'tool');
  if (toolResults.length > 0) {
    const result = toolResults[toolResults.length - 1]!.content.trim();
    return { thinking: null, content: `The result is ${result}.`, toolCalls: [] };
  }
  const prompt = lastUserMessage(messages).trim();
  const calculatorOffered = (request.tools ?? []).some((tool) => tool.name === 'calculator');
  const expression = calculatorOffered ? findArithmeticExpression(prompt) : null;
  if (expression !== null) {
    const assistantTurns = messages.filter((message) => message.role === 'assistant').length;
    return {
      thinking: `The question contains the arithmetic expression ${expression}; the calculator tool can work it out.`,
      content: '',
      toolCalls: [{ id: `call_demo_${assistantTurns + 1}`, type: 'function', function: { name: 'calculator', arguments: JSON.stringify({ expression }) } }],
    };
  }
  const quoted = prompt.length > 80 ? `${prompt.slice(0, 77)}...` : prompt;
  const words = prompt === '' ? 0 : prompt.split(/\s+/).length;
  return {
    thinking: null,
    content:
      `This is the demo model answering "${quoted}" (${words} ${words === 1 ? 'word' : 'words'}). ` +
      'It runs inside the service without a network. Offer the calculator tool and ask for arithmetic, such as "What is 17 * 23?", to see a tool call.',
    toolCalls: [],
  };
}

/** Small pieces of text as a model streams them: a word with its trailing space. */
export function splitIntoDeltas(text: string): string[] {
  return text.match(/\S+\s*|\s+/g) ?? [];
}

/** A rough token count (four characters a token), enough for usage and cost figures. */
function estimateTokens(text: string): number {
  return Math.ceil(text.length / 4);
}

function promptText(request: ChatRequest): string {
  const parts = request.messages.map((message) => {
    if (message.role === 'assistant') return `${message.content ?? ''}${JSON.stringify(message.tool_calls ?? [])}`;
    return message.content;
  });
  for (const tool of request.tools ?? []) parts.push(tool.name, tool.description, JSON.stringify(tool.parameters));
  return parts.join('\n');
}

export class DemoAdapter implements ChatAdapter {
  readonly adapterType = 'demo' as const;
  private readonly deltaDelayMs: number;

  constructor(private readonly settings: ProviderSettings) {
    this.deltaDelayMs = delayFrom(settings.options.deltaDelayMs) ?? DEFAULT_DEMO_DELTA_DELAY_MS;
  }

  async chat(request: ChatRequest): Promise<ChatResult> {
    let result: ChatResult | null = null;
    for await (const event of this.stream(request)) if (event.type === 'done') result = event.result;
    return result!;
  }

  async *stream(request: ChatRequest): AsyncIterable<StreamEvent> {
    this.throwIfAborted(request.signal);
    const delayMs = delayFrom(request.options.deltaDelayMs) ?? this.deltaDelayMs;
    const answer = demoAnswer(request);
    if (answer.thinking !== null) {
      for (const text of splitIntoDeltas(answer.thinking)) {
        await this.pause(delayMs, request.signal);
        yield { type: 'thinking', text };
      }
    }
    for (const text of splitIntoDeltas(answer.content)) {
      await this.pause(delayMs, request.signal);
      yield { type: 'content', text };
    }
    await this.pause(delayMs, request.signal);
    const completion = answer.content + (answer.thinking ?? '') + answer.toolCalls.map((call) => call.function.name + call.function.arguments).join('');
    const finishReason = answer.toolCalls.length > 0 ? 'tool_calls' : 'stop';
    const result: ChatResult = {
      content: answer.content,
      thinking: answer.thinking,
      toolCalls: answer.toolCalls,
      finishReason,
      rawFinishReason: finishReason,
      usage: buildUsage({ prompt: estimateTokens(promptText(request)), completion: estimateTokens(completion) }),
      warnings: [],
    };
    if (request.options.captureRaw === true) {
      result.raw = { model: request.options.model, demo: true, answer: { content: answer.content, thinking: answer.thinking, tool_calls: answer.toolCalls } };
    }
    yield { type: 'done', result };
  }

  private throwIfAborted(signal: AbortSignal | undefined): void {
    if (signal?.aborted === true) throw new ProviderCancelledError({ provider: this.settings.identifier });
  }

  /** Waits between deltas; an abort ends the wait at once with the adapters' cancellation error. */
  private pause(delayMs: number, signal: AbortSignal | undefined): Promise<void> {
    this.throwIfAborted(signal);
    if (delayMs === 0) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const onAbort = (): void => {
        clearTimeout(timer);
        reject(new ProviderCancelledError({ provider: this.settings.identifier }));
      };
      const timer = setTimeout(() => {
        signal?.removeEventListener('abort', onAbort);
        resolve();
      }, delayMs);
      signal?.addEventListener('abort', onAbort, { once: true });
    });
  }
}

/** A usable delay setting: a finite number of milliseconds from 0 to 10 s. */
function delayFrom(value: unknown): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 && value <= 10_000 ? value : null;
}
