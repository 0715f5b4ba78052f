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

/**
 * Whether a model has a price at all: a base price above 0, or an extra
 * price that is set (0 included: a class declared free). A value that is not
 * a finite number ≥ 0 (negative, NaN: written by another program) is no
 * price. An unpriced model's costs are unknown (null), not 0, so a cost
 * budget cannot be kept with it. The one rule for every path that asks.
 */
export function isPriced(prices: ModelPrices | null | undefined): prices is ModelPrices {
  if (!prices) return false;
  return (
    (price(prices.costInput) ?? 0) > 0 ||
    (price(prices.costOutput) ?? 0) > 0 ||
    price(prices.costCacheRead) !== null ||
    price(prices.costCacheWrite) !== null ||
    price(prices.costReasoning) !== null
  );
}

/** Null when the model is unpriced (`isPriced`; no prices at all included): unknown, which is not the same as free. */
export function estimateCost(usage: Usage, prices: ModelPrices | null | undefined): number | null {
  if (!isPriced(prices)) return null;
  const cacheReadPrice = price(prices.costCacheRead);
  const cacheWritePrice = price(prices.costCacheWrite);
  const reasoningPrice = price(prices.costReasoning);
  // A base price that is no price (negative, NaN) bills nothing; the model is priced by its other prices.
  const inputPrice = price(prices.costInput) ?? 0;
  const outputPrice = price(prices.costOutput) ?? 0;

  const prompt = count(usage.promptTokens);
  const completion = count(usage.completionTokens);
  // Clamp the classes into their totals: a provider reporting more cached tokens than prompt tokens must not make the rest negative.
  const cacheRead = cacheReadPrice === null ? 0 : Math.min(count(usage.cachedInputTokens), prompt);
  const cacheWrite = cacheWritePrice === null ? 0 : Math.min(count(usage.cacheWriteTokens), prompt - cacheRead);
  const reasoning = reasoningPrice === null ? 0 : Math.min(count(usage.reasoningTokens), completion);

  // A class without its own price adds nothing (not even + 0), so the base case stays nr_llm's two terms.
  let inputCost = dollars(prompt - cacheRead - cacheWrite, inputPrice);
  if (cacheReadPrice !== null) inputCost += dollars(cacheRead, cacheReadPrice);
  if (cacheWritePrice !== null) inputCost += dollars(cacheWrite, cacheWritePrice);
  let outputCost = dollars(completion - reasoning, outputPrice);
  if (reasoningPrice !== null) outputCost += dollars(reasoning, reasoningPrice);
  return inputCost + outputCost;
}

/** A price in cents per million tokens: a finite number ≥ 0; anything else is no price (null). */
function price(value: number | null | undefined): number | null {
  return typeof value === 'number' && Number.isFinite(value) && value >= 0 ? value : null;
}

function count(value: number | undefined): number {
  return typeof value === 'number' && Number.isFinite(value) && value > 0 ? value : 0;
}
