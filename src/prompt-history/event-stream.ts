/**
 * An async iterator over events pushed by a listener, for a subscription's
 * source stream. It buffers what arrives between two reads (bounded: the
 * oldest are dropped past `limit`, a feed subscriber that stops reading must
 * not hold memory) and unsubscribes when the client leaves.
 */
export function eventStream<T>(subscribe: (push: (event: T) => void) => () => void, limit = 1000): AsyncIterableIterator<T> {
  const buffer: T[] = [];
  let waiting: ((result: IteratorResult<T>) => void) | null = null;
  let done = false;
  const unsubscribe = subscribe((event) => {
    if (done) return;
    if (waiting) {
      const resolve = waiting;
      waiting = null;
      resolve({ value: event, done: false });
      return;
    }
    buffer.push(event);
    if (buffer.length > limit) buffer.shift();
  });
  const finish = (): Promise<IteratorResult<T>> => {
    if (!done) {
      done = true;
      unsubscribe();
      buffer.length = 0;
      waiting?.({ value: undefined, done: true });
      waiting = null;
    }
    return Promise.resolve({ value: undefined, done: true });
  };
  return {
    next: () => {
      if (buffer.length > 0) return Promise.resolve({ value: buffer.shift() as T, done: false });
      if (done) return Promise.resolve({ value: undefined, done: true });
      return new Promise((resolve) => (waiting = resolve));
    },
    return: finish,
    throw: async (error: unknown) => {
      await finish();
      throw error;
    },
    [Symbol.asyncIterator]() {
      return this;
    },
  };
}
