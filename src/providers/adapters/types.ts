/**
 * The one narrow interface between the service and a model provider.
 *
 * Inside the service every message is OpenAI-shaped; each adapter converts at
 * its own edge (behaviour.md §9) and hands back a normalised result. Nothing
 * outside `src/providers/adapters/` knows a provider's wire format.
 */

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
  /**
   * Opaque adapter-owned state that must travel back with this call on the
   * next round: Gemini's `thoughtSignature` (Gemini 3 rejects a replayed
   * function call without it) and Anthropic's signed thinking blocks (needed
   * when extended thinking is on). Prefixed with the wire family that wrote
   * it, so another provider ignores it. Keep it on the assistant turn as is.
   */
  providerReplay?: string;
  /**
   * The id the provider gave the call, when it is not `id`: the provider
   * sent two calls of one answer under the same id and this one was given an
   * id of its own (`<id>#2`, see `uniqueToolCallIds`). Adapters whose wire
   * format pairs calls and results by id send this one back (`wireToolCallId`).
   */
  wireId?: string;
}

/**
 * A message in the service's own (OpenAI) shape. Messages are values: once
 * made, nothing changes one in place (an adapter maps them to its wire
 * objects; the loop appends new ones). A run's transcript, the steps it
 * stores and the requests it sends share them.
 */
export type ChatMessage =
  | { role: 'system'; content: string }
  | { role: 'user'; content: string }
  | { role: 'assistant'; content: string | null; tool_calls?: ToolCall[] }
  | { role: 'tool'; tool_call_id: string; content: string };

export type ChatRole = ChatMessage['role'];

/** A tool as offered to the model: name, description and a JSON schema of its arguments. */
export interface ToolDefinition {
  name: string;
  description: string;
  parameters: Record<string, unknown>;
}

/** The per-call options of behaviour.md §5 after merging; absent keys are not sent. */
export interface CallOptions {
  /** The provider's model name (`tx_nrllm_model.model_id`). */
  model: string;
  temperature?: number;
  top_p?: number;
  frequency_penalty?: number;
  presence_penalty?: number;
  /** A `bigint` beyond 2^53, as every integer option there (`plainValueOf`). */
  max_tokens?: number | bigint;
  /** Seconds before the call is aborted. */
  timeout?: number;
  /** Keep the decoded provider body on the result. Off unless an administrator asked. */
  captureRaw?: boolean;
  /**
   * Anything else from the configuration's `options` JSON, passed through
   * where a provider knows it. An integer beyond ±(2^53 − 1) is a `bigint`
   * (`plainValueOf`), so it keeps its digits; `plainJsonText` writes it.
   */
  [key: string]: unknown;
}

/** What an adapter needs to know about the provider row. The key is already decrypted. */
export interface ProviderSettings {
  identifier: string;
  adapterType: AdapterType;
  /** Base URL; empty means the adapter type's default. */
  endpointUrl: string;
  apiKey: string | null;
  organizationId: string;
  /** Seconds; used when the call options carry no timeout. */
  apiTimeout: number;
  maxRetries: number;
  options: Record<string, unknown>;
}

export const ADAPTER_TYPES = ['openai', 'anthropic', 'gemini', 'ollama', 'openrouter', 'mistral', 'groq', 'custom', 'demo'] as const;
export type AdapterType = (typeof ADAPTER_TYPES)[number];

export interface ChatRequest {
  messages: ChatMessage[];
  /** Absent or empty: no tools offered. */
  tools?: ToolDefinition[];
  options: CallOptions;
  signal?: AbortSignal;
}

export type FinishReason = 'stop' | 'length' | 'tool_calls' | 'content_filter' | 'error' | 'other';

export interface Usage {
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** Input tokens read from the provider's prompt cache, where reported. */
  cachedInputTokens?: number;
  /** Input tokens written to the provider's prompt cache, where reported. */
  cacheWriteTokens?: number;
  /** Reasoning tokens, where reported (part of completion tokens for OpenAI). */
  reasoningTokens?: number;
}

export interface ChatResult {
  content: string;
  thinking: string | null;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  /** The provider's own value, e.g. `end_turn`, `STOP`, `tool_calls`. */
  rawFinishReason: string | null;
  usage: Usage;
  /** Settings the provider ignores, e.g. `frequency_penalty is not supported by anthropic`. */
  warnings: string[];
  /** The decoded provider body; only present when `options.captureRaw` was set. */
  raw?: unknown;
  /** The model the provider says answered (e.g. a dated snapshot of the one asked for); absent when it does not say. */
  model?: string;
}

export type StreamEvent =
  | { type: 'content'; text: string }
  | { type: 'thinking'; text: string }
  /** Always the last event; the result equals what `chat` would have returned. */
  | { type: 'done'; result: ChatResult };

export interface ChatAdapter {
  readonly adapterType: AdapterType;
  chat(request: ChatRequest): Promise<ChatResult>;
  stream(request: ChatRequest): AsyncIterable<StreamEvent>;
}
