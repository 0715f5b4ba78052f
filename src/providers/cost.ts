/**
 * Estimated cost of a provider call in US dollars (behaviour.md §8).
 *
 * Prices are US cents per million tokens, so dollars = tokens × price / 1e8.
 * With only the two base prices this is exactly
 * `prompt × costInput / 1e8 + completion × costOutput / 1e8`. The optional
 * prices refine it without ever billing a token twice: cached reads and cache
 * writes are parts of `promptTokens` and reasoning is part of
 * `completionTokens` (that is how the adapters report usage), so each of those
 * classes moves from the base price to its own price; the rest stays at the
 * base price. A class whose price is not set stays at the base price.
 */
import type { Usage } from './adapters/types';

export interface ModelPrices {
  /** US cents per million prompt tokens. */
  costInput: number;
  /** US cents per million completion tokens. */
  costOutput: number;
  costCacheRead?: number | null;
  costCacheWrite?: number | null;
  costReasoning?: number | null;
}

const CENTS_PER_MILLION_TO_DOLLARS = 1e8;

/** Null when the model is unpriced (no price at all): unknown, which is not the same as free. */
export function estimateCost(usage: Usage, prices: ModelPrices): number | null {
  const cacheReadPrice = price(prices.costCacheRead);
  const cacheWritePrice = price(prices.costCacheWrite);
  const reasoningPrice = price(prices.costReasoning);
  const unpriced =
    prices.costInput === 0 && prices.costOutput === 0 && cacheReadPrice === null && cacheWritePrice === null && reasoningPrice === null;
  if (unpriced) return null;

  const prompt = count(usage.promptTokens);
  const completion = count(usage.completionTokens);
  // Clamp the classes into their totals: a provider reporting more cached tokens than prompt tokens must not make the rest negative.
  const cacheRead = cacheReadPrice === null ? 0 : Math.min(count(usage.cachedInputTokens), prompt);
  const cacheWrite = cacheWritePrice === null ? 0 : Math.min(count(usage.cacheWriteTokens), prompt - cacheRead);
  const reasoning = reasoningPrice === null ? 0 : Math.min(count(usage.reasoningTokens), completion);

  const centsTimesMillion =
    (prompt - cacheRead - cacheWrite) * prices.costInput +
    cacheRead * (cacheReadPrice ?? 0) +
    cacheWrite * (cacheWritePrice ?? 0) +
    (completion - reasoning) * prices.costOutput +
    reasoning * (reasoningPrice ?? 0);
  // Round away binary noise (0.30000000000000004) well below the column's 6 decimals.
  return Math.round((centsTimesMillion / CENTS_PER_MILLION_TO_DOLLARS) * 1e12) / 1e12;
}

function price(value: number | null | undefined): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function count(value: number | undefined): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}
