import type { Usage } from './adapters/types';
import { estimateCost, isPriced, type ModelPrices } from './cost';

const usage = (promptTokens: number, completionTokens: number, extra: Partial<Usage> = {}): Usage => ({
  promptTokens,
  completionTokens,
  totalTokens: promptTokens + completionTokens,
  ...extra,
});

describe('estimateCost', () => {
  it('is nr_llm\'s Model::estimateCost to the last bit: 80983 / 11129 tokens at 150 / 120 cents cost 0.13482929999999999', () => {
    const cost = estimateCost(usage(80983, 11129), { costInput: 150, costOutput: 120 });
    expect(cost).toBe(0.13482929999999999);
    expect(String(cost)).toBe('0.13482929999999999');
    expect(cost).not.toBe(0.1348293);
  });

  it('follows the behaviour.md formula: prompt × cost_input / 1e8 + completion × cost_output / 1e8', () => {
    // 23 prompt / 12 completion tokens (the §8 token example) at 250 and 1000 cents per million.
    const prices: ModelPrices = { costInput: 250, costOutput: 1000 };
    expect(estimateCost(usage(23, 12), prices)).toBeCloseTo((23 * 250) / 1e8 + (12 * 1000) / 1e8, 15);
    expect(estimateCost(usage(1_000_000, 1_000_000), prices)).toBe(12.5);
    expect(estimateCost(usage(1000, 500), prices)).toBe(0.0075);
  });

  it('an unpriced model costs null, not 0', () => {
    expect(estimateCost(usage(100, 50), { costInput: 0, costOutput: 0 })).toBeNull();
    expect(estimateCost(usage(100, 50), { costInput: 0, costOutput: 0, costCacheRead: null, costCacheWrite: null, costReasoning: null })).toBeNull();
  });

  it('a model with only one base price is priced', () => {
    expect(estimateCost(usage(1_000_000, 1_000_000), { costInput: 0, costOutput: 400 })).toBe(4);
    expect(estimateCost(usage(0, 0), { costInput: 100, costOutput: 0 })).toBe(0);
  });

  it('without extra prices the cache and reasoning classes are billed at the base prices', () => {
    const detailed = usage(1_000_000, 1_000_000, { cachedInputTokens: 600_000, cacheWriteTokens: 100_000, reasoningTokens: 300_000 });
    expect(estimateCost(detailed, { costInput: 300, costOutput: 1500 })).toBe(18);
  });

  it('bills cached reads at the cache-read price instead of the input price, never twice', () => {
    const prices: ModelPrices = { costInput: 300, costOutput: 1500, costCacheRead: 30 };
    // 400k uncached × $3/M + 600k cached × $0.30/M + 0 completion = 1.2 + 0.18
    expect(estimateCost(usage(1_000_000, 0, { cachedInputTokens: 600_000 }), prices)).toBeCloseTo(1.38, 12);
  });

  it('bills cache writes and reasoning at their own prices', () => {
    const prices: ModelPrices = { costInput: 300, costOutput: 1500, costCacheRead: 30, costCacheWrite: 375, costReasoning: 2000 };
    const detailed = usage(1_000_000, 1_000_000, { cachedInputTokens: 500_000, cacheWriteTokens: 200_000, reasoningTokens: 400_000 });
    // input: 300k × 3 + 500k × 0.3 + 200k × 3.75 = 0.9 + 0.15 + 0.75; output: 600k × 15 + 400k × 20 = 9 + 8
    expect(estimateCost(detailed, prices)).toBe(18.8);
  });

  it('an extra price alone makes a model priced', () => {
    expect(estimateCost(usage(1_000_000, 0, { cachedInputTokens: 1_000_000 }), { costInput: 0, costOutput: 0, costCacheRead: 10 })).toBe(0.1);
  });

  it('clamps classes that exceed their totals and ignores negative counts', () => {
    const prices: ModelPrices = { costInput: 100, costOutput: 100, costCacheRead: 10, costReasoning: 1000 };
    const odd = usage(1_000_000, 1_000_000, { cachedInputTokens: 5_000_000, reasoningTokens: 9_000_000 });
    // All prompt tokens cached (0.1), all completion tokens reasoning (10).
    expect(estimateCost(odd, prices)).toBe(10.1);
    expect(estimateCost(usage(-5, -5), { costInput: 100, costOutput: 100 })).toBe(0);
  });
});

describe('isPriced', () => {
  it('a base price above 0 or any extra price that is set (0 too) makes a model priced', () => {
    expect(isPriced({ costInput: 1, costOutput: 0 })).toBe(true);
    expect(isPriced({ costInput: 0, costOutput: 1 })).toBe(true);
    expect(isPriced({ costInput: 0, costOutput: 0, costReasoning: 0 })).toBe(true);
    expect(isPriced({ costInput: 0, costOutput: 0, costCacheRead: null, costCacheWrite: null, costReasoning: null })).toBe(false);
    expect(isPriced(null)).toBe(false);
  });

  it('negative and NaN values are no price: such a model is unpriced and costs null, never a negative or NaN amount', () => {
    for (const prices of [
      { costInput: -5, costOutput: 0 },
      { costInput: 0, costOutput: Number.NaN },
      { costInput: -1, costOutput: -1, costCacheRead: -3, costCacheWrite: Number.NaN, costReasoning: Number.POSITIVE_INFINITY },
    ] satisfies ModelPrices[]) {
      expect(isPriced(prices)).toBe(false);
      expect(estimateCost(usage(1_000_000, 1_000_000), prices)).toBeNull();
    }
    // A broken base price next to a good one bills nothing for its class.
    expect(estimateCost(usage(1_000_000, 1_000_000), { costInput: -5, costOutput: 100 })).toBe(1);
  });
});
