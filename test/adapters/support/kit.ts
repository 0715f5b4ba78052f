/**
 * What the contract suite needs to know about one wire family: recorded-style
 * answers (written from the provider's documented response shapes) for each
 * scenario, whole and streamed, and the normalised result each must give.
 */
import type { AdapterType, ChatRequest, ChatResult, ProviderSettings } from '../../../src/providers/adapters/types';

export const SCENARIOS = ['text', 'oneToolCall', 'severalToolCalls', 'thinking', 'usageClasses', 'malformedToolCall'] as const;
export type ScenarioName = (typeof SCENARIOS)[number];

export type ExpectedResult = Omit<ChatResult, 'warnings' | 'raw'>;

export interface Scenario {
  /** The non-streamed response body. */
  body: unknown;
  /** The streamed response, exactly as the provider frames it. */
  stream: string;
  expected: ExpectedResult;
  /** How many tool calls the adapter must skip (and log) as malformed. */
  skipped?: number;
}

export interface ProviderKit {
  name: string;
  adapterType: AdapterType;
  streamContentType: string;
  /** Gemini and Ollama send no call ids; the adapter invents them. */
  inventsIds: boolean;
  needsKey: boolean;
  scenarios: Record<ScenarioName, Scenario>;
  /** Scenarios only this family has. */
  extraScenarios?: Record<string, Scenario>;
  /** The provider's documented error body. */
  errorBody(status: number, message: string): unknown;
  expectedPath(stream: boolean, model: string): string;
  /** The header carrying the key, and its value for a given key. */
  authHeader(key: string): [string, string];
}

export const TEXT = 'Grüße aus Köln! 👋 Das Wetter ist schön.';
/** TEXT in uneven pieces, as a provider streams it. */
export const TEXT_PIECES = ['Grü', 'ße aus K', 'öln! ', '👋 Das', ' Wetter ist schön.'];
export const THINKING = 'Der Nutzer grüßt auf Deutsch. 🤔';
export const ANSWER_AFTER_THINKING = 'Hallo! Schön, dass du da bist. 👋';

/** Shaped like no known provider key, so only exact-key redaction can hide it. */
export const API_KEY = 'pw-test-Zq81Lm0Pw7Rt4Yv6Xa';

export function settingsFor(kit: ProviderKit, url: string, overrides: Partial<ProviderSettings> = {}): ProviderSettings {
  return {
    identifier: `${kit.name}-main`,
    adapterType: kit.adapterType,
    endpointUrl: url,
    apiKey: API_KEY,
    organizationId: '',
    apiTimeout: 10,
    maxRetries: 2,
    options: {},
    ...overrides,
  };
}

export const MODEL = 'test-model-1';

export function baseRequest(overrides: Partial<ChatRequest> = {}): ChatRequest {
  return {
    messages: [
      { role: 'system', content: 'Du bist ein hilfreicher Assistent.' },
      { role: 'user', content: 'Wie ist das Wetter in Köln?' },
    ],
    tools: [
      {
        name: 'get_weather',
        description: 'Current weather for a city',
        parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
      },
      { name: 'get_time', description: 'Current time', parameters: { type: 'object', properties: {} } },
    ],
    options: { model: MODEL, temperature: 0.2, top_p: 1, frequency_penalty: 0, presence_penalty: 0, max_tokens: 256 },
    ...overrides,
  };
}

export function sseFrames(frames: unknown[], options: { eventNames?: boolean; newline?: string; done?: boolean } = {}): string {
  const newline = options.newline ?? '\n';
  const parts = frames.map((frame) => {
    const type = (frame as { type?: unknown }).type;
    const event = options.eventNames === true && typeof type === 'string' ? `event: ${type}${newline}` : '';
    return `${event}data: ${JSON.stringify(frame)}${newline}${newline}`;
  });
  if (options.done === true) parts.push(`data: [DONE]${newline}${newline}`);
  return parts.join('');
}

export function ndjsonLines(lines: unknown[]): string {
  return lines.map((line) => `${JSON.stringify(line)}\n`).join('');
}

/** Cuts a string into pieces of the given lengths (in UTF-16 units; never inside a surrogate pair in these fixtures). */
export function pieces(text: string, ...lengths: number[]): string[] {
  const out: string[] = [];
  let at = 0;
  for (const length of lengths) {
    out.push(text.slice(at, at + length));
    at += length;
  }
  if (at < text.length) out.push(text.slice(at));
  return out;
}
