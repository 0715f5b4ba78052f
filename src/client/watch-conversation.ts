/**
 * watchConversation: a conversation's stored messages, and its state, as an
 * async iterable, for chat front ends.
 *
 * What must stay true: every message after `afterSequence` is yielded
 * exactly once, in sequence order, as soon as it is stored. The stored
 * messages are the authority: each change the server announces
 * (`conversationUpdated`) is answered by reading the messages after the
 * last one yielded over HTTP, so a missed announcement or a dropped
 * connection loses nothing — after a reconnection the next read brings
 * every message stored meanwhile. The iteration ends when the conversation
 * is deleted, or when `signal` aborts.
 *
 * Runs in browsers (the global WebSocket) and in Node (pass `webSocketImpl`
 * from the `ws` package on Node 20).
 */
import { createClient, type Client } from 'graphql-ws';
import { ConversationDocument, ConversationUpdatedDocument, type ConversationFieldsFragment, type ConversationMessageFieldsFragment, type ConversationQuery } from './generated/graphql';
import { toHttpUrl, toWebSocketUrl } from './watch-run';

export type ConversationMessage = ConversationMessageFieldsFragment;
export type ConversationState = ConversationFieldsFragment;

/** A message stored after the last one yielded, or the conversation's state when it changed (`activeRunId`: the turn under way). */
export type ConversationEvent = { kind: 'message'; message: ConversationMessage } | { kind: 'state'; conversation: ConversationState };

export interface WatchConversationOptions {
  /** The GraphQL address, `http(s)://host:port/graphql` or `ws(s)://…`. */
  url: string;
  /** An API token that may see the conversation. */
  token: string;
  conversationId: string;
  /** Yield only messages after this sequence (default -1: all of them). */
  afterSequence?: number;
  /** A WebSocket constructor where there is no global one (Node 20: `require('ws')`). */
  webSocketImpl?: unknown;
  /** Stops watching: the iteration ends without an error. */
  signal?: AbortSignal;
  /** Called before each reconnection, with why. */
  onReconnect?: (event: { reason: string; attempt: number }) => void;
  /** Longest wait between two reconnection attempts, in ms (default 5000; the first waits 100). */
  maxRetryDelayMs?: number;
}

/** The server refused (unknown or foreign conversation, bad token); retrying would not help. */
export class WatchConversationError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message);
    this.name = 'WatchConversationError';
  }
}

interface GraphQLErrorShape {
  message: string;
  extensions?: { code?: unknown };
}

/** Messages read per request. */
const PAGE = 500;
const FATAL_CLOSE_CODES = new Set([4400, 4401, 4403, 4406, 4409]);

export function watchConversation(options: WatchConversationOptions): AsyncIterable<ConversationEvent> {
  return { [Symbol.asyncIterator]: () => watch(options)[Symbol.asyncIterator]() };
}

async function* watch(options: WatchConversationOptions): AsyncGenerator<ConversationEvent, void, undefined> {
  let last = options.afterSequence ?? -1;
  let failures = 0;
  while (!options.signal?.aborted) {
    const client = createClient({
      url: toWebSocketUrl(options.url),
      lazy: true,
      lazyCloseTimeout: 1000,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${options.token}` },
      ...(options.webSocketImpl !== undefined ? { webSocketImpl: options.webSocketImpl } : {}),
    });
    const onAbort = () => void client.dispose();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    let end: { kind: 'deleted' } | { kind: 'retry'; reason: string; progressed: boolean };
    try {
      end = yield* followOnce(client, options, () => last, (sequence) => (last = sequence));
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      await client.dispose();
    }
    if (end.kind === 'deleted' || options.signal?.aborted) return;
    failures = end.progressed ? 1 : failures + 1;
    options.onReconnect?.({ reason: end.reason, attempt: failures });
    await delay(Math.min(options.maxRetryDelayMs ?? 5000, 100 * 2 ** (failures - 1)), options.signal);
  }
}

/** One subscription: every announcement reads the messages after the last yielded. */
async function* followOnce(
  client: Client,
  options: WatchConversationOptions,
  last: () => number,
  advance: (sequence: number) => void,
): AsyncGenerator<ConversationEvent, { kind: 'deleted' } | { kind: 'retry'; reason: string; progressed: boolean }, undefined> {
  let progressed = false;
  const iterator = client.iterate<{ conversationUpdated: ConversationState }>({ query: ConversationUpdatedDocument.toString(), variables: { id: options.conversationId } });
  try {
    for await (const result of iterator) {
      const errors = (result.errors ?? []) as readonly GraphQLErrorShape[];
      if (errors.length > 0) throw refusal(errors);
      const state = result.data?.conversationUpdated;
      if (!state) continue;
      for (;;) {
        const page = await readMessages(options, last());
        if (page === null) return { kind: 'deleted' };
        for (const message of page) {
          if (message.sequence <= last()) continue;
          advance(message.sequence);
          progressed = true;
          yield { kind: 'message', message };
        }
        if (page.length < PAGE) break;
      }
      yield { kind: 'state', conversation: state };
    }
    // The server ends the subscription when the conversation is deleted.
    return (await readMessages(options, last())) === null ? { kind: 'deleted' } : { kind: 'retry', reason: 'the server ended the subscription', progressed };
  } catch (error) {
    if (error instanceof WatchConversationError) throw error;
    if (Array.isArray(error)) throw refusal(error as GraphQLErrorShape[]);
    const code = typeof error === 'object' && error !== null && typeof (error as { code?: unknown }).code === 'number' ? (error as { code: number }).code : null;
    if (code !== null && FATAL_CLOSE_CODES.has(code)) throw new WatchConversationError(`The server closed the connection with ${code}.`, String(code));
    return { kind: 'retry', reason: code !== null ? `connection closed (${code})` : error instanceof Error ? error.message : 'connection failed', progressed };
  }
}

/** The messages after `afterSequence` (one page); null when the conversation is gone. */
async function readMessages(options: WatchConversationOptions, afterSequence: number): Promise<ConversationMessage[] | null> {
  const response = await fetch(toHttpUrl(options.url), {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${options.token}` },
    body: JSON.stringify({ query: ConversationDocument.toString(), variables: { id: options.conversationId, afterSequence, first: PAGE } }),
    signal: options.signal,
  });
  const body = (await response.json()) as { data?: ConversationQuery | null; errors?: GraphQLErrorShape[] };
  if (body.errors?.length) throw refusal(body.errors);
  return body.data?.conversation?.messages ?? null;
}

function refusal(errors: readonly GraphQLErrorShape[]): WatchConversationError {
  const code = typeof errors[0]?.extensions?.code === 'string' ? errors[0].extensions.code : null;
  return new WatchConversationError(errors.map((error) => error.message).join('; ') || 'The server refused.', code);
}

function delay(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(done, ms);
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener('abort', done);
      resolve();
    }
    signal?.addEventListener('abort', done, { once: true });
  });
}
