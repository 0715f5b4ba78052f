/**
 * Holds writes to many sockets for a short window and sends each socket's
 * share in one system call.
 *
 * A run publishes its steps in bursts, and each step goes to every watcher:
 * with 1,000 watchers one write per message was 45% of the server's CPU in
 * the fan-out profile. A held socket is corked; the window closes after
 * `windowMs` (checked on every hold) or at the end of the event-loop turn,
 * whichever comes first, so a message waits at most that long.
 */
import type { Socket } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { WebSocket } from 'ws';

/** Bytes a WebSocket may have waiting before its sender waits for them to be written. */
const HELD_BYTES_LIMIT = 64 * 1024;

export class SocketBatcher {
  private readonly held = new Set<Socket>();
  private openedAt = 0;
  private flushScheduled = false;

  constructor(private readonly windowMs: number) {}

  hold(socket: Socket): void {
    if (this.held.size > 0 && performance.now() - this.openedAt >= this.windowMs) this.flush();
    if (this.held.has(socket) || socket.destroyed) return;
    if (this.held.size === 0) this.openedAt = performance.now();
    socket.cork();
    this.held.add(socket);
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      setImmediate(this.flushAtTurnEnd);
    }
  }

  /** Bytes held for `socket` (what a sender should not let grow without bound). */
  heldBytes(socket: Socket): number {
    return this.held.has(socket) ? socket.writableLength : 0;
  }

  flush(): void {
    for (const socket of this.held) socket.uncork();
    this.held.clear();
  }

  private readonly flushAtTurnEnd = (): void => {
    this.flushScheduled = false;
    this.flush();
  };
}

type SendCallback = (error?: Error) => void;

/**
 * Routes a WebSocket's sends through `batcher` (its TCP socket is `tcp`), each
 * message passed through `transform` first. graphql-ws sends a subscription's
 * next message only after the send callback: the callback comes at once while
 * little is held for the socket, so a burst of steps leaves in one write, and
 * only after the write once more is held (a slow reader holds back its watcher).
 */
export function batchSends(socket: WebSocket, tcp: Socket, batcher: SocketBatcher, transform: (message: string) => string): void {
  const send = socket.send.bind(socket) as (data: unknown, callback?: SendCallback) => void;
  socket.send = ((data: unknown, callback?: SendCallback) => {
    const message = typeof data === 'string' ? transform(data) : data;
    if (!callback) return send(message);
    batcher.hold(tcp);
    if (tcp.writableLength >= HELD_BYTES_LIMIT) return send(message, callback);
    send(message);
    callback();
  }) as typeof socket.send;
}
