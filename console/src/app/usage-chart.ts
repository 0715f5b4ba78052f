/**
 * The usage page's pure parts: the range a page shows (local dates, checked
 * as the API checks them), how a date becomes an instant the server books on
 * the same day, and the geometry of a bar chart. No DOM here.
 */

/** The longest range `usage` answers (the API refuses more). */
export const MAX_RANGE_DAYS = 366;
/** The range a page opens with: the last 30 days, today included. */
export const DEFAULT_RANGE_DAYS = 30;

const DATE = /^(\d{4})-(\d{2})-(\d{2})$/;
const DAY_MS = 86_400_000;

export interface DateRange {
  /** `YYYY-MM-DD`, both included. */
  from: string;
  to: string;
}

/** `YYYY-MM-DD` of a local calendar date. */
export function isoDate(date: Date): string {
  const pad = (value: number) => String(value).padStart(2, '0');
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}`;
}

/** The last `days` days up to `today`, both included. */
export function defaultRange(today: Date, days = DEFAULT_RANGE_DAYS): DateRange {
  const from = new Date(today.getFullYear(), today.getMonth(), today.getDate() - (days - 1));
  return { from: isoDate(from), to: isoDate(today) };
}

/** Days since the epoch of a `YYYY-MM-DD` date, or null when it is no real date. */
function dayNumber(value: string): number | null {
  const match = DATE.exec(value);
  if (!match) return null;
  const [year, month, day] = [Number(match[1]), Number(match[2]), Number(match[3])];
  const time = Date.UTC(year, month - 1, day);
  const check = new Date(time);
  if (check.getUTCFullYear() !== year || check.getUTCMonth() !== month - 1 || check.getUTCDate() !== day) return null;
  return time / DAY_MS;
}

/** Days from `from` to `to`, both included; null when either is no date. */
export function rangeLength(range: DateRange): number | null {
  const from = dayNumber(range.from);
  const to = dayNumber(range.to);
  return from === null || to === null ? null : to - from + 1;
}

/** What is wrong with a range, in the words the page shows; null when it can be asked for. */
export function rangeProblem(range: DateRange): string | null {
  const length = rangeLength(range);
  if (length === null) return 'Pick both dates.';
  if (length < 1) return 'The first day must not be after the last.';
  if (length > MAX_RANGE_DAYS) return `A range spans at most ${MAX_RANGE_DAYS} days (this one has ${length}).`;
  return null;
}

/**
 * The instant sent for a date: its noon in UTC. The server books days in its
 * own USAGE_TIMEZONE, which the browser does not know; noon UTC falls on the
 * same calendar date in every zone from UTC−11 to UTC+11, so the range the
 * server sums is the one picked.
 */
export function instantOf(date: string): string {
  return `${date}T12:00:00.000Z`;
}

export interface Bar {
  /** Left edge and width, in chart units. */
  x: number;
  width: number;
  /** Top edge and height, in chart units (height 0 for a zero). */
  y: number;
  height: number;
}

export interface ChartGeometry {
  /** The value the full height stands for (≥ the largest value, never 0). */
  top: number;
  bars: Bar[];
}

/** Bars side by side over `width`, scaled so the largest reaches `height`; a gap between bars while they are wide enough. */
export function barGeometry(values: readonly number[], width: number, height: number): ChartGeometry {
  const finite = values.map((value) => (Number.isFinite(value) && value > 0 ? value : 0));
  const largest = finite.reduce((max, value) => Math.max(max, value), 0);
  const top = largest > 0 ? largest : 1;
  const slot = values.length > 0 ? width / values.length : width;
  const gap = slot >= 4 ? Math.min(2, slot * 0.2) : 0;
  return {
    top,
    bars: finite.map((value, index) => {
      const barHeight = (value / top) * height;
      return { x: index * slot + gap / 2, width: slot - gap, y: height - barHeight, height: barHeight };
    }),
  };
}

/** The share of `value` in `largest`, 0 … 1 (for the breakdowns' bars). */
export function share(value: number, largest: number): number {
  if (!Number.isFinite(value) || !Number.isFinite(largest) || largest <= 0 || value <= 0) return 0;
  return Math.min(1, value / largest);
}
