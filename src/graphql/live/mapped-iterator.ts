/**
 * A subscription's iterator over its source: each value mapped (see
 * shared-subscribe), its end and return() reported to the mapper.
 */

/** How a MappedIterator maps its source's values and learns of its end. */
export interface Mapper<T, U> {
  map(value: T): U | Promise<U>;
  /** Awaited before the end is reported (null: nothing to wait for). */
  beforeEnd(): Promise<void> | null;
  /** Called once the iteration is over (its end, return(), or a failure that closes it); may be called again. */
  ended(): void;
}

/** Like graphql-js's internal mapAsyncIterator: return() reaches the source at once, even while it waits. */
export class MappedIterator<T, U> implements AsyncIterableIterator<U> {
  constructor(
    private readonly iterator: AsyncIterator<T>,
    private readonly mapper: Mapper<T, U>,
  ) {}

  async next(): Promise<IteratorResult<U>> {
    const step = await this.iterator.next();
    if (step.done) {
      await this.mapper.beforeEnd();
      this.mapper.ended();
      return { value: undefined, done: true };
    }
    try {
      return { value: await this.mapper.map(step.value), done: false };
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  async return(): Promise<IteratorResult<U>> {
    this.mapper.ended();
    await this.iterator.return?.();
    return { value: undefined, done: true };
  }

  async throw(error?: unknown): Promise<IteratorResult<U>> {
    if (this.iterator.throw) {
      const step = await this.iterator.throw(error);
      if (step.done) {
        this.mapper.ended();
        return { value: undefined, done: true };
      }
      return { value: await this.mapper.map(step.value), done: false };
    }
    await this.close();
    throw error;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<U> {
    return this;
  }

  private async close(): Promise<void> {
    this.mapper.ended();
    try {
      await this.iterator.return?.();
    } catch {
      // keep the original error
    }
  }
}

export function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}
