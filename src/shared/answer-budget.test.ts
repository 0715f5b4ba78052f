import { AnswerBudget, AnswerTooLargeError, selectedSize, jsonSizeAtLeast } from './answer-budget';

describe('jsonSizeAtLeast', () => {
  it('is a lower bound of the JSON bytes, and stops counting past atMost', () => {
    const value = { a: 'x'.repeat(100), list: [1, true, null, { b: 'é'.repeat(10) }] };
    expect(jsonSizeAtLeast(value)).toBeLessThanOrEqual(Buffer.byteLength(JSON.stringify(value)));
    expect(jsonSizeAtLeast(value)).toBeGreaterThan(110);
    const huge = Array.from({ length: 100_000 }, () => 'y'.repeat(100));
    // The full count would be about 10.3 million.
    expect(jsonSizeAtLeast(huge, 1000)).toBeGreaterThan(1000);
    expect(jsonSizeAtLeast(huge, 1000)).toBeLessThan(200_000);
  });

  it('counts a RawJson-like value by its text', () => {
    expect(jsonSizeAtLeast({ text: '[1,2,3]', toJSON: () => [1, 2, 3] })).toBe(7);
  });

  it('counts only the selected entries of a record', () => {
    const step = { sequence: 1, messagesSent: ['z'.repeat(1000)], content: 'ok' };
    expect(selectedSize(step, new Set(['sequence', 'content']))).toBeLessThan(50);
    expect(selectedSize(step, new Set(['messagesSent']))).toBeGreaterThan(1000);
  });
});

describe('AnswerBudget', () => {
  it('throws once past its limit, and for every read after', async () => {
    const budget = new AnswerBudget(100);
    budget.charge(60);
    expect(() => budget.charge(60)).toThrow(AnswerTooLargeError);
    expect(budget.exceeded).toBe(true);
    let read = false;
    await expect(budget.serially(async () => (read = true))).rejects.toThrow(/MAX_RESPONSE_BYTES \(100\)/);
    expect(read).toBe(false);
  });

  it('runs reads one after another', async () => {
    const budget = new AnswerBudget(1000);
    const order: string[] = [];
    const slow = budget.serially(async () => {
      await new Promise((resolve) => setTimeout(resolve, 20));
      order.push('first');
    });
    const fast = budget.serially(async () => void order.push('second'));
    await Promise.all([slow, fast]);
    expect(order).toEqual(['first', 'second']);
  });
});
