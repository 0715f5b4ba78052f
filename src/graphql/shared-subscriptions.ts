/**
 * Subscription events executed once per group of identical subscriptions.
 *
 * graphql-js maps every event of every subscriber through its own `execute`:
 * a run watched by 1,000 clients had each step's selection set collected,
 * resolved and completed 1,000 times (a quarter of the server's CPU in the
 * fan-out profile, plus the garbage it left). Subscribers that sent the same
 * document, operation name and variables, with the same role, get the same
 * result for the same event object, so it is computed for the first of them
 * and reused by the rest while that event object is alive (a WeakMap keyed
 * by the event). Events that are not shared objects (a replay read from the
 * table for one subscriber, a lag error) are executed as before.
 *
 * The serialised form is shared too: `preSerialized` wraps a result whose
 * JSON is computed once; `expandPreSerialized` splices that JSON into the
 * outgoing graphql-ws message, which then never stringifies the payload
 * again per subscriber.
 */
import crypto from 'node:crypto';
import { createSourceEventStream, execute, print, type ExecutionArgs, type ExecutionResult } from 'graphql';

type Result = ExecutionResult | Promise<ExecutionResult>;

export interface SharedSubscribeOptions {
  /** The part of the context that may change a result (e.g. the caller's role); null when nothing does. */
  contextKey(contextValue: unknown): string | null;
  /** Applied once to every shared result before it is serialised (error formatting). */
  finish(result: ExecutionResult): ExecutionResult;
}

export function createSharedSubscribe(options: SharedSubscribeOptions) {
  const results = new WeakMap<object, Map<string, Promise<ExecutionResult>>>();
  return async function subscribe(args: ExecutionArgs): Promise<AsyncIterable<ExecutionResult> | ExecutionResult> {
    const source = await createSourceEventStream(args);
    if (!isAsyncIterable(source)) return source;
    const key = JSON.stringify([print(args.document), args.operationName ?? null, args.variableValues ?? null, options.contextKey(args.contextValue)]);
    return mapAsyncIterator(source, (event: unknown): Result => {
      if (typeof event !== 'object' || event === null) return execute({ ...args, rootValue: event }) as Result;
      let perEvent = results.get(event);
      if (!perEvent) results.set(event, (perEvent = new Map()));
      let shared = perEvent.get(key);
      if (!shared) {
        shared = Promise.resolve(execute({ ...args, rootValue: event }) as Result).then((result) => preSerialized(options.finish(result)));
        perEvent.set(key, shared);
      }
      return shared;
    });
  };
}

/** Like graphql-js's internal mapAsyncIterator: return() reaches the source at once, even while it waits. */
function mapAsyncIterator<T, U>(iterable: AsyncIterable<T>, map: (value: T) => U | Promise<U>): AsyncIterableIterator<U> {
  const iterator = iterable[Symbol.asyncIterator]();
  const close = async () => {
    try {
      await iterator.return?.();
    } catch {
      // keep the original error
    }
  };
  const mapped: AsyncIterableIterator<U> = {
    async next() {
      const step = await iterator.next();
      if (step.done) return { value: undefined, done: true };
      try {
        return { value: await map(step.value), done: false };
      } catch (error) {
        await close();
        throw error;
      }
    },
    async return() {
      await iterator.return?.();
      return { value: undefined, done: true };
    },
    async throw(error?: unknown) {
      if (iterator.throw) {
        const step = await iterator.throw(error);
        return step.done ? { value: undefined, done: true } : { value: await map(step.value), done: false };
      }
      await close();
      throw error;
    },
    [Symbol.asyncIterator]() {
      return mapped;
    },
  };
  return mapped;
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}

/**
 * Stands for a result in a graphql-ws message. Its JSON form is a marker that
 * is unique to this process (a random nonce) and to this result; the socket's
 * send replaces the quoted marker with the result's JSON, built once.
 */
const NONCE = crypto.randomBytes(12).toString('hex');
/** How a marker starts inside a serialised message (with its opening quote). */
const MARKER_PREFIX = `"pw-serialized-${NONCE}-`;
const RECENT_LIMIT = 1024;
const recent = new Map<string, string>();
let counter = 0;

class PreSerialized implements ExecutionResult {
  private readonly marker: string;
  constructor(
    readonly result: ExecutionResult,
    readonly json: string,
  ) {
    this.marker = `pw-serialized-${NONCE}-${(counter += 1)}`;
  }

  /** Kept for code that reads the result (graphql-ws's onNext hook). */
  get data() {
    return this.result.data;
  }

  get errors() {
    return this.result.errors;
  }

  toJSON(): string {
    // Registered when serialised: graphql-ws sends right after stringifying.
    if (!recent.has(this.marker)) {
      recent.set(this.marker, this.json);
      if (recent.size > RECENT_LIMIT) recent.delete(recent.keys().next().value as string);
    }
    return this.marker;
  }
}

export function preSerialized(result: ExecutionResult): PreSerialized {
  return new PreSerialized(result, JSON.stringify(result));
}

export function isPreSerialized(value: unknown): value is PreSerialized {
  return value instanceof PreSerialized;
}

/** An outgoing message with every marker replaced by its result's JSON. */
export function expandPreSerialized(message: string): string {
  let start = message.indexOf(MARKER_PREFIX);
  if (start < 0) return message;
  let out = '';
  let from = 0;
  while (start >= 0) {
    const end = message.indexOf('"', start + MARKER_PREFIX.length);
    const marker = message.slice(start + 1, end);
    const json = recent.get(marker);
    if (json === undefined) throw new Error('A pre-serialised subscription result was evicted before it was sent');
    out += message.slice(from, start) + json;
    from = end + 1;
    start = message.indexOf(MARKER_PREFIX, from);
  }
  return out + message.slice(from);
}
