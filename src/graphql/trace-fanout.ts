/**
 * Trace fan-out: how live subscription events reach graphql-ws clients.
 *
 * One module owns the whole path from an event to the socket, built on
 * graphql-ws's own server (`makeServer`, with this module as its transport for
 * `ws`, as graphql-ws's `useServer` is) and its `subscribe` / `onNext` hooks:
 *
 * 1. Shared execution and serialisation (`createSharedSubscribe`). graphql-js
 *    maps every event of every subscriber through its own `execute`; here
 *    subscribers that sent the same document, operation name and variables,
 *    with the same `contextKey` (the caller's role), share one execution and
 *    one JSON serialisation of each event object (a WeakMap keyed by the
 *    event). Events that are not shared objects (a replay read from the table
 *    for one subscriber, a lag error) are executed as before. The shared JSON
 *    reaches the outgoing message through a marker (`preSerialized`), which
 *    this module's transport replaces before writing.
 *
 * 2. Delivery in turns (`DeliveryTurns`). A run publishes its steps in
 *    bursts, and with 1,000 watchers a burst is thousands of messages. Writing
 *    them all inside one event-loop turn made the run's next provider answer
 *    wait behind the fan-out of the previous burst (tens of milliseconds), and
 *    one write per message cost most of the CPU. So:
 *    - a socket that starts writing is corked until its subscriber's chain of
 *      work settles: the messages it has ready (a burst, up to
 *      `MESSAGES_PER_SOCKET`) leave in one write; the rest of a longer backlog
 *      waits behind the other sockets, so every step reaches all subscribers
 *      about as evenly as when each is written on its own;
 *    - at most `SOCKETS_PER_TURN` sockets start writing in one turn; the
 *      others wait, in arrival order, for the next turn — timers and I/O (the
 *      provider's answer, the database) run in between, so the loop never
 *      waits behind more than one slice of the fan-out;
 *    - a sender goes on at once while little is buffered for its socket, and
 *      waits for the write once `HELD_BYTES_LIMIT` is: a slow reader holds
 *      back only its own subscription, whose bounded queue then reports lag.
 *
 * Every message of every subscription goes through the same path, so the
 * order of one subscription's messages is kept.
 */
import type { IncomingMessage } from 'node:http';
import type { Socket } from 'node:net';
import crypto from 'node:crypto';
import { createSourceEventStream, type DocumentNode, execute, print, type ExecutionArgs, type ExecutionResult } from 'graphql';
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
}

export interface TraceFanoutOptions extends SharedSubscribeOptions {
  /** Server pings every this many ms; a client that does not answer within as long is dropped (0: off). */
  keepAliveMs?: number;
  /** Sockets that may start writing in one event-loop turn (the rest wait for the next). */
  socketsPerTurn?: number;
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
  const turns = new DeliveryTurns(fanout.socketsPerTurn ?? SOCKETS_PER_TURN);
  const inbound = new InboundTurns({ messagesPerTurn: fanout.messagesPerTurn });
  const keepAliveMs = fanout.keepAliveMs ?? 12_000;
  const server = makeServer<P, SocketExtra & Partial<E>>({
    ...options,
    subscribe: createSharedSubscribe(fanout),
    onNext: async (ctx, id, payload, args, result) => {
      const own = await options.onNext?.(ctx, id, payload, args, result);
      if (own) return own;
      // A shared result is finished and checked already; its marker becomes its JSON in send().
      if (isPreSerialized(result)) return result as FormattedExecutionResult;
      // Any other result is serialised here too, so that RawJson values keep their exact text.
      const json = stringifyResponse(result);
      const refused = fanout.refuse?.(json);
      if (!refused && !result.errors?.length) return new PreSerialized(result, json) as unknown as FormattedExecutionResult;
      return preSerialized(fanout.finish(refused ?? result)) as unknown as FormattedExecutionResult;
    },
  });
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
        send: (data) => turns.send(socket, tcp, expandPreSerialized(data)),
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
 * Sockets that may start writing in one event-loop turn (see DeliveryTurns):
 * a subscriber's burst costs some 20–60 µs, so a turn's share of the fan-out
 * stays within a few milliseconds. A count, not a clock: on a busy machine a
 * clock budget mistook time spent descheduled for work and slowed to one
 * socket per turn.
 */
const SOCKETS_PER_TURN = 48;
/**
 * Messages a socket writes before it goes to the back of the line: a burst
 * (a round's three or four steps) leaves in one write, while a subscriber
 * with a longer backlog does not keep a step from the others for longer.
 */
const MESSAGES_PER_SOCKET = 4;
/** Bytes a socket may have waiting before its sender waits for them to be written. */
export const HELD_BYTES_LIMIT = 64 * 1024;

/**
 * Writes messages to WebSockets in turns (see the module comment). `send()`
 * resolves when the sender may send its next message.
 */
export class DeliveryTurns {
  /** Sockets corked in the current chain of work, with the messages written to each; uncorked once it settles. */
  private readonly writing = new Map<Socket, number>();
  /** Senders waiting for a later turn, in arrival order. */
  private readonly waiting: (() => void)[] = [];
  /** Sockets that wrote their share in an earlier turn and have more: after every waiting sender. */
  private readonly continuing: (() => void)[] = [];
  private turnOpen = false;
  private startedThisTurn = 0;
  private flushQueued = false;

  constructor(
    private readonly socketsPerTurn: number,
    private readonly messagesPerSocket = MESSAGES_PER_SOCKET,
  ) {}

  send(socket: WebSocket, tcp: Socket, data: string): Promise<void> {
    const written = this.writing.get(tcp);
    if (written !== undefined && written < this.messagesPerSocket) {
      this.writing.set(tcp, written + 1);
      return write(socket, tcp, data);
    }
    if (written === undefined && this.waiting.length === 0 && this.hasRoom()) {
      this.start(tcp);
      return write(socket, tcp, data);
    }
    const line = written === undefined ? this.waiting : this.continuing;
    if (!this.turnOpen) this.openTurn();
    return new Promise((resolve, reject) => {
      line.push(() => {
        this.start(tcp);
        write(socket, tcp, data).then(resolve, reject);
      });
    });
  }

  /** Senders waiting for a later turn. */
  get waitingCount(): number {
    return this.waiting.length + this.continuing.length;
  }

  private hasRoom(): boolean {
    if (!this.turnOpen) this.openTurn();
    return this.startedThisTurn < this.socketsPerTurn;
  }

  private openTurn(): void {
    this.turnOpen = true;
    this.startedThisTurn = 0;
    // Immediates queued now run in the next turn of the event loop, after its timers and I/O.
    setImmediate(this.nextTurn);
  }

  private readonly nextTurn = (): void => {
    this.turnOpen = false;
    if (this.waiting.length === 0 && this.continuing.length === 0) return;
    this.openTurn();
    const first = this.waiting.splice(0, this.socketsPerTurn);
    const more = this.continuing.splice(0, this.socketsPerTurn - first.length);
    for (const wake of first) wake();
    for (const wake of more) wake();
  };

  private start(tcp: Socket): void {
    this.startedThisTurn += 1;
    if (tcp.destroyed) return;
    if (!this.writing.has(tcp)) tcp.cork();
    this.writing.set(tcp, 1);
    if (!this.flushQueued) {
      this.flushQueued = true;
      // A tick queued from a microtask runs once every microtask queued so far, and
      // every one they queue, has run: the subscribers' bursts are written by then.
      queueMicrotask(this.queueFlush);
    }
  }

  private readonly queueFlush = (): void => process.nextTick(this.flush);

  private readonly flush = (): void => {
    this.flushQueued = false;
    for (const tcp of this.writing.keys()) tcp.uncork();
    this.writing.clear();
  };
}

const RESOLVED = Promise.resolve();

function write(socket: WebSocket, tcp: Socket, data: string): Promise<void> {
  if (socket.readyState !== socket.OPEN) return RESOLVED;
  if (tcp.writableLength < HELD_BYTES_LIMIT) {
    socket.send(data);
    return RESOLVED;
  }
  return new Promise((resolve, reject) => socket.send(data, (error) => (error ? reject(error) : resolve())));
}

export function createSharedSubscribe(options: SharedSubscribeOptions) {
  const results = new WeakMap<object, Map<string, Promise<ExecutionResult>>>();
  // Documents are shared between operations with the same text (see document-cache): printed once each.
  const printed = new WeakMap<DocumentNode, string>();
  const printOnce = (document: DocumentNode) => {
    let text = printed.get(document);
    if (text === undefined) printed.set(document, (text = print(document)));
    return text;
  };
  return async function subscribe(args: ExecutionArgs): Promise<AsyncIterable<ExecutionResult> | ExecutionResult> {
    const source = await createSourceEventStream(args);
    if (!isAsyncIterable(source)) return source;
    const key = JSON.stringify([printOnce(args.document), args.operationName ?? null, args.variableValues ?? null, options.contextKey(args.contextValue)]);
    return mapAsyncIterator(source, (event: unknown): Result => {
      if (typeof event !== 'object' || event === null) return execute({ ...args, rootValue: event }) as Result;
      let perEvent = results.get(event);
      if (!perEvent) results.set(event, (perEvent = new Map()));
      let shared = perEvent.get(key);
      if (!shared) {
        shared = Promise.resolve(execute({ ...args, rootValue: event }) as Result).then((result) => {
          const finished = preSerialized(options.finish(result));
          const refused = options.refuse?.(finished.json);
          return refused ? preSerialized(options.finish(refused)) : finished;
        });
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
    if (pending.size >= PENDING_LIMIT) pending.clear();
    pending.set(this.marker, this.json);
    return this.marker;
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
