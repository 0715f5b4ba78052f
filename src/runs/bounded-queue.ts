/** Items a waiting consumer may receive in one hand-over beyond its capacity. */
const BURST_LIMIT = 1024;

/**
 * A per-watcher queue with a hard size. A watcher that falls further behind
 * than `capacity` items is not silently skipped ahead: the queue reports the
 * overflow and the watcher ends with an error telling it where to resume.
 *
 * A waiting consumer is woken at the end of the event-loop turn, not inside
 * push(): a run publishes its steps in bursts, and a watcher that wakes once
 * per burst takes all of it in a row (with 1,000 watchers, their writes then
 * leave in one system call per watcher, and the run is not slowed by the
 * delivery of its earlier steps).
 */
export class BoundedQueue<T> {
  private readonly items: T[] = [];
  private waiting: ((value: IteratorResult<T, undefined>) => void) | null = null;
  private wakeScheduled = false;
  private overflowed = false;
  private closed = false;

  constructor(private readonly capacity: number) {}

  push(item: T): void {
    if (this.closed || this.overflowed) return;
    // A waiting consumer has read everything: what arrives before its hand-over is
    // one burst, not lag (still bounded, by BURST_LIMIT).
    const limit = this.waiting ? this.capacity + BURST_LIMIT : this.capacity;
    if (this.items.length >= limit) {
      this.overflowed = true;
      this.items.length = 0;
      this.wake();
      return;
    }
    this.items.push(item);
    if (this.waiting && !this.wakeScheduled) {
      this.wakeScheduled = true;
      setImmediate(this.handOver);
    }
  }

  private readonly handOver = (): void => {
    this.wakeScheduled = false;
    const resolve = this.waiting;
    const item = this.items.shift();
    if (!resolve || item === undefined) return;
    this.waiting = null;
    resolve({ value: item, done: false });
  };

  /** A consumer waits in next() and nothing is queued, so an item could reach it without the queue. */
  get isIdle(): boolean {
    return this.waiting !== null && this.items.length === 0 && !this.closed && !this.overflowed;
  }

  get hasOverflowed(): boolean {
    return this.overflowed;
  }

  close(): void {
    this.closed = true;
    // Items not yet handed over still are (handOver is scheduled); next() ends after them.
    if (this.items.length === 0) this.wake();
  }

  /** Resolves with the next item; `done` when closed or overflowed (check `hasOverflowed`). */
  next(): Promise<IteratorResult<T, undefined>> {
    const item = this.items.shift();
    if (item !== undefined) return Promise.resolve({ value: item, done: false });
    if (this.closed || this.overflowed) return Promise.resolve({ value: undefined, done: true });
    return new Promise((resolve) => (this.waiting = resolve));
  }

  private wake(): void {
    const resolve = this.waiting;
    this.waiting = null;
    resolve?.({ value: undefined, done: true });
  }
}
