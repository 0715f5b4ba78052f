/**
 * Shared execution and serialisation. graphql-js maps every event of every
 * subscriber through its own `execute`; here subscribers that sent the same
 * document, operation name and variables, with the same `contextKey` (the
 * caller's role), form a group that shares one execution and one JSON
 * serialisation of each event object (a WeakMap keyed by the event). Events
 * that are not shared objects (a replay read from the table for one
 * subscriber, a lag error) are executed as before.
 */
import { type DocumentNode, type ExecutionArgs, type ExecutionResult, print } from 'graphql';
import type { EventExecutor, Result } from './event-executor';
import type { PreSerialized, PreSerializedMarkers } from './pre-serialized';
import type { SharedSubscribeOptions } from './shared-subscribe';

/**
 * One event's result for one group of identical subscriptions: built once,
 * then read by each of them; `waiters` is set while it is being built.
 */
export interface SharedResult {
  result: PreSerialized | null;
  failure: { error: unknown } | null;
  built: Promise<PreSerialized> | null;
  waiters: (() => void)[] | null;
}

/**
 * Subscriptions that sent the same document, operation name and variables with the same context key:
 * they share each event's result. `audience` counts those that take live steps directly.
 */
export interface Group {
  readonly key: string;
  members: number;
  audience: number;
}

/** What every subscription of one createSharedSubscribe shares: the groups and each event's results per group. */
export class SharedResults {
  private readonly results = new WeakMap<object, Map<string, SharedResult>>();
  private readonly groups = new Map<string, Group>();
  // Documents are shared between operations with the same text (see document-cache): printed once each.
  private readonly printed = new WeakMap<DocumentNode, string>();

  constructor(
    private readonly options: SharedSubscribeOptions,
    private readonly markers: PreSerializedMarkers,
  ) {}

  /** The group of these arguments, joined (leave it with `leave`). Its key is one string for all of its subscriptions. */
  join(args: ExecutionArgs, direct: boolean): Group {
    const key = JSON.stringify([this.printOnce(args.document), args.operationName ?? null, args.variableValues ?? null, this.options.contextKey(args.contextValue)]);
    let group = this.groups.get(key);
    if (!group) this.groups.set(key, (group = { key, members: 0, audience: 0 }));
    group.members += 1;
    if (direct) group.audience += 1;
    return group;
  }

  leave(group: Group, direct: boolean): void {
    group.members -= 1;
    if (direct) group.audience -= 1;
    if (group.members === 0 && this.groups.get(group.key) === group) this.groups.delete(group.key);
  }

  /** The event's result for the group, executed (by `executor`) once per event object and group; synchronously when the resolvers are. */
  of(event: object, group: Group, executor: EventExecutor): SharedResult {
    let perEvent = this.results.get(event);
    if (!perEvent) this.results.set(event, (perEvent = new Map()));
    let shared = perEvent.get(group.key);
    if (!shared) perEvent.set(group.key, (shared = this.build(executor.run(event))));
    return shared;
  }

  read(shared: SharedResult): Result {
    if (shared.result) return shared.result;
    if (shared.built) return shared.built;
    throw (shared.failure as { error: unknown }).error;
  }

  private build(result: Result): SharedResult {
    const building: SharedResult = { result: null, failure: null, built: null, waiters: null };
    if (!isPromiseLike(result)) {
      building.result = this.finished(result);
      return building;
    }
    building.waiters = [];
    const settle = () => {
      const waiters = building.waiters ?? [];
      building.waiters = null;
      for (const wake of waiters) wake();
    };
    building.built = Promise.resolve(result)
      .then((value) => this.finished(value))
      .then(
        (value) => {
          building.result = value;
          settle();
          return value;
        },
        (error: unknown) => {
          building.failure = { error };
          settle();
          throw error;
        },
      );
    // Read by whoever needs it; a failure is reported there.
    building.built.catch(() => undefined);
    return building;
  }

  private finished(result: ExecutionResult): PreSerialized {
    const serialized = this.markers.preSerialized(this.options.finish(result));
    const refused = this.options.refuse?.(serialized.json);
    return refused ? this.markers.preSerialized(this.options.finish(refused)) : serialized;
  }

  private printOnce(document: DocumentNode): string {
    let text = this.printed.get(document);
    if (text === undefined) this.printed.set(document, (text = print(document)));
    return text;
  }
}

function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}
