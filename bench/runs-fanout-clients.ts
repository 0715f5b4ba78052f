/**
 * The client side of runs-fanout, in its own process so that the server's
 * memory can be measured without the clients in it: CLIENTS graphql-ws
 * clients (each its own socket to 127.0.0.1; lean protocol clients, or the
 * graphql-ws client library with FANOUT_CLIENT=library), opened in batches of BATCH,
 * each subscribed to runTrace of the runs in RUN_IDS, one after the other (a
 * warm-up run, then the measured one), over the same sockets. Every received
 * step is timestamped (epoch ms, sub-millisecond) when its socket is read
 * (the lean clients parse it after every socket ready in that turn has been
 * read; see `receive`) and reported to the parent over IPC.
 *
 * Protocol (process.send / process.on('message')):
 *   parent → child  { type: 'clock', id }         child → parent { type: 'clock', id, t }
 *   child → parent  { type: 'ready', run, ready, failed, openMs }   every client got run's replay up to READY_SEQUENCE
 *   child → parent  { type: 'done', run, received, completed, errors, clientCpuMs }   all clients completed run, or DONE_TIMEOUT_MS passed
 *   parent → child  { type: 'go' }                after 'done': subscribe to the next run (not before the server's CPU is read)
 *   parent → child  { type: 'exit' }
 * Not meant to be started by hand.
 */
import { performance } from 'node:perf_hooks';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';

/** As runs-support's epochMs; not imported from there, so this process does not load the server. */
const epochMs = (): number => performance.timeOrigin + performance.now();

const url = process.env.WS_URL ?? '';
const token = process.env.TOKEN ?? '';
const runIds = (process.env.RUN_IDS ?? '').split(',').filter(Boolean);
const clientCount = Number(process.env.CLIENTS ?? 1000);
const batchSize = Number(process.env.BATCH ?? 50);
const readySequence = Number(process.env.READY_SEQUENCE ?? 1);
const BATCH_TIMEOUT_MS = 30_000;
const DONE_TIMEOUT_MS = Number(process.env.DONE_TIMEOUT_MS ?? 120_000);

const TRACE = `subscription($runId: ID!) {
  runTrace(runId: $runId) { sequence kind round durationMs status terminationReason content finishReason totalTokens toolName toolResult toolIsError }
}`;

interface Watcher {
  subscribe(runId: string): void;
  close(): void;
  /** Flat [sequence, receivedAt, sequence, receivedAt, …]. */
  received: number[];
  lastSequence: number;
  completed: boolean;
  error: string | null;
  onProgress: (() => void) | null;
}

function send(message: unknown): void {
  process.send?.(message);
}

if (!url.startsWith('ws://127.0.0.1:')) {
  console.error(`runs-fanout-clients: only ws://127.0.0.1 is allowed, got "${url}"`);
  process.exit(2);
}

const watchers: Watcher[] = [];

/** Messages read but not yet parsed: [handler, data, receivedAt] triples, in the order they were read. */
const inbox: unknown[] = [];
let inboxQueued = false;
const NO_DATA = Buffer.alloc(0);

/**
 * A message is timestamped when its socket is read and parsed afterwards: once
 * every socket that was ready in this event-loop turn has been read
 * (setImmediate runs after the turn's I/O). The subscribers stand for separate
 * clients; in one process, parsing one's message at once would hold up the
 * reading of every socket after it, so a step's last subscribers would be
 * timed by the parsing of the others', not by the server. Every message is
 * still parsed, in the order read.
 */
function receive(handle: (data: Buffer, t: number) => void, data: Buffer): void {
  inbox.push(handle, data, epochMs());
  if (!inboxQueued) {
    inboxQueued = true;
    setImmediate(drainInbox);
  }
}

function drainInbox(): void {
  inboxQueued = false;
  const messages = inbox.splice(0);
  for (let i = 0; i < messages.length; i += 3) (messages[i] as (data: Buffer, t: number) => void)(messages[i + 1] as Buffer, messages[i + 2] as number);
}

/**
 * A lean graphql-transport-ws client: connection_init, subscribe, and the
 * next / error / complete messages, parsed with JSON.parse as any client must.
 * (The graphql-ws client library took 13 µs of this process's CPU per message;
 * with 1,000 of them in one process on the server's machine, it, not the
 * server, set the latency. The server does the same work for either.)
 */
function openLean(): Watcher {
  const socket = new WebSocket(url, 'graphql-transport-ws');
  let acknowledge!: () => void;
  const acknowledged = new Promise<void>((resolve) => (acknowledge = resolve));
  let subscriptions = 0;
  const watcher: Watcher = {
    subscribe: (runId) => {
      subscriptions += 1;
      const id = String(subscriptions);
      void acknowledged.then(() => socket.send(JSON.stringify({ id, type: 'subscribe', payload: { query: TRACE, variables: { runId } } })));
    },
    close: () => socket.close(1000),
    received: [],
    lastSequence: 0,
    completed: false,
    error: null,
    onProgress: null,
  };
  socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } })));
  // Timestamped as it is read, parsed once every socket read in this turn has been (see `receive`).
  socket.on('message', (data: Buffer) => receive(handle, data));
  function handle(data: Buffer, t: number): void {
    const message = JSON.parse(data.toString()) as { type: string; id?: string; payload?: { data?: { runTrace?: { sequence: number } }; errors?: { message: string }[] } | { message: string }[] };
    switch (message.type) {
      case 'connection_ack':
        acknowledge();
        return;
      case 'ping':
        socket.send('{"type":"pong"}');
        return;
      case 'next': {
        if (message.id !== String(subscriptions)) return;
        const payload = message.payload as { data?: { runTrace?: { sequence: number } }; errors?: { message: string }[] };
        const sequence = payload.data?.runTrace?.sequence ?? -1;
        if (payload.errors?.length) watcher.error ??= payload.errors.map((e) => e.message).join('; ');
        watcher.received.push(sequence, t);
        watcher.lastSequence = sequence;
        break;
      }
      case 'error':
        watcher.error ??= JSON.stringify(message.payload);
        break;
      case 'complete':
        if (message.id === String(subscriptions)) watcher.completed = true;
        break;
      default:
        return;
    }
    watcher.onProgress?.();
  }
  // In line with the messages read before it: a `complete` still waiting to be parsed comes first.
  socket.on('close', (code) =>
    receive(() => {
      if (!watcher.completed) watcher.error ??= `close ${code}`;
      watcher.onProgress?.();
    }, NO_DATA),
  );
  socket.on('error', (error) => {
    watcher.error ??= error.message;
    watcher.onProgress?.();
  });
  return watcher;
}

/** The graphql-ws client library (FANOUT_CLIENT=library). */
function openLibrary(): Watcher {
  const client = createClient({
    url,
    webSocketImpl: WebSocket,
    connectionParams: { authorization: `Bearer ${token}` },
    retryAttempts: 0,
    lazy: true,
    // The socket stays open between the warm-up run and the measured one.
    lazyCloseTimeout: 600_000,
  });
  const watcher: Watcher = {
    subscribe: (runId) => {
      client.subscribe<{ runTrace: { sequence: number } }>(
        { query: TRACE, variables: { runId } },
        {
          next: (value) => {
            const t = epochMs();
            const sequence = value.data?.runTrace.sequence ?? -1;
            if (value.errors?.length) watcher.error ??= value.errors.map((e) => e.message).join('; ');
            watcher.received.push(sequence, t);
            watcher.lastSequence = sequence;
            watcher.onProgress?.();
          },
          error: (error: unknown) => {
            watcher.error ??= error instanceof Error ? error.message : String(error);
            watcher.onProgress?.();
          },
          complete: () => {
            watcher.completed = true;
            watcher.onProgress?.();
          },
        },
      );
    },
    close: () => void client.dispose(),
    received: [],
    lastSequence: 0,
    completed: false,
    error: null,
    onProgress: null,
  };
  return watcher;
}

const open = process.env.FANOUT_CLIENT === 'library' ? openLibrary : openLean;

function watch(watcher: Watcher, runId: string): void {
  watcher.received = [];
  watcher.lastSequence = 0;
  watcher.completed = false;
  watcher.subscribe(runId);
}

function until(batch: Watcher[], condition: (w: Watcher) => boolean, timeoutMs: number): Promise<void> {
  return new Promise((resolve) => {
    const timer = setTimeout(finish, timeoutMs);
    function check(): void {
      if (batch.every((w) => condition(w) || w.error !== null)) finish();
    }
    function finish(): void {
      clearTimeout(timer);
      for (const w of batch) w.onProgress = null;
      resolve();
    }
    for (const w of batch) w.onProgress = check;
    check();
  });
}

async function main(): Promise<void> {
  for (const [run, runId] of runIds.entries()) {
    const started = epochMs();
    for (let opened = 0; opened < clientCount; opened += batchSize) {
      const batch: Watcher[] = [];
      for (let i = opened; i < Math.min(clientCount, opened + batchSize); i += 1) {
        const watcher = watchers[i] ?? open();
        watchers[i] = watcher;
        watch(watcher, runId);
        batch.push(watcher);
      }
      await until(batch, (w) => w.lastSequence >= readySequence, BATCH_TIMEOUT_MS);
    }
    const failed = watchers.filter((w) => w.error !== null || w.lastSequence < readySequence).length;
    send({ type: 'ready', run, ready: watchers.length - failed, failed, openMs: epochMs() - started, errors: watchers.filter((w) => w.error).slice(0, 5).map((w) => w.error) });
    const cpuAtReady = process.cpuUsage();
    await until(watchers, (w) => w.completed, DONE_TIMEOUT_MS);
    const cpu = process.cpuUsage(cpuAtReady);
    send({
      type: 'done',
      run,
      clientCpuMs: (cpu.user + cpu.system) / 1000,
      received: watchers.map((w) => w.received),
      completed: watchers.filter((w) => w.completed).length,
      errors: watchers.filter((w) => w.error).map((w) => w.error),
    });
    // The next run's subscriptions start once the server's CPU for this one is read.
    if (run + 1 < runIds.length) await go();
  }
}

let goWaiting: (() => void) | null = null;
let goSent = 0;
function go(): Promise<void> {
  if (goSent > 0) {
    goSent -= 1;
    return Promise.resolve();
  }
  return new Promise((resolve) => (goWaiting = resolve));
}

process.on('message', (message: { type: string; id?: number }) => {
  if (message.type === 'clock') send({ type: 'clock', id: message.id, t: epochMs() });
  if (message.type === 'go') {
    if (goWaiting) {
      const resolve = goWaiting;
      goWaiting = null;
      resolve();
    } else {
      goSent += 1;
    }
  }
  if (message.type === 'exit') {
    for (const w of watchers) w.close();
    setTimeout(() => process.exit(0), 200);
    setTimeout(() => process.exit(0), 5_000).unref();
  }
});
process.on('disconnect', () => process.exit(0));

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
