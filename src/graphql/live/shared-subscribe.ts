/**
 * Subscriptions with shared results (see shared-results), and live items
 * taken directly: a LiveSource hands each in-order live item of a watcher
 * that is waiting for it to its subscription synchronously, inside the
 * source's publish, instead of through the watcher's queue and graphql-ws's
 * iteration. The shared result is written to the subscription's target (its
 * socket, see socket-target) with no per-subscriber async chain (iterator,
 * execute, hook, message serialisation) and no scheduling hop. A result built
 * asynchronously (type-graphql's resolvers are) is written to every
 * subscriber of its group, in order, once it is built. An item the target
 * cannot take (its socket holds HELD_BYTES_LIMIT already, the subscription is
 * closing) goes the ordinary way: the source's bounded queue, graphql-ws's
 * iteration after every item taken directly, and a lag error when that queue
 * overflows. The subscription ends (graphql-ws sends `complete`) only after
 * its items taken directly are written.
 */
import { createSourceEventStream, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { EventExecutor, Operations, type Result } from './event-executor';
import { isLiveSource } from './live-source';
import { isAsyncIterable, MappedIterator, type Mapper } from './mapped-iterator';
import type { PreSerializedMarkers } from './pre-serialized';
import { type Group, type SharedResult, SharedResults } from './shared-results';
import type { DirectTarget } from './socket-target';

export interface SharedSubscribeOptions {
  /** The part of the context that may change a result (e.g. the caller's role); null when nothing does. */
  contextKey(contextValue: unknown): string | null;
  /** Applied once to every result before it is serialised (error formatting). */
  finish(result: ExecutionResult): ExecutionResult;
  /** The answer to send instead of a result whose JSON may not be sent (e.g. too large), or null. Finished like any result. */
  refuse?(json: string): ExecutionResult | null;
  /** The answer sent instead of an execution's result before it is serialised (its readers stopped it, or it is too large), or null. */
  refuseResult?(result: ExecutionResult, args: ExecutionArgs): ExecutionResult | null;
}

/**
 * One subscription of createSharedSubscribe: maps its source's events to results (see MappedIterator)
 * and, with a target, takes its in-order live steps directly (`take`). An object with methods, not a
 * set of closures, for the reason SocketTarget gives.
 */
class SharedSubscription implements Mapper<unknown, Result> {
  /** Live steps taken directly whose result is still being built: each is written, in order, once it is. */
  private pending: SharedResult[] | null = null;
  /** Those waiting for `pending` to be written. */
  private drained: (() => void)[] | null = null;
  private drainOnce: (() => void) | null = null;
  private left = false;

  constructor(
    private readonly shared: SharedResults,
    private readonly group: Group,
    private readonly executor: EventExecutor,
    private readonly target: DirectTarget | null,
  ) {}

  /** A live step handed over by the source: written directly (true), or refused (false: it goes through the iterator). */
  take(event: unknown): boolean {
    const target = this.target;
    if (!target || typeof event !== 'object' || event === null || !target.accepts()) return false;
    const shared = this.shared.of(event, this.group, this.executor);
    if (this.pending === null && !shared.waiters) {
      this.deliver(shared);
      return true;
    }
    (this.pending ??= []).push(shared);
    shared.waiters?.push((this.drainOnce ??= () => this.drain()));
    return true;
  }

  map(event: unknown): Result {
    if (typeof event !== 'object' || event === null) return this.executor.run(event);
    // A step that waited in the queue goes after every step taken directly before it.
    const written = this.allWritten();
    return written ? written.then(() => this.shared.read(this.shared.of(event, this.group, this.executor))) : this.shared.read(this.shared.of(event, this.group, this.executor));
  }

  /** The end (graphql-ws then sends `complete`) too: after the END step taken directly. */
  beforeEnd(): Promise<void> | null {
    return this.allWritten();
  }

  ended(): void {
    if (this.left) return;
    this.left = true;
    this.shared.leave(this.group, this.target !== null);
  }

  private deliver(shared: SharedResult): void {
    const target = this.target as DirectTarget;
    if (shared.result) target.write(shared.result, this.group.audience);
    else target.fail(shared.failure?.error);
  }

  private drain(): void {
    const pending = this.pending;
    while (pending && pending.length > 0 && !pending[0]!.waiters) this.deliver(pending.shift()!);
    if (pending && pending.length > 0) return;
    this.pending = null;
    const wake = this.drained;
    this.drained = null;
    if (wake) for (const resolve of wake) resolve();
  }

  private allWritten(): Promise<void> | null {
    if (this.pending === null) return null;
    return new Promise<void>((resolve) => (this.drained ??= []).push(resolve));
  }
}

/**
 * graphql-ws's `subscribe` hook with shared results: one per server (see serveSubscriptions), whose
 * subscriptions share the groups, the operations' compiled forms and `markers`. A source that is a
 * LiveSource and whose subscription has a target (`targetOf`) hands its live items to the target directly.
 */
export function createSharedSubscribe(options: SharedSubscribeOptions, markers: PreSerializedMarkers, targetOf?: (args: ExecutionArgs) => DirectTarget | null) {
  const shared = new SharedResults(options, markers);
  const operations = new Operations();
  return async function subscribe(args: ExecutionArgs): Promise<AsyncIterable<ExecutionResult> | ExecutionResult> {
    const source = await createSourceEventStream(args);
    if (!isAsyncIterable(source)) return source;
    const live = isLiveSource(source) ? source : null;
    const target = live ? (targetOf?.(args) ?? null) : null;
    const subscription = new SharedSubscription(shared, shared.join(args, target !== null), new EventExecutor(args, operations), target);
    if (live && target) live.deliverLive((event) => subscription.take(event));
    return new MappedIterator(source[Symbol.asyncIterator](), subscription);
  };
}
