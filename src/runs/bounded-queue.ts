/**
 * A per-watcher queue with a hard size. A watcher that falls further behind
 * than `capacity` items is not silently skipped ahead: the queue reports the
 * overflow and the watcher ends with an error telling it where to resume.
 */
export class BoundedQueue<T> {
  private readonly items: T[] = [];
  private waiting: ((value: IteratorResult<T, undefined>) => void) | null = null;
  private overflowed = false;
  private closed = false;

  constructor(private readonly capacity: number) {}

  push(item: T): void {
    if (this.closed || this.overflowed) return;
    if (this.waiting) {
      const resolve = this.waiting;
      this.waiting = null;
      resolve({ value: item, done: false });
      return;
    }
    if (this.items.length >= this.capacity) {
      this.overflowed = true;
      this.items.length = 0;
      this.wake();
      return;
    }
    this.items.push(item);
  }

  get hasOverflowed(): boolean {
    return this.overflowed;
  }

  close(): void {
    this.closed = true;
    this.wake();
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
