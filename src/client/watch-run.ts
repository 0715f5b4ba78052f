/**
 * watchRun: a run's trace as an async iterable of steps, for front ends.
 *
 * What must stay true: every step after `afterSequence` is yielded exactly
 * once, in sequence order, and the iteration ends after the END step. A
 * dropped connection, a subscription the server ended early, and a
 * `SUBSCRIBER_LAGGED` answer all lead to the same thing: a new connection
 * that subscribes from the last sequence yielded. The server replays stored
 * steps after that sequence before streaming live ones, so nothing is
 * missed, and a step at or below it is skipped, so nothing is repeated.
 *
 * Stored steps are read first over HTTP, a page of `replayPageSize` per
 * request, and the subscription starts after the last of them: a run of
 * thousands of steps opens in a few requests instead of one WebSocket
 * message per step. When HTTP fails for any reason but a refusal, the
 * subscription replays instead; either way the caller sees the same steps.
 *
 * With `messagesSent: false` the steps come without `messagesSent`
 * (RunStepSummaryFields; REQUEST steps have `messageCount`): each REQUEST
 * step repeats the whole transcript so far, so a long trace is mostly that.
 * A step's messages are then read when needed, with RunStepMessagesDocument.
 *
 * Runs in browsers (the global WebSocket) and in Node (pass `webSocketImpl`
 * from the `ws` package on Node 20).
 */
import { createClient, type Client } from 'graphql-ws';
import {
  RunStepSummariesDocument,
  RunStepsDocument,
  RunTraceDocument,
  RunTraceSummariesDocument,
  type RunStepFieldsFragment,
  type RunStepSummaryFieldsFragment,
} from './generated/graphql';

/** A step with every field (RunStepFields): what watchRun yields by default. */
export type RunStep = RunStepFieldsFragment;
/** A step without `messagesSent` (RunStepSummaryFields): what watchRun yields with `messagesSent: false`. */
export type RunStepSummary = RunStepSummaryFieldsFragment;

export interface WatchRunOptions {
  /** The graphql-ws address, `ws://host:port/graphql`; an `http(s)://` URL is converted. */
  url: string;
  /** An API token of any role; sent as `connectionParams.authorization`. */
  token: string;
  runId: string;
  /** Yield only steps after this sequence (default 0: the whole trace). */
  afterSequence?: number;
  /** A WebSocket constructor where there is no global one (Node 20: `require('ws')`). */
  webSocketImpl?: unknown;
  /** Stops watching: the iteration ends without an error. */
  signal?: AbortSignal;
  /** Called before each reconnection, with the sequence it resumes after and why. */
  onReconnect?: (event: { afterSequence: number; reason: string; attempt: number }) => void;
  /** Longest wait between two reconnection attempts, in ms (default 5000; the first waits 100). */
  maxRetryDelayMs?: number;
  /** Give up after this many reconnections in a row without a new step (default: never). */
  maxRetries?: number;
  /** Read stored steps over HTTP before subscribing (default: true where `fetch` exists). */
  replayOverHttp?: boolean;
  /** Steps per HTTP request of that replay (default 200, at most 500). */
  replayPageSize?: number;
  /**
   * false: yield RunStepSummary steps, without `messagesSent` (REQUEST steps say how many in
   * `messageCount`); a long run's trace is then a fraction of the bytes. Default true: RunStep.
   */
  messagesSent?: boolean;
}

/** The server refused to watch the run (unknown run, bad token, …); retrying would not help. */
export class WatchRunError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message);
    this.name = 'WatchRunError';
  }
}

/** `http://host/graphql` → `ws://host/graphql`; ws(s) URLs are kept. */
export function toWebSocketUrl(url: string): string {
  return url.replace(/^http(s?):\/\//i, (_match, secure: string) => `ws${secure}://`);
}

/** `ws://host/graphql` → `http://host/graphql`; http(s) URLs are kept. */
export function toHttpUrl(url: string): string {
  return url.replace(/^ws(s?):\/\//i, (_match, secure: string) => `http${secure}://`);
}

interface GraphQLErrorShape {
  message: string;
  extensions?: { code?: unknown };
}

/** How long one page of the HTTP replay may take before the subscription replays instead. */
const REPLAY_TIMEOUT_MS = 10_000;

/** Codes of a GraphQL answer that no retry and no other transport would change. */
const REFUSAL_CODES = new Set(['UNAUTHENTICATED', 'FORBIDDEN', 'NOT_FOUND', 'BAD_USER_INPUT']);

/** A close the client cannot recover from by reconnecting: the server refused the token or the protocol. */
const FATAL_CLOSE_CODES = new Set([4400, 4401, 4403, 4406, 4409]);

/** The outcome of one subscription attempt. */
type AttemptEnd = { kind: 'finished' } | { kind: 'retry'; reason: string };

/** The documents one watcher reads its steps with. */
interface StepDocuments {
  page: { toString(): string };
  trace: { toString(): string };
}

const FULL_DOCUMENTS: StepDocuments = { page: RunStepsDocument, trace: RunTraceDocument };
const SUMMARY_DOCUMENTS: StepDocuments = { page: RunStepSummariesDocument, trace: RunTraceSummariesDocument };

/** What every step has, whichever fields were asked for (a RunStep is also one). */
type AnyStep = RunStepSummary;

export function watchRun(options: WatchRunOptions & { messagesSent: false }): AsyncIterable<RunStepSummary>;
export function watchRun(options: WatchRunOptions & { messagesSent?: true }): AsyncIterable<RunStep>;
export function watchRun(options: WatchRunOptions): AsyncIterable<RunStep | RunStepSummary>;
export function watchRun(options: WatchRunOptions): AsyncIterable<RunStep | RunStepSummary> {
  const documents = options.messagesSent === false ? SUMMARY_DOCUMENTS : FULL_DOCUMENTS;
  return {
    [Symbol.asyncIterator]: () => watch(options, documents)[Symbol.asyncIterator](),
  };
}

async function* watch(options: WatchRunOptions, documents: StepDocuments): AsyncGenerator<AnyStep, void, undefined> {
  const url = toWebSocketUrl(options.url);
  let last = options.afterSequence ?? 0;
  let failures = 0;
  const maxDelay = options.maxRetryDelayMs ?? 5000;
  const maxRetries = options.maxRetries ?? Number.POSITIVE_INFINITY;

  if (options.replayOverHttp ?? typeof fetch === 'function') {
    const pageSize = Math.min(500, Math.max(1, Math.floor(options.replayPageSize ?? 200)));
    const ended = yield* replayStored(options, documents, pageSize, () => last, (sequence) => (last = sequence));
    if (ended) return;
  }

  while (!options.signal?.aborted) {
    const client = createClient({
      url,
      lazy: true,
      // Kept open a moment after the server completes the trace, so that releasing the
      // finished subscription never writes to a closing socket.
      lazyCloseTimeout: 1000,
      retryAttempts: 0,
      connectionParams: { authorization: `Bearer ${options.token}` },
      ...(options.webSocketImpl !== undefined ? { webSocketImpl: options.webSocketImpl } : {}),
    });
    const onAbort = () => void client.dispose();
    options.signal?.addEventListener('abort', onAbort, { once: true });
    let end: AttemptEnd;
    const before = last;
    try {
      end = yield* subscribeOnce(client, documents, options.runId, () => last, (sequence) => (last = sequence));
    } finally {
      options.signal?.removeEventListener('abort', onAbort);
      await client.dispose();
    }
    if (end.kind === 'finished' || options.signal?.aborted) return;
    failures = last > before ? 1 : failures + 1;
    if (failures > maxRetries) throw new WatchRunError(`Gave up watching run ${options.runId} after ${maxRetries} reconnections: ${end.reason}`, null);
    options.onReconnect?.({ afterSequence: last, reason: end.reason, attempt: failures });
    await delay(Math.min(maxDelay, 100 * 2 ** (failures - 1)), options.signal);
  }
}

/** One page of the HTTP replay: its steps, a refusal to report, or nothing usable (the subscription takes over). */
type PageResult = { kind: 'steps'; steps: AnyStep[] } | { kind: 'refused'; errors: GraphQLErrorShape[] } | { kind: 'unusable' };

/** Pages requested ahead of the one being yielded, once a first full page shows the run is long. */
const REPLAY_PIPELINE = 3;

/**
 * Yields the stored steps after the last yielded one, page by page over HTTP.
 * Sequences have no gaps, so the page after a full one starts a page size
 * further on: after a first full page, the next pages are requested ahead
 * (REPLAY_PIPELINE at a time) while earlier ones are yielded. Returns true
 * once END was yielded, false when the subscription should go on from
 * there (the stored steps are exhausted, or HTTP failed).
 */
async function* replayStored(
  options: WatchRunOptions,
  documents: StepDocuments,
  pageSize: number,
  last: () => number,
  advance: (sequence: number) => void,
): AsyncGenerator<AnyStep, boolean, undefined> {
  const replay = new AbortController();
  const stop = () => replay.abort();
  options.signal?.addEventListener('abort', stop, { once: true });
  const inFlight: Promise<PageResult>[] = [];
  let nextAfter = last();
  const request = () => {
    inFlight.push(fetchPage(options, documents, nextAfter, pageSize, replay.signal));
    nextAfter += pageSize;
  };
  try {
    request();
    for (;;) {
      const result = await inFlight.shift()!;
      if (options.signal?.aborted) return true;
      if (result.kind === 'refused') throw refusal(result.errors);
      if (result.kind === 'unusable') return false;
      const { steps } = result;
      if (steps.length === pageSize) while (inFlight.length < REPLAY_PIPELINE) request();
      for (const step of steps) {
        if (step.sequence <= last()) continue;
        if (step.sequence !== last() + 1) return false;
        advance(step.sequence);
        yield step;
        if (step.kind === 'END') return true;
      }
      if (steps.length < pageSize) return false;
    }
  } finally {
    options.signal?.removeEventListener('abort', stop);
    // Pages requested ahead and no longer wanted are abandoned (fetchPage never rejects).
    replay.abort();
  }
}

/** One page of stored steps over HTTP; never rejects. */
async function fetchPage(options: WatchRunOptions, documents: StepDocuments, afterSequence: number, limit: number, replay: AbortSignal): Promise<PageResult> {
  // A page that does not come within REPLAY_TIMEOUT_MS is left to the subscription.
  const attempt = new AbortController();
  const stop = () => attempt.abort();
  const timer = setTimeout(stop, REPLAY_TIMEOUT_MS);
  replay.addEventListener('abort', stop, { once: true });
  try {
    const response = await fetch(toHttpUrl(options.url), {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', authorization: `Bearer ${options.token}` },
      body: JSON.stringify({ query: documents.page.toString(), variables: { id: options.runId, afterSequence, limit } }),
      signal: attempt.signal,
    });
    const body = (await response.json()) as { data?: { run?: { steps?: AnyStep[] | null } | null } | null; errors?: GraphQLErrorShape[] };
    const errors = body.errors ?? [];
    if (errors.some((error) => typeof error.extensions?.code === 'string' && REFUSAL_CODES.has(error.extensions.code))) return { kind: 'refused', errors };
    const steps = body.data?.run?.steps;
    return errors.length > 0 || !steps ? { kind: 'unusable' } : { kind: 'steps', steps };
  } catch {
    return { kind: 'unusable' };
  } finally {
    clearTimeout(timer);
    replay.removeEventListener('abort', stop);
  }
}

async function* subscribeOnce(
  client: Client,
  documents: StepDocuments,
  runId: string,
  last: () => number,
  advance: (sequence: number) => void,
): AsyncGenerator<AnyStep, AttemptEnd, undefined> {
  const iterator = client.iterate<{ runTrace: AnyStep }>({ query: documents.trace.toString(), variables: { runId, afterSequence: last() } });
  try {
    for await (const result of iterator) {
      const errors = (result.errors ?? []) as readonly GraphQLErrorShape[];
      if (errors.length > 0) {
        const lagged = errors.find((error) => error.extensions?.code === 'SUBSCRIBER_LAGGED');
        if (lagged) return { kind: 'retry', reason: 'SUBSCRIBER_LAGGED' };
        throw refusal(errors);
      }
      const step = result.data?.runTrace;
      if (!step) continue;
      // A replayed step already yielded is skipped; a step past a hole means the stream is not the
      // one this watcher asked for, so it starts again from what it has.
      if (step.sequence <= last()) continue;
      if (step.sequence !== last() + 1) return { kind: 'retry', reason: `expected step ${last() + 1}, got ${step.sequence}` };
      advance(step.sequence);
      yield step;
      if (step.kind === 'END') return { kind: 'finished' };
    }
    return { kind: 'retry', reason: 'the server ended the subscription before the END step' };
  } catch (error) {
    if (error instanceof WatchRunError) throw error;
    if (Array.isArray(error)) throw refusal(error as GraphQLErrorShape[]);
    const code = closeCode(error);
    if (code !== null && FATAL_CLOSE_CODES.has(code)) {
      throw new WatchRunError(code === 4403 ? 'The server refused the token (closed with 4403 Forbidden).' : `The server closed the connection with ${code}.`, String(code));
    }
    return { kind: 'retry', reason: code !== null ? `connection closed (${code})` : error instanceof Error ? error.message : 'connection failed' };
  }
}

function refusal(errors: readonly GraphQLErrorShape[]): WatchRunError {
  const first = errors[0];
  const code = typeof first?.extensions?.code === 'string' ? first.extensions.code : null;
  return new WatchRunError(errors.map((error) => error.message).join('; ') || 'The server refused the subscription.', code);
}

function closeCode(error: unknown): number | null {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof (error as { code: unknown }).code === 'number') return (error as { code: number }).code;
  return null;
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
