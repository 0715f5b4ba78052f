/** Display helpers shared by the run pages. */
export function formatTokens(value: number | null | undefined): string {
  return value === null || value === undefined ? '–' : value.toLocaleString('en');
}

export function formatCost(value: number | null | undefined): string {
  if (value === null || value === undefined) return '–';
  return value < 0.01 ? `$${value.toFixed(6)}` : `$${value.toFixed(4)}`;
}

export function formatDuration(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return '–';
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  return `${Math.floor(ms / 60_000)} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function runDurationMs(run: { startedAt?: string | null; finishedAt?: string | null }, now = Date.now()): number | null {
  if (!run.startedAt) return null;
  const end = run.finishedAt ? Date.parse(run.finishedAt) : now;
  return end - Date.parse(run.startedAt);
}

export const FINISHED_STATUSES = new Set(['COMPLETED', 'FAILED', 'CANCELLED']);

export function formatTime(iso: string | null | undefined): string {
  if (!iso) return '–';
  return new Date(iso).toLocaleString('en-GB', { dateStyle: 'short', timeStyle: 'medium' });
}
