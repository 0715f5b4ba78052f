import { nextReadRows } from './run-reader';

describe('nextReadRows', () => {
  it('grows to the largest power of two half the rest fits, within the page maximum', () => {
    expect(nextReadRows(8, 1000, 16 * 1024 * 1024)).toBe(500);
    expect(nextReadRows(8, 100_000, 6_400_000)).toBe(32);
    expect(nextReadRows(8, 1_000_000, 1_000_000)).toBe(8);
  });
});
