/**
 * What one answer may weigh (MAX_RESPONSE_BYTES), counted while it is built.
 *
 * The cost of a document (graphql/query-limits) bounds the rows an answer
 * may hold, not their bytes: a step's stored transcript or a version's text
 * can be megabytes. So the readers of such rows charge what they read to the
 * request's budget, one read at a time (`serially`), and stop as soon as the
 * answer is past its limit: the next read, the next alias, the next page are
 * refused without touching the database. Before it is written, the finished
 * answer is measured once more (`jsonSizeAtLeast`, stopping at the limit), so no
 * answer is serialised only to be thrown away.
 *
 * Sizes are lower bounds of the JSON bytes: a string counts its length, a
 * number or a literal a few bytes. The exact size is still checked on the
 * JSON text (oversizedAnswer).
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { BadUserInputError } from './errors';

/** Thrown by a reader, and sent as the whole answer, once the answer is past MAX_RESPONSE_BYTES. */
export class AnswerTooLargeError extends BadUserInputError {
  constructor(maxBytes: number) {
    super(
      `The answer would be larger than MAX_RESPONSE_BYTES (${maxBytes}); it was stopped there, before it was all read. Ask for fewer rows (limit, first), fewer fields (messagesSent, raw, snippet texts) or fewer aliases.`,
    );
  }
}

export class AnswerBudget {
  #spent = 0;
  #exceeded = false;
  #reads: Promise<unknown> = Promise.resolve();
  #readsStarted = 0;

  constructor(readonly maxBytes: number) {}

  /** A budget that never runs out (internal callers, subscription events: each event's answer is checked on its own). */
  static unlimited(): AnswerBudget {
    return new AnswerBudget(Number.POSITIVE_INFINITY);
  }

  get exceeded(): boolean {
    return this.#exceeded;
  }

  /** Throws AnswerTooLargeError when the answer is already past its limit. */
  check(): void {
    if (this.#exceeded) throw new AnswerTooLargeError(this.maxBytes);
  }

  /** Counts `bytes` more; throws once the answer is past its limit. */
  charge(bytes: number): void {
    this.check();
    this.#spent += bytes;
    if (this.#spent > this.maxBytes) {
      this.#exceeded = true;
      this.check();
    }
  }

  /** What is left before the limit. */
  get remaining(): number {
    return Math.max(0, this.maxBytes - this.#spent);
  }

  /**
   * Runs `read` after every read started before it has finished (and, but
   * for the first, a turn of the event loop later), and not at all once the
   * budget is spent: concurrent resolvers (aliases, list rows)
   * then read one after another and the first to pass the limit stops the rest.
   */
  serially<T>(read: () => Promise<T>): Promise<T> {
    // Every read after a request's first waits for the next turn of the event loop: other clients' requests go in between.
    const first = this.#readsStarted++ === 0;
    const next = this.#reads.then(async () => {
      if (!first) await nextTurn();
      this.check();
      return read();
    });
    this.#reads = next.catch(() => undefined);
    return next;
  }
}

/** Bytes counted for a number, a boolean or null (a lower bound of their JSON). */
const SCALAR_BYTES = 1;

/**
 * A lower bound of the bytes of `value` as JSON (strings by their length,
 * keys included), computed without building the JSON; stops counting once
 * past `atMost`. Shared objects count each time they are met, as JSON
 * repeats them. Objects with `toJSON` other than plain data (RawJson) count
 * what they write.
 */
export function jsonSizeAtLeast(value: unknown, atMost = Number.POSITIVE_INFINITY): number {
  let size = 0;
  const stack: unknown[] = [value];
  while (stack.length > 0 && size <= atMost) {
    const item = stack.pop();
    if (typeof item === 'string') {
      size += item.length + 2;
    } else if (item === null || typeof item !== 'object') {
      size += SCALAR_BYTES;
    } else if (Array.isArray(item)) {
      size += 2 + item.length;
      for (let index = item.length - 1; index >= 0; index -= 1) stack.push(item[index]);
    } else if (item instanceof Date) {
      size += 26;
    } else {
      const text = rawText(item);
      if (text !== null) {
        size += text.length;
        continue;
      }
      size += 2;
      for (const key in item) {
        size += key.length + 4;
        stack.push((item as Record<string, unknown>)[key]);
      }
    }
  }
  return size;
}

/** jsonSizeAtLeast of the entries of `record` named in `names` (what an answer selects of a stored row). */
export function selectedSize(record: object, names: ReadonlySet<string>, atMost = Number.POSITIVE_INFINITY): number {
  let size = 2;
  for (const name of names) {
    if (!(name in record)) continue;
    size += name.length + 4 + jsonSizeAtLeast((record as Record<string, unknown>)[name], atMost - size);
    if (size > atMost) break;
  }
  return size;
}

/** The exact JSON text an object carries for the answer (a RawJson's `text`), or null. */
function rawText(item: object): string | null {
  const text = (item as { text?: unknown }).text;
  return typeof (item as { toJSON?: unknown }).toJSON === 'function' && typeof text === 'string' ? text : null;
}
