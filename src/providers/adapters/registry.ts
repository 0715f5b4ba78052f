/**
 * The one way to get an adapter for a provider row: maps the adapter type to
 * its wire family (behaviour.md §9). Adapters are cheap; make one per call or
 * per run, whatever is convenient.
 */
import { AnthropicAdapter } from './anthropic.adapter';
import { DemoAdapter } from './demo.adapter';
import { ProviderRequestError } from './errors';
import { GeminiAdapter } from './gemini.adapter';
import type { AdapterDependencies } from './http-chat-adapter';
import { type AdapterLogger, DEFAULT_MAX_RESPONSE_BYTES, DEFAULT_RETRY_POLICY, type RetryPolicy } from './http';
import { OllamaAdapter } from './ollama.adapter';
import { OpenAiCompatibleAdapter } from './openai-compatible.adapter';
import { newToolCallId } from './tool-calls';
import { ADAPTER_TYPES, type AdapterType, type ChatAdapter, type ProviderSettings } from './types';

export interface ChatAdapterDeps {
  /** Defaults to the global fetch. */
  fetch?: typeof fetch;
  /** Retries and skipped tool calls are reported here. Defaults to discarding them: pass the service logger. */
  logger?: AdapterLogger;
  /** Backoff tuning; tests shorten it or record the waits. */
  retry?: Partial<RetryPolicy>;
  /** Bytes one call may receive (PROVIDER_MAX_RESPONSE_BYTES). */
  maxResponseBytes?: number;
}

const SILENT_LOGGER: AdapterLogger = { warn: () => undefined };

export function createChatAdapter(settings: ProviderSettings, deps: ChatAdapterDeps = {}): ChatAdapter {
  const dependencies: AdapterDependencies = {
    // Looked up at call time, not import time, so a fetch installed later (tests, instrumentation) is used.
    fetch: deps.fetch ?? ((input, init) => fetch(input, init)),
    logger: deps.logger ?? SILENT_LOGGER,
    retry: { ...DEFAULT_RETRY_POLICY, ...deps.retry },
    newToolCallId,
    maxResponseBytes: deps.maxResponseBytes ?? DEFAULT_MAX_RESPONSE_BYTES,
  };
  const adapterType: unknown = settings.adapterType;
  if (!isAdapterType(adapterType)) {
    throw new ProviderRequestError(
      { provider: settings.identifier },
      `unknown adapter type "${String(adapterType)}" (expected one of ${ADAPTER_TYPES.join(', ')})`,
    );
  }
  switch (adapterType) {
    case 'openai':
    case 'openrouter':
    case 'mistral':
    case 'groq':
    case 'custom':
      return new OpenAiCompatibleAdapter({ ...settings, adapterType }, dependencies);
    case 'anthropic':
      return new AnthropicAdapter(settings, dependencies);
    case 'gemini':
      return new GeminiAdapter(settings, dependencies);
    case 'ollama':
      return new OllamaAdapter(settings, dependencies);
    case 'demo':
      return new DemoAdapter(settings);
  }
}

function isAdapterType(value: unknown): value is AdapterType {
  return typeof value === 'string' && (ADAPTER_TYPES as readonly string[]).includes(value);
}
