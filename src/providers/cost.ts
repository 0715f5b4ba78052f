/**
 * Estimated cost of a provider call in US dollars.
 *
 * Prices are US cents per million tokens. With only the two base prices this
 * is nr_llm's `Model::estimateCost`, the same floating-point operations in the
 * same order, so both sides report the same double:
 * `(prompt / 1e6) × (costInput / 100) + (completion / 1e6) × (costOutput / 100)`
 * (80983 / 11129 tokens at 150 / 120 cents give 0.13482929999999999, not a
 * rounded 0.1348293). The optional
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

/** One class of tokens at its price, computed as nr_llm computes it: tokens per million times dollars. */
const dollars = (tokens: number, centsPerMillion: number): number => (tokens / 1_000_000) * (centsPerMillion / 100);

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

  // A class without its own price adds nothing (not even + 0), so the base case stays nr_llm's two terms.
  let inputCost = dollars(prompt - cacheRead - cacheWrite, prices.costInput);
  if (cacheReadPrice !== null) inputCost += dollars(cacheRead, cacheReadPrice);
  if (cacheWritePrice !== null) inputCost += dollars(cacheWrite, cacheWritePrice);
  let outputCost = dollars(completion - reasoning, prices.costOutput);
  if (reasoningPrice !== null) outputCost += dollars(reasoning, reasoningPrice);
  return inputCost + outputCost;
}

function price(value: number | null | undefined): number | null {
  return typeof value === 'number' && Number.isFinite(value) ? value : null;
}

function count(value: number | undefined): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}
