/**
 * Starts HTTP requests one per event-loop turn, in arrival order, and refuses
 * new ones with 503 once too many wait.
 *
 * Why: Node (libuv 1.46) accepts at most one new connection per event-loop
 * turn, while a turn handles every request that is ready on the connections
 * it already has. On a saturated server a turn therefore lasts as long as all
 * those requests together, and a client that connects then waits in the
 * kernel's accept queue for seconds: 28 connections opened beside 22 busy ones
 * were accepted one per turn, the last after 4.6 s, although every request
 * took 3.5 ms. Starting one request per turn keeps turns as short as one
 * request, so new connections are accepted within milliseconds and all
 * requests are served in the order they arrived.
 */
export interface QueueOptions {
  /** Requests allowed to wait; the next one is refused (503, Retry-After). */
  limit: number;
  /** Defers a callback to the next event-loop turn (setImmediate; tests may replace it). */
  defer?: (callback: () => void) => void;
}

export class RequestQueue {
  private readonly waiting: (() => void)[] = [];
  private head = 0;
  private scheduled = false;
  private readonly defer: (callback: () => void) => void;

  constructor(private readonly options: QueueOptions) {
    this.defer = options.defer ?? setImmediate;
  }

  get length(): number {
    return this.waiting.length - this.head;
  }

  /** Queues `start`; returns false (and queues nothing) when the queue is full. */
  offer(start: () => void): boolean {
    if (this.length >= this.options.limit) return false;
    this.waiting.push(start);
    this.schedule();
    return true;
  }

  private schedule(): void {
    if (this.scheduled || this.length === 0) return;
    this.scheduled = true;
    this.defer(this.startNext);
  }

  private readonly startNext = (): void => {
    this.scheduled = false;
    const start = this.waiting[this.head];
    this.waiting[this.head] = undefined as unknown as () => void;
    this.head += 1;
    if (this.head === this.waiting.length || this.head > 1024) {
      this.waiting.splice(0, this.head);
      this.head = 0;
    }
    // Scheduled before starting: setImmediate callbacks added while the check
    // phase runs wait for the next turn, so the poll phase (accepts, reads,
    // database replies) runs between any two requests.
    this.schedule();
    start?.();
  };
}
