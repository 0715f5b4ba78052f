/** The usage page's pure parts: the range it asks for and the bars it draws. */
import { barGeometry, defaultRange, instantOf, MAX_RANGE_DAYS, rangeLength, rangeProblem, share } from '../../console/src/app/usage-chart';

describe('the usage page range', () => {
  it('opens on the last 30 days, today included, across a month end', () => {
    expect(defaultRange(new Date(2026, 2, 5))).toEqual({ from: '2026-02-04', to: '2026-03-05' });
    expect(rangeLength(defaultRange(new Date(2026, 2, 5)))).toBe(30);
  });

  it('refuses what the API refuses: a missing or impossible date, from after to, more than 366 days', () => {
    expect(rangeProblem({ from: '2026-03-01', to: '2026-03-01' })).toBeNull();
    expect(rangeProblem({ from: '', to: '2026-03-01' })).toBe('Pick both dates.');
    expect(rangeProblem({ from: '2026-02-30', to: '2026-03-01' })).toBe('Pick both dates.');
    expect(rangeProblem({ from: '2026-03-02', to: '2026-03-01' })).toBe('The first day must not be after the last.');
    expect(rangeProblem({ from: '2025-03-01', to: '2026-03-01' })).toBeNull();
    expect(rangeLength({ from: '2024-03-01', to: '2025-03-01' })).toBe(MAX_RANGE_DAYS);
    expect(rangeProblem({ from: '2024-03-01', to: '2025-03-02' })).toBe('A range spans at most 366 days (this one has 367).');
  });

  it('sends noon UTC of a date, which is that date from UTC-11 to UTC+11', () => {
    const instant = new Date(instantOf('2026-03-01'));
    for (const timeZone of ['Pacific/Pago_Pago', 'America/New_York', 'UTC', 'Europe/Berlin', 'Asia/Tokyo', 'Pacific/Noumea']) {
      expect(new Intl.DateTimeFormat('en-CA', { timeZone, year: 'numeric', month: '2-digit', day: '2-digit' }).format(instant)).toBe('2026-03-01');
    }
  });
});

describe('the usage charts', () => {
  it('scales the largest bar to the full height; zeros are flat; odd values count as zero', () => {
    const { top, bars } = barGeometry([0, 5, 10, Number.NaN, -3], 100, 50);
    expect(top).toBe(10);
    expect(bars.map((bar) => bar.height)).toEqual([0, 25, 50, 0, 0]);
    expect(bars.map((bar) => bar.y)).toEqual([50, 25, 0, 50, 50]);
    expect(bars.map((bar) => Math.round(bar.x))).toEqual([1, 21, 41, 61, 81]);
    expect(bars.every((bar) => bar.width === 18)).toBe(true);
  });

  it('draws an all-zero series flat without dividing by zero', () => {
    const { top, bars } = barGeometry([0, 0], 10, 10);
    expect(top).toBe(1);
    expect(bars.map((bar) => bar.height)).toEqual([0, 0]);
  });

  it('a breakdown bar is its share of the largest, 0 … 1', () => {
    expect(share(5, 10)).toBe(0.5);
    expect(share(0, 0)).toBe(0);
    expect(share(12, 10)).toBe(1);
  });
});
