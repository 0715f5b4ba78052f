/**
 * Inbound turns: how graphql-ws messages are started, so that a burst from
 * one client never stalls the others.
 *
 * `ws` reads a socket and emits every message of the chunk it read in one go,
 * and one event-loop turn reads every socket that has data. graphql-ws starts
 * the handling of each message at once; on SQLite (synchronous reads) the
 * whole handling of a `runTrace` subscription — token re-check, parse,
 * validation, the stored-trace replay — then runs as one chain of microtasks
 * that nothing else can interleave with. 5,000 subscriptions sent at once on
 * 50 connections held every other client (HTTP included) for 3–4 s.
 *
 * So a message is not handled when it arrives but queued with its
 * connection, and every turn of the event loop starts at most
 * `messagesPerTurn` of them, taking one message per connection in turn (a
 * connection with a hundred queued messages does not keep a bystander's one
 * message waiting behind them). Between two turns the poll phase runs: HTTP
 * requests, other sockets, database replies, the run loop's provider answers.
 * A connection with more than `queuedPerConnection` messages waiting is no
 * longer read (`pause`) until its queue has drained to half, so what waits is
 * bounded and the rest stays in the kernel's buffers (TCP back-pressure on the
 * sender).
 *
 * The order of one connection's messages is kept: a message is started only
 * after every earlier message of its connection was started.
 */

/** The part of a connection the turns use: its reading can be paused. */
export interface InboundSource {
  pause(): void;
  resume(): void;
}

export interface InboundTurnsOptions {
  /** Messages started per event-loop turn, over all connections. */
  messagesPerTurn?: number;
  /** Messages a connection may have waiting before it is no longer read. */
  queuedPerConnection?: number;
  /** Defers a callback to the next event-loop turn (setImmediate; tests may replace it). */
  defer?: (callback: () => void) => void;
}

/**
 * Messages started per turn. A `runTrace` subscription's handling costs some
 * 0.3–1 ms of CPU on SQLite, so a turn stays within a few milliseconds. A
 * count, not a clock (see DeliveryTurns in delivery-turns for why).
 */
export const MESSAGES_PER_TURN = 8;
/** Messages a connection may have waiting before its socket is paused. */
export const QUEUED_PER_CONNECTION = 256;

interface Line {
  readonly source: InboundSource;
  readonly messages: (() => void)[];
  head: number;
  paused: boolean;
  /** In the ring of lines with messages waiting. */
  ringed: boolean;
  closed: boolean;
}

export class InboundTurns {
  private readonly messagesPerTurn: number;
  private readonly queuedPerConnection: number;
  private readonly defer: (callback: () => void) => void;
  /** Connections with messages waiting, in turn order. */
  private readonly ring: Line[] = [];
  private scheduled = false;
  private startedThisTurn = 0;
  private turnOpen = false;

  constructor(options: InboundTurnsOptions = {}) {
    this.messagesPerTurn = Math.max(1, options.messagesPerTurn ?? MESSAGES_PER_TURN);
    this.queuedPerConnection = Math.max(1, options.queuedPerConnection ?? QUEUED_PER_CONNECTION);
    this.defer = options.defer ?? setImmediate;
  }

  /** A connection's line: `take` its messages in arrival order; `close` it with its socket. */
  open(source: InboundSource): { take(start: () => void): void; close(): void } {
    const line: Line = { source, messages: [], head: 0, paused: false, ringed: false, closed: false };
    return {
      take: (start) => this.take(line, start),
      close: () => {
        line.closed = true;
        line.messages.length = 0;
        line.head = 0;
      },
    };
  }

  /** Messages waiting over all connections. */
  get waitingCount(): number {
    let count = 0;
    for (const line of this.ring) count += line.messages.length - line.head;
    return count;
  }

  private take(line: Line, start: () => void): void {
    if (line.closed) return;
    // Started at once while this turn has room and nothing of this connection waits.
    if (!line.ringed && this.hasRoom()) {
      this.startedThisTurn += 1;
      start();
      return;
    }
    line.messages.push(start);
    if (!line.ringed) {
      line.ringed = true;
      this.ring.push(line);
    }
    if (!line.paused && line.messages.length - line.head >= this.queuedPerConnection) {
      line.paused = true;
      line.source.pause();
    }
    this.schedule();
  }

  private hasRoom(): boolean {
    if (!this.turnOpen) {
      this.turnOpen = true;
      this.startedThisTurn = 0;
      this.schedule();
    }
    return this.startedThisTurn < this.messagesPerTurn;
  }

  private schedule(): void {
    if (this.scheduled) return;
    this.scheduled = true;
    this.defer(this.nextTurn);
  }

  private readonly nextTurn = (): void => {
    this.scheduled = false;
    this.turnOpen = false;
    if (this.ring.length === 0) return;
    // This turn's budget goes to waiting messages first; what arrives during it waits for the next.
    this.turnOpen = true;
    this.startedThisTurn = 0;
    this.schedule();
    const starts: (() => void)[] = [];
    // One message per connection in turn; a connection with more goes to the back of the ring.
    while (starts.length < this.messagesPerTurn && this.ring.length > 0) {
      const line = this.ring.shift() as Line;
      const start = line.closed ? undefined : line.messages[line.head];
      if (start) {
        line.messages[line.head] = undefined as unknown as () => void;
        line.head += 1;
        starts.push(start);
      }
      const waiting = line.messages.length - line.head;
      if (line.closed || waiting === 0) {
        line.ringed = false;
        line.messages.length = 0;
        line.head = 0;
      } else {
        if (line.head > 1024) {
          line.messages.splice(0, line.head);
          line.head = 0;
        }
        this.ring.push(line);
      }
      if (line.paused && !line.closed && waiting <= this.queuedPerConnection / 2) {
        line.paused = false;
        line.source.resume();
      }
    }
    this.startedThisTurn = starts.length;
    for (const start of starts) start();
  };
}
