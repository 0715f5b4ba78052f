/**
 * Trace fan-out: how live subscription events reach graphql-ws clients.
 *
 * One module owns the whole path from an event to the socket, built on
 * graphql-ws's own server (`makeServer`, with this module as its transport for
 * `ws`, as graphql-ws's `useServer` is) and its `subscribe` hook:
 *
 * 1. Shared execution and serialisation (`createSharedSubscribe`). graphql-js
 *    maps every event of every subscriber through its own `execute`; here
 *    subscribers that sent the same document, operation name and variables,
 *    with the same `contextKey` (the caller's role), share one execution and
 *    one JSON serialisation of each event object (a WeakMap keyed by the
 *    event). Events that are not shared objects (a replay read from the table
 *    for one subscriber, a lag error) are executed as before. The shared JSON
 *    reaches the outgoing message through a marker (`preSerialized`), which
 *    this module's transport replaces before writing. An event is executed
 *    by the operation's compiled form (graphql-jit, compiled once per
 *    document and operation, see `executorOf`): graphql-js's `execute`
 *    coerces the variables, collects the fields and builds a context again
 *    for every event, some 25 µs against 7 µs, and with one watcher per run
 *    every delivery pays it. An operation is compiled once it has had
 *    COMPILE_AFTER_EVENTS events; until then, and when it cannot be
 *    compiled, graphql-js executes it.
 *
 * 2. Live steps straight to the socket. A live trace (`LiveTrace`, see
 *    run-reader) hands each in-order live step of a watcher that is waiting
 *    for it to this module synchronously, inside the bus's publish, instead of
 *    through the watcher's queue and graphql-ws's iteration: the shared JSON
 *    is framed with the subscription's `next` prefix (the bytes graphql-ws
 *    would send; the JSON encoded once for all its watchers) and written to
 *    the TCP socket in one piece (see `write`), with no per-subscriber async chain (iterator,
 *    execute, hook, message serialisation) and no scheduling hop. A result
 *    built asynchronously (type-graphql's resolvers are) is written to every
 *    subscriber of its group, in order, once it is built. A step the module
 *    cannot take (the socket holds `HELD_BYTES_LIMIT` already, the
 *    subscription is closing) goes the ordinary way: the watcher's bounded
 *    queue, graphql-ws's iteration after every step taken directly, and a
 *    lag error when that queue overflows. The subscription ends (graphql-ws
 *    sends `complete`) only after its steps taken directly are written.
 *
 * 3. Delivery in turns (`DeliveryTurns`). With 1,000 watchers one step is a
 *    thousand frames, and writing them all inside the publishing turn would
 *    make the run's next provider answer and stored step wait behind the
 *    fan-out. So a turn writes at most `FRAMES_PER_TURN` (a socket's write
 *    counting as `WRITE_COST` frames); once a turn is full, frames wait, per
 *    socket, and sockets wait in the order of their oldest waiting frame, for
 *    the next turns — timers and I/O run in between. A waiting socket's
 *    frames leave together, in one write, so a busy fan-out makes fewer,
 *    larger writes, and a step reaches all its watchers within one pass.
 *    The live steps one chain of the run's work stores (the provider's
 *    answer, the tool's result, the next request) leave by audience (see
 *    `push`): a single watcher's in one write when the chain settles; a
 *    larger audience's each at once, on its own.
 *    A sender goes on at once while little is buffered for its socket, and
 *    waits for the write once `HELD_BYTES_LIMIT` is: a slow reader holds back
 *    only its own subscription, whose bounded queue then reports lag.
 *
 * Every message of every subscription goes through the same line, so the
 * order of one subscription's messages is kept.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import crypto from 'node:crypto';
import { createSourceEventStream, type DocumentNode, execute, type GraphQLSchema, print, type ExecutionArgs, type ExecutionResult } from 'graphql';
import { compileQuery, isCompiledQuery, type CompiledQuery } from 'graphql-jit';
import { CloseCode, handleProtocols, makeServer, type FormattedExecutionResult, type ServerOptions } from 'graphql-ws';
import type { WebSocket, WebSocketServer } from 'ws';
import { stringifyResponse } from './raw-json';
import { InboundTurns } from './inbound-turns';

type Result = ExecutionResult | Promise<ExecutionResult>;

/** What graphql-ws hands to its hooks as `ctx.extra` for a ws connection. */
export interface SocketExtra {
  readonly socket: WebSocket;
  readonly request: IncomingMessage;
}

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

export interface TraceFanoutOptions extends SharedSubscribeOptions {
  /** Server pings every this many ms; a client that does not answer within as long is dropped (0: off). */
  keepAliveMs?: number;
  /** Frames written in one event-loop turn over all sockets (the rest wait for the next). */
  framesPerTurn?: number;
  /** graphql-ws messages started per event-loop turn over all connections (see inbound-turns). */
  messagesPerTurn?: number;
  /** Told of a failure inside the server's message handling (the socket is then closed with 4500). */
  onInternalError?: (error: unknown) => void;
}

/**
 * Serves GraphQL over graphql-ws on `wsServer` with the fan-out described
 * above. `options` are graphql-ws's server options (schema, context, onConnect,
 * validate, …) except `subscribe`, which this module provides; results are
 * passed through `fanout.finish` unless `options.onNext` returns its own.
 */
export function serveSubscriptions<P extends Record<PropertyKey, unknown>, E extends Record<PropertyKey, unknown>>(
  options: Omit<ServerOptions<P, SocketExtra & Partial<E>>, 'subscribe'>,
  wsServer: WebSocketServer,
  fanout: TraceFanoutOptions,
): { dispose(): Promise<void> } {
  const turns = new DeliveryTurns(fanout.framesPerTurn ?? FRAMES_PER_TURN);
  const inbound = new InboundTurns({ messagesPerTurn: fanout.messagesPerTurn });
  const keepAliveMs = fanout.keepAliveMs ?? 12_000;
  // Live steps are written as graphql-ws would write them, so only when no hook of its own changes a `next` message.
  const direct = !options.onNext && !options.jsonMessageReplacer;
  const targets = new WeakMap<ExecutionArgs, DirectTarget>();
  const server = makeServer<P, SocketExtra & Partial<E>>({
    ...options,
    // graphql-ws calls this with the execution arguments it then subscribes with: they name the subscription's socket and id.
    context: async (ctx, id, payload, args) => {
      const value = typeof options.context === 'function' ? await options.context(ctx, id, payload, args) : options.context;
      if (direct) targets.set(args, new SocketTarget(turns, ctx.subscriptions, id, ctx.extra.socket, ctx.extra.request.socket, fanout));
      return value;
    },
    subscribe: createSharedSubscribe(fanout, (args) => targets.get(args) ?? null),
    onNext: async (ctx, id, payload, args, result) => {
      const own = await options.onNext?.(ctx, id, payload, args, result);
      if (own) return own;
      // A shared result is finished and checked already; its marker becomes its JSON in send().
      if (isPreSerialized(result)) return result as FormattedExecutionResult;
      const stopped = fanout.refuseResult?.(result, args);
      if (stopped) return preSerialized(fanout.finish(stopped)) as unknown as FormattedExecutionResult;
      // Any other result is serialised here too, so that RawJson values keep their exact text.
      const json = stringifyResponse(result);
      const refused = fanout.refuse?.(json);
      if (!refused && !result.errors?.length) return new PreSerialized(result, json) as unknown as FormattedExecutionResult;
      return preSerialized(fanout.finish(refused ?? result)) as unknown as FormattedExecutionResult;
    },
  });
  // Frames are written to the TCP socket as they are (textFrame): a negotiated extension would change them.
  if (wsServer.options.perMessageDeflate) throw new Error('serveSubscriptions writes uncompressed frames: create the WebSocketServer without perMessageDeflate');
  wsServer.options.handleProtocols = handleProtocols;
  // The HTTP server's errors reach the WebSocket server too; its listener is the HTTP server's owner.
  wsServer.on('error', (error) => fanout.onInternalError?.(error));
  wsServer.on('connection', (socket: WebSocket, request: IncomingMessage) => {
    const tcp = request.socket;
    const fail = (error: unknown) => {
      fanout.onInternalError?.(error);
      socket.close(CloseCode.InternalServerError, 'Internal server error');
    };
    socket.once('error', fail);
    let pongWait: NodeJS.Timeout | null = null;
    const pingInterval =
      keepAliveMs > 0
        ? setInterval(() => {
            if (socket.readyState !== socket.OPEN) return;
            pongWait = setTimeout(() => socket.terminate(), keepAliveMs);
            socket.once('pong', () => {
              if (pongWait) clearTimeout(pongWait);
              pongWait = null;
            });
            socket.ping();
          }, keepAliveMs).unref()
        : null;
    const closed = server.opened(
      {
        protocol: socket.protocol,
        send: (data) => turns.send(socket, tcp, textFrame(expandPreSerialized(data))),
        close: (code, reason) => socket.close(code, reason),
        // Messages are started in turns, a few per event-loop turn over all connections (see inbound-turns).
        onMessage: (handle) => {
          const line = inbound.open(socket);
          socket.once('close', () => line.close());
          socket.on('message', (data: Buffer) => {
            const text = String(data);
            line.take(() => void handle(text).catch(fail));
          });
        },
      },
      { socket, request } as SocketExtra & Partial<E>,
    );
    socket.once('close', (code: number, reason: Buffer) => {
      if (pongWait) clearTimeout(pongWait);
      if (pingInterval) clearInterval(pingInterval);
      void closed(code, String(reason));
    });
  });
  return {
    dispose: async () => {
      for (const client of wsServer.clients) client.close(1001, 'Going away');
      wsServer.removeAllListeners('connection');
    },
  };
}

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

/** The header of an unmasked, unfragmented text frame (RFC 6455 §5.2) of `length` bytes, written into `frame`; returns its size. */
function writeFrameHeader(frame: Buffer, length: number): number {
  frame[0] = 0x81;
  if (length < 126) {
    frame[1] = length;
    return 2;
  }
  if (length < 65_536) {
    frame[1] = 126;
    frame.writeUInt16BE(length, 2);
    return 4;
  }
  frame[1] = 127;
  frame.writeUInt32BE(Math.floor(length / 2 ** 32), 2);
  frame.writeUInt32BE(length >>> 0, 6);
  return 10;
}

const headerSize = (length: number) => (length < 126 ? 2 : length < 65_536 ? 4 : 10);

/** A text message as a server's WebSocket frame. */
export function textFrame(text: string): Buffer {
  const length = Buffer.byteLength(text);
  const frame = Buffer.allocUnsafe(headerSize(length) + length);
  frame.write(text, writeFrameHeader(frame, length), 'utf8');
  return frame;
}

const CLOSING_BRACE = 0x7d;

/**
 * A subscription's `next` message as a frame: its `prefix` (`{"id":…,"payload":`), the payload's
 * UTF-8 bytes (encoded once per event and group, see PreSerialized.bytes) and the closing brace.
 */
export function nextFrame(prefix: Buffer, payload: Buffer): Buffer {
  const length = prefix.length + payload.length + 1;
  const frame = Buffer.allocUnsafe(headerSize(length) + length);
  let offset = writeFrameHeader(frame, length);
  offset += prefix.copy(frame, offset);
  offset += payload.copy(frame, offset);
  frame[offset] = CLOSING_BRACE;
  return frame;
}

/**
 * The part of a subscription's `next` message before its payload, as graphql-ws writes it, by
 * subscription id (clients number their subscriptions, so most ids recur): one buffer per id for every
 * subscription that has it. Each is a buffer of its own: a slice of Node's shared pool would keep that
 * pool's 8 kB alive for as long as the subscription lasts.
 */
const prefixes = new Map<string, Buffer>();
const PREFIXES_LIMIT = 4096;

export function nextPrefix(id: string): Buffer {
  let prefix = prefixes.get(id);
  if (!prefix) {
    const text = `{"id":${JSON.stringify(id)},"type":"next","payload":`;
    prefix = Buffer.allocUnsafeSlow(Buffer.byteLength(text));
    prefix.write(text);
    if (prefixes.size >= PREFIXES_LIMIT) prefixes.clear();
    prefixes.set(id, prefix);
  }
  return prefix;
}

/**
 * A subscription's socket as the target of its live steps. An object with methods, not closures:
 * with 1,000 watchers of a run, what each subscription holds lives as long as the run, is copied by
 * every young-generation collection meanwhile and then promoted (see runs-fanout in bench/).
 */
class SocketTarget implements DirectTarget {
  private readonly prefix: Buffer;

  constructor(
    private readonly turns: DeliveryTurns,
    /** graphql-ws's open subscriptions of the connection, by id. */
    private readonly subscriptions: Record<string, unknown>,
    private readonly id: string,
    private readonly socket: WebSocket,
    private readonly tcp: Socket,
    private readonly fanout: TraceFanoutOptions,
  ) {
    this.prefix = nextPrefix(id);
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

/**
 * One event's result for one group of identical subscriptions: built once,
 * then read by each of them; `waiters` is set while it is being built.
 */
interface SharedResult {
  result: PreSerialized | null;
  failure: { error: unknown } | null;
  built: Promise<PreSerialized> | null;
  waiters: (() => void)[] | null;
}

/**
 * Events of one operation executed by graphql-js before it is compiled. A
 * compilation costs 1–5 ms, a graphql-js execution some 25 µs: an operation
 * is compiled once it has shown that it will pay (a run's trace has dozens of
 * steps), so a client sending many different documents that each see a few
 * events does not make the server compile them all.
 */
export const COMPILE_AFTER_EVENTS = 16;

/** One operation (document and operation name): events executed so far, then its compiled form (null: graphql-js executes it). */
interface Operation {
  executed: number;
  compiled: CompiledQuery | null | undefined;
}

/** Operations per schema and document (documents with the same text are one object, see document-cache), by operation name. */
const operations = new WeakMap<GraphQLSchema, WeakMap<DocumentNode, Map<string, Operation>>>();

function operationOf(args: ExecutionArgs): Operation {
  let perDocument = operations.get(args.schema);
  if (!perDocument) operations.set(args.schema, (perDocument = new WeakMap()));
  let perName = perDocument.get(args.document);
  if (!perName) perDocument.set(args.document, (perName = new Map()));
  const name = args.operationName ?? '';
  let operation = perName.get(name);
  if (!operation) perName.set(name, (operation = { executed: 0, compiled: undefined }));
  return operation;
}

function compile(args: ExecutionArgs): CompiledQuery | null {
  try {
    const built = compileQuery(args.schema, args.document, args.operationName ?? undefined);
    return isCompiledQuery(built) ? built : null;
  } catch {
    return null;
  }
}

const NO_VARIABLES: Record<string, unknown> = Object.freeze({});

/**
 * How one subscription's events are executed: by the operation compiled with
 * graphql-jit (the same resolvers, scalars and errors) once it has had
 * COMPILE_AFTER_EVENTS events and compiles, else by graphql-js. Custom field
 * or type resolvers in the arguments: graphql-js.
 */
class EventExecutor {
  /** Null: graphql-js executes every event. */
  private readonly operation: Operation | null;

  constructor(private readonly args: ExecutionArgs) {
    this.operation = args.fieldResolver || args.typeResolver || args.subscribeFieldResolver ? null : operationOf(args);
  }

  run(event: unknown): Result {
    const operation = this.operation;
    if (operation) {
      if (operation.compiled === undefined) {
        operation.executed += 1;
        if (operation.executed > COMPILE_AFTER_EVENTS) operation.compiled = compile(this.args);
      }
      if (operation.compiled) return operation.compiled.query(event, this.args.contextValue, this.args.variableValues ?? NO_VARIABLES) as Result;
    }
    return execute({ ...this.args, rootValue: event }) as Result;
  }
}

/**
 * Subscriptions that sent the same document, operation name and variables with the same context key:
 * they share each event's result. `audience` counts those that take live steps directly.
 */
interface Group {
  readonly key: string;
  members: number;
  audience: number;
}

/** What every subscription of one createSharedSubscribe shares: the groups and each event's results per group. */
class SharedResults {
  private readonly results = new WeakMap<object, Map<string, SharedResult>>();
  private readonly groups = new Map<string, Group>();
  // Documents are shared between operations with the same text (see document-cache): printed once each.
  private readonly printed = new WeakMap<DocumentNode, string>();

  constructor(private readonly options: SharedSubscribeOptions) {}

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
    const serialized = preSerialized(this.options.finish(result));
    const refused = this.options.refuse?.(serialized.json);
    return refused ? preSerialized(this.options.finish(refused)) : serialized;
  }

  private printOnce(document: DocumentNode): string {
    let text = this.printed.get(document);
    if (text === undefined) this.printed.set(document, (text = print(document)));
    return text;
  }
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

export function createSharedSubscribe(options: SharedSubscribeOptions, targetOf?: (args: ExecutionArgs) => DirectTarget | null) {
  const shared = new SharedResults(options);
  return async function subscribe(args: ExecutionArgs): Promise<AsyncIterable<ExecutionResult> | ExecutionResult> {
    const source = await createSourceEventStream(args);
    if (!isAsyncIterable(source)) return source;
    const live = isLiveTrace(source) ? source : null;
    const target = live ? (targetOf?.(args) ?? null) : null;
    const subscription = new SharedSubscription(shared, shared.join(args, target !== null), new EventExecutor(args), target);
    if (live && target) live.deliverLive((event) => subscription.take(event));
    return new MappedIterator(source[Symbol.asyncIterator](), subscription);
  };
}

function isLiveTrace(source: object): source is { deliverLive(deliver: (event: unknown) => boolean): void } {
  return typeof (source as { deliverLive?: unknown }).deliverLive === 'function';
}

function isPromiseLike<T>(value: T | PromiseLike<T>): value is PromiseLike<T> {
  return typeof (value as { then?: unknown } | null)?.then === 'function';
}

/** How a MappedIterator maps its source's values and learns of its end. */
interface Mapper<T, U> {
  map(value: T): U | Promise<U>;
  /** Awaited before the end is reported (null: nothing to wait for). */
  beforeEnd(): Promise<void> | null;
  /** Called once the iteration is over (its end, return(), or a failure that closes it); may be called again. */
  ended(): void;
}

/** Like graphql-js's internal mapAsyncIterator: return() reaches the source at once, even while it waits. */
class MappedIterator<T, U> implements AsyncIterableIterator<U> {
  constructor(
    private readonly iterator: AsyncIterator<T>,
    private readonly mapper: Mapper<T, U>,
  ) {}

  async next(): Promise<IteratorResult<U>> {
    const step = await this.iterator.next();
    if (step.done) {
      await this.mapper.beforeEnd();
      this.mapper.ended();
      return { value: undefined, done: true };
    }
    try {
      return { value: await this.mapper.map(step.value), done: false };
    } catch (error) {
      await this.close();
      throw error;
    }
  }

  async return(): Promise<IteratorResult<U>> {
    this.mapper.ended();
    await this.iterator.return?.();
    return { value: undefined, done: true };
  }

  async throw(error?: unknown): Promise<IteratorResult<U>> {
    if (this.iterator.throw) {
      const step = await this.iterator.throw(error);
      if (step.done) {
        this.mapper.ended();
        return { value: undefined, done: true };
      }
      return { value: await this.mapper.map(step.value), done: false };
    }
    await this.close();
    throw error;
  }

  [Symbol.asyncIterator](): AsyncIterableIterator<U> {
    return this;
  }

  private async close(): Promise<void> {
    this.mapper.ended();
    try {
      await this.iterator.return?.();
    } catch {
      // keep the original error
    }
  }
}

function isAsyncIterable(value: unknown): value is AsyncIterable<unknown> {
  return typeof value === 'object' && value !== null && Symbol.asyncIterator in value;
}


/**
 * Stands for a result in a graphql-ws message. Its JSON form is a marker that
 * is unique to this process (a random nonce) and to this result; the
 * transport replaces the quoted marker with the result's JSON, built once.
 * graphql-ws serialises a message and hands it to the transport in one
 * synchronous step, so a marker is registered only until that hand-over.
 */
const NONCE = crypto.randomBytes(12).toString('hex');
/** How a marker starts inside a serialised message (with its opening quote). */
const MARKER_PREFIX = `"pw-serialized-${NONCE}-`;
/** Markers serialised and not yet expanded; a safety bound, it holds one at a time. */
const PENDING_LIMIT = 1024;
const pending = new Map<string, string>();
let counter = 0;

class PreSerialized implements ExecutionResult {
  private encoded: Buffer | null = null;
  constructor(
    readonly result: ExecutionResult,
    readonly json: string,
  ) {}

  /** The JSON's UTF-8 bytes, encoded once for every frame that carries them. */
  get bytes(): Buffer {
    return (this.encoded ??= Buffer.from(this.json));
  }

  /** Kept for code that reads the result (graphql-ws's onNext hook). */
  get data() {
    return this.result.data;
  }

  get errors() {
    return this.result.errors;
  }

  toJSON(): string {
    if (pending.size >= PENDING_LIMIT) pending.clear();
    const marker = `pw-serialized-${NONCE}-${(counter += 1)}`;
    pending.set(marker, this.json);
    return marker;
  }
}

export function preSerialized(result: ExecutionResult): PreSerialized {
  return new PreSerialized(result, stringifyResponse(result));
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
    const json = pending.get(marker);
    if (json === undefined) throw new Error('A pre-serialised subscription result was not registered before it was sent');
    out += message.slice(from, start) + json;
    from = end + 1;
    start = message.indexOf(MARKER_PREFIX, from);
  }
  pending.clear();
  return out + message.slice(from);
}
