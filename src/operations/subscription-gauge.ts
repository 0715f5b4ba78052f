/**
 * Counts open graphql-ws subscriptions for `promptwire_active_subscriptions`
 * through graphql-ws's own hooks: one opens when its operation answers with
 * a stream, and closes when graphql-ws completes it (client `complete`, end of
 * the stream, error) or when its socket closes — whichever comes first.
 */
interface Counter {
  subscriptionOpened(): void;
  subscriptionClosed(): void;
}

/** graphql-ws's `onOperation`, `onComplete` and `onClose`, for any context type. */
export interface SubscriptionGaugeHooks {
  onOperation(ctx: object, id: string, payload: unknown, args: unknown, result: unknown): undefined;
  onComplete(ctx: object, id: string): void;
  onClose(ctx: object): void;
}

export function subscriptionGaugeHooks(counter: Counter): SubscriptionGaugeHooks {
  const open = new WeakMap<object, Set<string>>();
  const close = (ctx: object, id: string) => {
    if (open.get(ctx)?.delete(id)) counter.subscriptionClosed();
  };
  return {
    onOperation: (ctx, id, _payload, _args, result) => {
      if (result && typeof result === 'object' && Symbol.asyncIterator in result) {
        let ids = open.get(ctx);
        if (!ids) open.set(ctx, (ids = new Set()));
        if (!ids.has(id)) {
          ids.add(id);
          counter.subscriptionOpened();
        }
      }
      return undefined;
    },
    onComplete: (ctx, id) => close(ctx, id),
    onClose: (ctx) => {
      for (const id of [...(open.get(ctx) ?? [])]) close(ctx, id);
      open.delete(ctx);
    },
  };
}
