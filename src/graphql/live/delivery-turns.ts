/**
 * Delivery in turns: how frames are written to the subscribers' sockets.
 *
 * With 1,000 watchers one step is a thousand frames, and writing them all
 * inside the publishing turn would make the run's next provider answer and
 * stored step wait behind the fan-out. So a turn writes at most
 * `FRAMES_PER_TURN` (a socket's write counting as `WRITE_COST` frames); once a
 * turn is full, frames wait, per socket, and sockets wait in the order of their
 * oldest waiting frame, for the next turns — timers and I/O run in between. A
 * waiting socket's frames leave together, in one write, so a busy fan-out makes
 * fewer, larger writes, and a step reaches all its watchers within one pass.
 * The live steps one chain of the run's work stores (the provider's answer, the
 * tool's result, the next request) leave by audience (see `push`): a single
 * watcher's in one write when the chain settles; a larger audience's each at
 * once, on its own. A sender goes on at once while little is buffered for its
 * socket, and waits for the write once `HELD_BYTES_LIMIT` is: a slow reader
 * holds back only its own subscription, whose bounded queue then reports lag.
 *
 * Every message of every subscription goes through the same line, so the
 * order of one subscription's messages is kept.
 */
import type { Socket } from 'node:net';
import type { WebSocket } from 'ws';

/**
 * Work per event-loop turn (see DeliveryTurns), counted in frames, a socket's
 * write counting as `WRITE_COST` frames: a frame costs about 1.5 µs and a write
 * (a system call) some 10–15 µs, so a turn writes some 8,000 sockets, about
 * 100 ms of work at most. A turn holds a whole chain of work (the provider's
 * answer, the tool's result, the next request: some four steps, 32,000) for
 * 1,000 watchers, each step written to every socket on its own (see `push`).
 * A chain split over turns leaves its later steps in the sockets' backlogs,
 * where they merge with the steps after them and the clients read several
 * at once: with a turn of 16,384 such merged writes were the spread's worst
 * steps (runs-fanout, 2026-12-03). Larger audiences still take turns, so
 * that a run watched by many thousands leaves the event loop to other work
 * in between. A count, not a clock: on a busy machine a clock budget mistook
 * time spent descheduled for work and slowed to a socket or two per turn.
 */
export const FRAMES_PER_TURN = 65_536;
const WRITE_COST = 8;
/** Bytes a socket may have waiting before its sender waits for them to be written. */
export const HELD_BYTES_LIMIT = 64 * 1024;

interface Waiting {
  /** A whole WebSocket frame. */
  frame: Buffer;
  /** The sender waiting for this frame (null for an offered live step). */
  done: ((error?: unknown) => void) | null;
}

/** A socket's frames waiting for a later turn. */
interface Backlog {
  socket: WebSocket;
  tcp: Socket;
  frames: Waiting[];
  bytes: number;
}

/**
 * Writes messages to WebSockets in turns (see the module comment). `send()`
 * resolves when the sender may send its next message; `offer()` takes a frame
 * or says it cannot (the socket holds too much already).
 */
export class DeliveryTurns {
  /** Sockets with frames waiting, in the order of their oldest waiting frame (from `head` on). */
  private ring: Backlog[] = [];
  private head = 0;
  private readonly backlogs = new Map<Socket, Backlog>();
  /** Sockets corked in the current chain of work; uncorked once it settles. */
  private readonly corked = new Set<Socket>();
  private turnOpen = false;
  private spentThisTurn = 0;
  /** The step whose frames `push` wrote last in this turn. */
  private stepOfTurn: unknown = null;
  private flushQueued = false;

  constructor(private readonly framesPerTurn: number) {}

  /** Writes a frame (see textFrame), now or in a later turn; resolves when the sender may send its next one. */
  send(socket: WebSocket, tcp: Socket, frame: Buffer): Promise<void> {
    if (this.mayWriteNow()) return this.writeOne(socket, tcp, frame);
    return new Promise((resolve, reject) => this.enqueue(socket, tcp, { frame, done: (error) => (error ? reject(error) : resolve()) }));
  }

  /** Whether a frame nobody waits for may be taken for this socket: it is open and holds less than HELD_BYTES_LIMIT. */
  accepts(socket: WebSocket, tcp: Socket): boolean {
    return socket.readyState === socket.OPEN && tcp.writableLength + (this.backlogs.get(tcp)?.bytes ?? 0) < HELD_BYTES_LIMIT;
  }

  /**
   * Takes a frame nobody waits for (check `accepts` first): written now or, in order, in a later turn.
   * `audience` is how many subscriptions take this step with this frame's payload. Written now:
   * - for a single watcher, the frame joins the socket's cork until the chain of work settles, and the
   *   chain's steps leave in one write. The loop does not wait for a write inside its chain and the
   *   reader is woken once a round; with nobody else watching there is no spread to keep. Written at
   *   once instead, the writes inside the chain slowed the loop: p99 0.76–1.30× the baseline's in
   *   eleven turns, against 0.81–1.23× in thirteen turns corked, and CPU per delivery 0.78–1.69×
   *   against 0.49–1.12× (runs-fanout, 2026-12-02);
   * - for more, each step at once, on its own. Steps that share a write share their delays: a
   *   client woken late reads them all late. At 10 watchers, with a chain's steps corked together, the
   *   spread p99 was 1.02–1.85× the baseline's in seven turns of eight, against 0.75–0.87× each on
   *   its own (2026-12-01). At 1,000, with the answer on its own and the rest of its chain corked,
   *   1.29× and 2.29×; each step on its own, 0.66–1.11× in thirteen turns (median 0.92×), and the p99
   *   65–104.6 ms against 107–124 ms, for more CPU per delivery (10.2–16.9 µs against 7.2–8.5 µs,
   *   still under a third of the baseline's; runs-fanout, 2026-12-03);
   * `step` is what the frame carries, the same object for every watcher of it: a step whose frames
   * began to be written in this turn has the rest written in it as well, past the turn's budget, so
   * that it reaches its whole audience in one pass (split, its last watchers would wait behind the
   * run's work for the next turn). The budget then holds back the steps after it.
   */
  push(socket: WebSocket, tcp: Socket, frame: Buffer, step: unknown, audience: number): void {
    if (this.mayWriteNow() || (step === this.stepOfTurn && this.head === this.ring.length)) {
      this.stepOfTurn = step;
      if (audience === 1) {
        dropOnFailure(this.writeOne(socket, tcp, frame));
        return;
      }
      this.spentThisTurn += WRITE_COST;
      dropOnFailure(write(socket, tcp, frame));
    } else {
      this.enqueue(socket, tcp, { frame, done: null });
    }
  }

  /** Frames waiting for a later turn. */
  get waitingCount(): number {
    let count = 0;
    for (const backlog of this.backlogs.values()) count += backlog.frames.length;
    return count;
  }

  /** No socket waits (so no frame of this one either) and the turn has room. */
  private mayWriteNow(): boolean {
    if (!this.turnOpen) this.openTurn();
    return this.head === this.ring.length && this.spentThisTurn < this.framesPerTurn;
  }

  private enqueue(socket: WebSocket, tcp: Socket, waiting: Waiting): void {
    if (!this.turnOpen) this.openTurn();
    let backlog = this.backlogs.get(tcp);
    if (!backlog) {
      this.backlogs.set(tcp, (backlog = { socket, tcp, frames: [], bytes: 0 }));
      this.ring.push(backlog);
    }
    backlog.frames.push(waiting);
    backlog.bytes += waiting.frame.length;
  }

  private openTurn(): void {
    this.turnOpen = true;
    this.spentThisTurn = 0;
    this.stepOfTurn = null;
    // Immediates queued now run in the next turn of the event loop, after its timers and I/O.
    setImmediate(this.nextTurn);
  }

  private readonly nextTurn = (): void => {
    this.turnOpen = false;
    if (this.head === this.ring.length) return;
    this.openTurn();
    // Whole backlogs, oldest first: a socket's waiting frames leave in one write.
    while (this.head < this.ring.length && this.spentThisTurn < this.framesPerTurn) {
      const backlog = this.ring[this.head]!;
      this.ring[this.head] = undefined as unknown as Backlog;
      this.head += 1;
      this.backlogs.delete(backlog.tcp);
      for (const { frame, done } of backlog.frames) {
        const written = this.writeOne(backlog.socket, backlog.tcp, frame);
        if (done) written.then(() => done(), done);
        else dropOnFailure(written);
      }
    }
    if (this.head === this.ring.length) {
      this.ring = [];
      this.head = 0;
    } else if (this.head >= 1024) {
      this.ring = this.ring.slice(this.head);
      this.head = 0;
    }
  };

  private writeOne(socket: WebSocket, tcp: Socket, frame: Buffer): Promise<void> {
    this.spentThisTurn += 1;
    if (!tcp.destroyed && !this.corked.has(tcp)) {
      this.spentThisTurn += WRITE_COST - 1;
      tcp.cork();
      this.corked.add(tcp);
      this.queueFlushOnce();
    }
    return write(socket, tcp, frame);
  }

  /** The chain of work's end: corked sockets are uncorked, each socket's frames of the chain leaving in one write. */
  private queueFlushOnce(): void {
    if (this.flushQueued) return;
    this.flushQueued = true;
    // A tick queued from a microtask runs once every microtask queued so far, and
    // every one they queue, has run: the frames of this chain of work are written by then.
    queueMicrotask(this.queueFlush);
  }

  private readonly queueFlush = (): void => process.nextTick(this.flush);

  private readonly flush = (): void => {
    this.flushQueued = false;
    for (const tcp of this.corked) tcp.uncork();
    this.corked.clear();
  };
}

const RESOLVED = Promise.resolve();

/**
 * A frame nobody waits for could not be written: the connection failed under it. ws sees the same
 * failure on the socket and closes the subscription; the frame is dropped, never left as an unhandled
 * rejection (which would end the process).
 */
function dropOnFailure(written: Promise<void>): void {
  // RESOLVED (the common case) cannot fail; only a write that waits for its callback is caught.
  if (written !== RESOLVED) written.catch(() => undefined);
}

/**
 * Writes a whole frame to the socket's TCP connection, after any frame ws wrote
 * before it. ws writes its own frames (pings, pongs, close) synchronously and,
 * without extensions (checked in serveSubscriptions), as they are, so frames
 * never interleave; a frame is written only while the WebSocket is open, never
 * after ws has begun to close it. Written here in one piece, a frame costs one
 * buffer and one write, where ws's `send` encodes the text, frames it in two
 * pieces and corks the socket around them.
 */
function write(socket: WebSocket, tcp: Socket, frame: Buffer): Promise<void> {
  if (socket.readyState !== socket.OPEN) return RESOLVED;
  if (tcp.writableLength < HELD_BYTES_LIMIT) {
    tcp.write(frame);
    return RESOLVED;
  }
  return new Promise((resolve, reject) => tcp.write(frame, (error) => (error ? reject(error) : resolve())));
}
