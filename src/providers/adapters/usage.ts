/**
 * Token counts as the service stores them. Providers occasionally report
 * negative or fractional counts (proxies subtracting cached tokens twice,
 * estimates); counts are clamped to whole numbers ≥ 0 (behaviour.md §9), and
 * the total is always prompt + completion so every layer agrees on it.
 */
import type { Usage } from './types';

export function tokenCount(value: unknown): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) return 0;
  return Math.round(value);
}

export interface UsageParts {
  prompt: unknown;
  completion: unknown;
  cachedInput?: unknown;
  cacheWrite?: unknown;
  reasoning?: unknown;
}

/** Optional classes are only present when the provider reported them. */
export function buildUsage(parts: UsageParts): Usage {
  const promptTokens = tokenCount(parts.prompt);
  const completionTokens = tokenCount(parts.completion);
  const usage: Usage = { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
  if (isReported(parts.cachedInput)) usage.cachedInputTokens = tokenCount(parts.cachedInput);
  if (isReported(parts.cacheWrite)) usage.cacheWriteTokens = tokenCount(parts.cacheWrite);
  if (isReported(parts.reasoning)) usage.reasoningTokens = tokenCount(parts.reasoning);
  return usage;
}

export const ZERO_USAGE: Readonly<Usage> = Object.freeze({ promptTokens: 0, completionTokens: 0, totalTokens: 0 });

function isReported(value: unknown): boolean {
  return typeof value === 'number' && Number.isFinite(value);
}
