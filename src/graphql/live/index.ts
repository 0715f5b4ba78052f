/**
 * The live fan-out: how subscription events reach graphql-ws clients.
 *
 * `serveSubscriptions` serves GraphQL over graphql-ws on a `ws` server, built
 * on graphql-ws's own server (`makeServer`, with this folder as its transport
 * for `ws`, as graphql-ws's `useServer` is) and its `subscribe` hook. Its
 * parts, one file each:
 *
 * - live-source: the `LiveSource` interface, what a source of live events
 *   (a run's trace) offers the fan-out: its in-order live items handed to a
 *   synchronous deliverer. The fan-out knows nothing else of its sources.
 * - shared-subscribe: graphql-ws's `subscribe` hook. Subscriptions with the
 *   same document, operation name, variables and context key share each
 *   event's execution and JSON (shared-results); an event is executed by the
 *   operation's compiled form once it has had COMPILE_AFTER_EVENTS events
 *   (event-executor). A LiveSource's live items are taken directly and
 *   written to the subscription's socket (socket-target), with no
 *   per-subscriber async chain and no scheduling hop.
 * - pre-serialized: a result's JSON built once, carried into graphql-ws's
 *   messages as a marker that the transport replaces before writing.
 * - delivery-turns: frames written in turns, a bounded number per event-loop
 *   turn over all sockets, a socket's waiting frames in one write; frames
 *   (frames) are written to the TCP socket as they are.
 * - inbound-turns: incoming messages started a few per turn over all
 *   connections, so that a burst from one client never stalls the others.
 *
 * Every piece of state (groups, compiled operations, markers, frame prefixes,
 * turns) belongs to one `serveSubscriptions` call; nothing is module-global.
 * Every message of every subscription goes through the same line, so the
 * order of one subscription's messages is kept.
 */
import type { IncomingMessage } from 'node:http';
import type { ExecutionArgs } from 'graphql';
import { CloseCode, handleProtocols, makeServer, type FormattedExecutionResult, type ServerOptions } from 'graphql-ws';
import type { WebSocket, WebSocketServer } from 'ws';
import { stringifyResponse } from '../raw-json';
import { DeliveryTurns, FRAMES_PER_TURN } from './delivery-turns';
import { textFrame, NextPrefixes } from './frames';
import { InboundTurns } from './inbound-turns';
import { isPreSerialized, PreSerialized, PreSerializedMarkers } from './pre-serialized';
import { createSharedSubscribe, type SharedSubscribeOptions } from './shared-subscribe';
import { type DirectTarget, SocketTarget } from './socket-target';

export type { LiveSource } from './live-source';
export type { SharedSubscribeOptions } from './shared-subscribe';

/** What graphql-ws hands to its hooks as `ctx.extra` for a ws connection. */
export interface SocketExtra {
  readonly socket: WebSocket;
  readonly request: IncomingMessage;
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
 * validate, …) except `subscribe`, which this folder provides; results are
 * passed through `fanout.finish` unless `options.onNext` returns its own.
 */
export function serveSubscriptions<P extends Record<PropertyKey, unknown>, E extends Record<PropertyKey, unknown>>(
  options: Omit<ServerOptions<P, SocketExtra & Partial<E>>, 'subscribe'>,
  wsServer: WebSocketServer,
  fanout: TraceFanoutOptions,
): { dispose(): Promise<void> } {
  // Everything the server's subscriptions share lives here, one set per server: nothing is module-global.
  const turns = new DeliveryTurns(fanout.framesPerTurn ?? FRAMES_PER_TURN);
  const inbound = new InboundTurns({ messagesPerTurn: fanout.messagesPerTurn });
  const markers = new PreSerializedMarkers();
  const prefixes = new NextPrefixes();
  const keepAliveMs = fanout.keepAliveMs ?? 12_000;
  // Live steps are written as graphql-ws would write them, so only when no hook of its own changes a `next` message.
  const direct = !options.onNext && !options.jsonMessageReplacer;
  const targets = new WeakMap<ExecutionArgs, DirectTarget>();
  const server = makeServer<P, SocketExtra & Partial<E>>({
    ...options,
    // graphql-ws calls this with the execution arguments it then subscribes with: they name the subscription's socket and id.
    context: async (ctx, id, payload, args) => {
      const value = typeof options.context === 'function' ? await options.context(ctx, id, payload, args) : options.context;
      if (direct) targets.set(args, new SocketTarget(turns, ctx.subscriptions, id, ctx.extra.socket, ctx.extra.request.socket, fanout, prefixes));
      return value;
    },
    subscribe: createSharedSubscribe(fanout, markers, (args) => targets.get(args) ?? null),
    onNext: async (ctx, id, payload, args, result) => {
      const own = await options.onNext?.(ctx, id, payload, args, result);
      if (own) return own;
      // A shared result is finished and checked already; its marker becomes its JSON in send().
      if (isPreSerialized(result)) return result as FormattedExecutionResult;
      const stopped = fanout.refuseResult?.(result, args);
      if (stopped) return markers.preSerialized(fanout.finish(stopped)) as unknown as FormattedExecutionResult;
      // Any other result is serialised here too, so that RawJson values keep their exact text.
      const json = stringifyResponse(result);
      const refused = fanout.refuse?.(json);
      if (!refused && !result.errors?.length) return new PreSerialized(result, json, markers) as unknown as FormattedExecutionResult;
      return markers.preSerialized(fanout.finish(refused ?? result)) as unknown as FormattedExecutionResult;
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
        send: (data) => turns.send(socket, tcp, textFrame(markers.expand(data))),
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
