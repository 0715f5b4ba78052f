/**
 * What a source of live events must offer the fan-out so that its live items
 * reach the sockets directly.
 *
 * A subscription resolver returns an async iterator of its events (graphql-js's
 * source event stream). Every iterator is served through graphql-ws's iteration.
 * One that is also a `LiveSource` (a run's trace, see runs' `openTrace`) is
 * offered a synchronous deliverer once its subscription has a socket to write
 * to: from then on the source hands it each in-order live item, inside its own
 * publish, as that item happens. The fan-out builds the item's result (once
 * per group of identical subscriptions) and writes it to the socket in turns.
 *
 * The contract, on the source's side:
 * - items reach `deliver` in the order the subscriber is to see them, and only
 *   after every item the iterator has yielded before them (the source's replay
 *   of stored items, for instance, comes first through next());
 * - `deliver` returns false when the fan-out cannot take the item now (the
 *   socket holds too much, the subscription is closing): the source then
 *   keeps it for next() as any other item (its bounded queue, which reports
 *   lag when it overflows), and may offer the next item again;
 * - an item handed over is a shared object: the same object for every watcher
 *   of the same event, so that its result is built once for all of them;
 * - the end is reported through next() ({ done: true }); the fan-out sends
 *   `complete` only after the items it took are written.
 *
 * The fan-out asks nothing else of the source: no cursor, no store, no bus.
 */
export interface LiveSource<TLive, T = unknown> extends AsyncIterableIterator<T> {
  /** From now on, hand every in-order live item to `deliver` synchronously; an item it refuses (false) goes through next(). */
  deliverLive(deliver: (item: TLive) => boolean): void;
}

/** Whether a subscription's source event stream offers its live items directly. */
export function isLiveSource(source: object): source is LiveSource<unknown> {
  return typeof (source as { deliverLive?: unknown }).deliverLive === 'function';
}
