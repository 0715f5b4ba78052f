/**
 * The iterators a run's trace watchers read: they release their listener at
 * once when the client leaves, and a live one can hand its in-order live
 * steps to a synchronous deliverer (the subscription fan-out). Built by
 * RunReader.
 */
import type { LiveSource } from '../graphql/live';
import type { StoredStep } from './trace-bus';

/**
 * A watcher's generator whose return() takes effect at once. An async
 * generator waiting inside its body (here: for the next step) handles return()
 * only after that wait ends, so a client that left while its run was idle kept
 * its bus listener until the next step. Closing the queue ends the wait first.
 * (An object with methods, not closures: a watcher keeps it for as long as it
 * watches, see graphql/live's SocketTarget.)
 */
export class ReleasingIterator<T> implements AsyncIterableIterator<T> {
  constructor(
    private readonly generator: AsyncGenerator<T>,
    private readonly queue: { close(): void },
  ) {}

  next(): Promise<IteratorResult<T>> {
    return this.generator.next();
  }

  return(value?: unknown): Promise<IteratorResult<T>> {
    this.queue.close();
    return this.generator.return(value as T);
  }

  throw(error?: unknown): Promise<IteratorResult<T>> {
    this.queue.close();
    return this.generator.throw(error);
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<T> {
    return this;
  }
}

/** A trace watcher's iterator: its steps, and, as a LiveSource (the fan-out's interface, see graphql/live), its in-order live steps handed to a synchronous deliverer. */
export class LiveTraceIterator<T> extends ReleasingIterator<T> implements LiveSource<StoredStep, T> {
  constructor(
    generator: AsyncGenerator<T>,
    queue: { close(): void },
    private readonly live: { deliver: ((step: StoredStep) => boolean) | null },
  ) {
    super(generator, queue);
  }

  deliverLive(deliver: (step: StoredStep) => boolean): void {
    this.live.deliver = deliver;
  }
}
