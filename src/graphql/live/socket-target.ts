/**
 * The socket end of a subscription's live steps: a step taken directly (see
 * shared-subscribe) becomes the subscription's `next` frame, handed to the
 * delivery turns for the subscription's socket.
 */
import type { Socket } from 'node:net';
import { CloseCode } from 'graphql-ws';
import type { WebSocket } from 'ws';
import type { DeliveryTurns } from './delivery-turns';
import { nextFrame, type NextPrefixes } from './frames';
import type { PreSerialized } from './pre-serialized';

/**
 * A subscription's socket as the target of its live steps. An object with methods, not closures:
 * with 1,000 watchers of a run, what each subscription holds lives as long as the run, is copied by
 * every young-generation collection meanwhile and then promoted (see runs-fanout in bench/).
 */
export class SocketTarget implements DirectTarget {
  private readonly prefix: Buffer;

  constructor(
    private readonly turns: DeliveryTurns,
    /** graphql-ws's open subscriptions of the connection, by id. */
    private readonly subscriptions: Record<string, unknown>,
    private readonly id: string,
    private readonly socket: WebSocket,
    private readonly tcp: Socket,
    private readonly fanout: { onInternalError?: (error: unknown) => void },
    prefixes: NextPrefixes,
  ) {
    this.prefix = prefixes.of(id);
  }

  accepts(): boolean {
    return this.id in this.subscriptions && this.turns.accepts(this.socket, this.tcp);
  }

  write(payload: PreSerialized, audience: number): void {
    this.turns.push(this.socket, this.tcp, nextFrame(this.prefix, payload.bytes), payload, audience);
  }

  fail(error: unknown): void {
    this.fanout.onInternalError?.(error);
    this.socket.close(CloseCode.InternalServerError, 'Internal server error');
  }
}

/** Where a subscription's live steps can be written directly (see serveSubscriptions). */
export interface DirectTarget {
  /** Whether a live step may be taken now (the subscription and its socket are open, little is held for it). */
  accepts(): boolean;
  /**
   * Writes a `next` message with this payload (the same object for every watcher of the event in a group), now or in
   * order later; `audience` is how many subscriptions of the group take live steps directly.
   */
  write(payload: PreSerialized, audience: number): void;
  /** A live step's result could not be built: the subscription cannot go on. */
  fail(error: unknown): void;
}
