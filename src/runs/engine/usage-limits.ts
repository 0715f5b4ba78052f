/**
 * Token counts and costs as the service stores them. A provider's usage is
 * untrusted input: a count that is negative, fractional, not a number or
 * absurdly large (a provider once reported 5e9 completion tokens) must not
 * stop a run from being stored, nor break a list that shows it. Counts are
 * made whole, non-negative and at most `MAX_TOKENS_PER_CALL` per call; run
 * totals never exceed what a signed 32-bit column (and a GraphQL `Int`) holds.
 */
import type { Usage } from '../../providers/adapters/types';

/** Far above any model's window; 21 calls of this much still fit a signed 32-bit total. */
export const MAX_TOKENS_PER_CALL = 100_000_000;

/** The largest value of a signed 32-bit integer column and of a GraphQL `Int`. */
export const MAX_STORED_INT = 2_147_483_647;

/** `estimated_cost` is `decimal(10,6)`: at most 9999.999999 US dollars. */
export const MAX_STORED_COST = 9999.999999;

/** A whole count in 0..max; anything unreadable counts as 0. */
export function clampCount(value: unknown, max: number): number {
  if (typeof value !== 'number' || !Number.isFinite(value) || value <= 0) return 0;
  return Math.min(max, Math.floor(value));
}

/** One call's usage as the loop counts it. */
export function sanitizeUsage(usage: Usage | undefined): Usage {
  const promptTokens = clampCount(usage?.promptTokens, MAX_TOKENS_PER_CALL);
  const completionTokens = clampCount(usage?.completionTokens, MAX_TOKENS_PER_CALL);
  const clean: Usage = { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens };
  if (usage?.cachedInputTokens !== undefined) clean.cachedInputTokens = clampCount(usage.cachedInputTokens, MAX_TOKENS_PER_CALL);
  if (usage?.cacheWriteTokens !== undefined) clean.cacheWriteTokens = clampCount(usage.cacheWriteTokens, MAX_TOKENS_PER_CALL);
  if (usage?.reasoningTokens !== undefined) clean.reasoningTokens = clampCount(usage.reasoningTokens, MAX_TOKENS_PER_CALL);
  return clean;
}

/** A count for a 32-bit column or a GraphQL `Int` (rows written by older versions or by other programs may hold more). */
export function storedInt(value: unknown): number {
  return clampCount(value, MAX_STORED_INT);
}

/** A cost for `decimal(10,6)`; null stays null (unpriced). */
export function storedCost(value: number | null): number | null {
  if (value === null) return null;
  if (!Number.isFinite(value) || value <= 0) return 0;
  return Math.min(MAX_STORED_COST, Math.round(value * 1e6) / 1e6);
}

/** Adds one call's usage to a run's totals (in place). */
export function addUsage(total: Usage, usage: Usage): void {
  total.promptTokens += usage.promptTokens;
  total.completionTokens += usage.completionTokens;
  total.totalTokens = total.promptTokens + total.completionTokens;
  if (usage.cachedInputTokens !== undefined) total.cachedInputTokens = (total.cachedInputTokens ?? 0) + usage.cachedInputTokens;
  if (usage.cacheWriteTokens !== undefined) total.cacheWriteTokens = (total.cacheWriteTokens ?? 0) + usage.cacheWriteTokens;
  if (usage.reasoningTokens !== undefined) total.reasoningTokens = (total.reasoningTokens ?? 0) + usage.reasoningTokens;
}
