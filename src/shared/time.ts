/** TYPO3 stores `tstamp` / `crdate` as unix seconds. */
export function unixNow(): number {
  return Math.floor(Date.now() / 1000);
}

export function fromUnix(seconds: number | null | undefined): Date {
  return new Date(Math.max(0, Number(seconds) || 0) * 1000);
}
