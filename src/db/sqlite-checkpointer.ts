/**
 * WAL checkpoints for an embedded SQLite file, off the event loop.
 *
 * Left to itself, SQLite checkpoints inside whichever commit takes the WAL
 * past `wal_autocheckpoint` pages (1,000 by default): better-sqlite3 is
 * synchronous, so that commit copies the WAL into the database file and
 * syncs it on the main thread, and every request and run step waits for it
 * (a p99 spike in the agent loop, which stores every step, and in the live
 * fan-out).
 *
 * Here a worker thread with its own connection to the same file runs
 * `PRAGMA wal_checkpoint(PASSIVE)` every CHECKPOINT_INTERVAL_MS. A PASSIVE
 * checkpoint neither takes the WAL write lock nor waits for readers or
 * writers: it copies what no open snapshot still needs and stops, so the main
 * connection's writes never wait for it.
 *
 * Once a checkpoint is complete, the next commit starts the WAL from its
 * beginning again, so the file stays small and nothing is copied twice. That
 * commit writes a new WAL header and syncs it (SQLite does so even with
 * `synchronous = NORMAL`, whose other commits never sync), and cuts a WAL
 * grown past `journal_size_limit` back to it. On the main thread, in one
 * 1-watcher run of the fan-out benchmark on this repository's VM
 * (2026-12-02), that was 115 syncs (0.75 ms at the median, 5.2 ms at most)
 * and 25 cuts, eight of them 10–22 ms: 285 ms in all, each a stall of the
 * event loop, most often at a run's first step after a pause. So when the
 * database has been quiet for QUIET_MS, the worker's next checkpoint (still
 * at most one per CHECKPOINT_INTERVAL_MS; one that falls due while commits
 * follow each other waits up to QUIET_MS for a pause) is followed, if it took
 * in the whole WAL, by a start-over of its own with a commit that changes
 * nothing (`user_version` set to its own value): the sync and the cut are the
 * worker's, and the main connection's next commit only appends (the same run
 * after: 16 syncs and 3 cuts of 1.2–1.4 ms on the main thread). While writes
 * follow each other without such a pause, checkpoints run every
 * CHECKPOINT_INTERVAL_MS + QUIET_MS, and a commit on the main thread may
 * still start the WAL over. Quiet is read from `data_version`
 * (it changes when another connection commits), polled every POLL_MS; a
 * worker that has started the WAL over does nothing more until another
 * connection writes.
 *
 * The worker's commit takes the write lock for as long as its sync and cut last. A
 * main-thread transaction that meets it waits asynchronously
 * (takeSqliteWriteLock in data-source.ts); a single statement waits through
 * `busy_timeout`, which it would also do for any other process's write.
 *
 * While the worker runs, the main connection's own automatic checkpoint is a
 * backstop (BACKSTOP_AUTOCHECKPOINT_PAGES). A checkpoint completes only if no
 * commit lands while it copies and syncs; under an unbroken stream of commits
 * the WAL can reach the backstop, and the main connection's checkpoint then
 * copies only the pages the worker has not copied yet. If the worker stops or
 * never starts, the main connection goes back to SQLite's default and a
 * warning is logged.
 */
import { Worker } from 'node:worker_threads';
import type { Logger } from '../logger';

/**
 * How often the worker checkpoints. A pass with nothing to copy only reads the
 * WAL index; one with pages to copy also syncs the WAL and the database file,
 * disk work that a shorter interval repeats more often for the same pages.
 */
export const CHECKPOINT_INTERVAL_MS = 100;
/**
 * How long no other connection may have committed before the worker takes the
 * whole WAL in and starts it over. Short against a provider call (the agent
 * loop's commits wait for one between rounds), long against the gaps within a
 * burst of commits, where a write would meet the worker's.
 */
export const QUIET_MS = 20;
/** How often the worker reads `data_version` (the wal-index header in shared memory, no I/O). */
export const POLL_MS = 5;
/** SQLite's own `wal_autocheckpoint`: what the main connection goes back to without the worker. */
export const DEFAULT_AUTOCHECKPOINT_PAGES = 1000;
/** The main connection's `wal_autocheckpoint` while the worker runs: only reached if the worker falls behind. */
export const BACKSTOP_AUTOCHECKPOINT_PAGES = 4000;
/**
 * `journal_size_limit` of the main connection: when the WAL starts over after
 * a checkpoint, a file that a burst of writes made larger is cut back to this.
 */
export const WAL_SIZE_LIMIT_BYTES = 4 * 1024 * 1024;

/** The main connection, as better-sqlite3 presents it. */
export interface CheckpointedConnection {
  pragma(sql: string, options?: { simple: boolean }): unknown;
  readonly open: boolean;
}

export interface SqliteCheckpointerOptions {
  logger: Logger;
  /** Overrides CHECKPOINT_INTERVAL_MS (tests use a short one). */
  intervalMs?: number;
  /** Overrides QUIET_MS. */
  quietMs?: number;
}

/**
 * The worker, as source: it runs the same from the compiled dist/ and from
 * TypeScript under jest, with nothing to resolve but the driver (whose path
 * the main thread passes, so it is the very same better-sqlite3). It sends
 * one message, once its connection is open; any message to it means stop.
 *
 * A checkpoint that finds the file busy (another instance on the same file
 * checkpointing or recovering it) is tried again at the next interval. Any
 * other error ends the worker, and the main connection takes checkpoints back.
 */
const WORKER_SOURCE = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const { intervalMs, quietMs, pollMs } = workerData;
const database = new Database(workerData.file, { fileMustExist: true, timeout: 0 });
// The WAL is cut back by whichever connection starts it over: this one, too.
database.pragma('journal_size_limit = ' + workerData.walSizeLimit);
const dataVersion = database.prepare('PRAGMA data_version').pluck();
// A commit that changes nothing and, on a WAL whose every frame is in the database, starts it over.
const startOver = database.transaction(() => {
  database.pragma('user_version = ' + Number(database.pragma('user_version', { simple: true })));
});
let version = dataVersion.get();
let changedAt = Date.now();
let checkpointedAt = 0;
// The data_version at which the WAL was last left started over (or found a single frame long: see below).
let settled = null;
function pass() {
  const now = Date.now();
  const current = dataVersion.get();
  if (current !== version) {
    version = current;
    changedAt = now;
  }
  if (current === settled) return;
  const quiet = now - changedAt >= quietMs;
  // A checkpoint due while commits still follow each other waits up to quietMs for them to pause.
  if (now - checkpointedAt < intervalMs + (quiet ? 0 : quietMs)) return;
  checkpointedAt = now;
  const [result] = database.pragma('wal_checkpoint(PASSIVE)');
  if (!quiet || result.busy !== 0 || result.log !== result.checkpointed) return;
  // One frame is what such a commit leaves (this worker's or another instance's on the same file):
  // starting over after it would only answer the other instance's, and it this one's, forever.
  if (result.log !== 1) startOver.immediate();
  settled = current;
}
const timer = setInterval(() => {
  try {
    pass();
  } catch (error) {
    if (!String(error && error.code).startsWith('SQLITE_BUSY')) throw error;
  }
}, pollMs);
parentPort.on('message', () => {
  clearInterval(timer);
  database.close();
  parentPort.close();
});
parentPort.postMessage('ready');
`;

/** A running checkpoint worker; `stop()` it before closing the main connection. */
export interface SqliteCheckpointer {
  stop(): Promise<void>;
}

/**
 * Starts checkpointing `file` in a worker and, once the worker's connection
 * is open, raises the main connection's automatic checkpoint to the backstop.
 * Resolves when the worker is ready or has failed to start (then the main
 * connection keeps the default and a warning is logged); never rejects.
 */
export async function startSqliteCheckpointer(connection: CheckpointedConnection, file: string, options: SqliteCheckpointerOptions): Promise<SqliteCheckpointer> {
  const { logger } = options;
  connection.pragma(`journal_size_limit = ${WAL_SIZE_LIMIT_BYTES}`);
  const worker = new Worker(WORKER_SOURCE, {
    eval: true,
    workerData: { driver: require.resolve('better-sqlite3'), file, intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS, quietMs: options.quietMs ?? QUIET_MS, pollMs: POLL_MS, walSizeLimit: WAL_SIZE_LIMIT_BYTES },
  });
  let stopping = false;
  const exited = new Promise<void>((resolve) => worker.once('exit', () => resolve()));
  const takeCheckpointsBack = (reason: unknown) => {
    if (connection.open) connection.pragma(`wal_autocheckpoint = ${DEFAULT_AUTOCHECKPOINT_PAGES}`);
    if (!stopping) logger.warn({ err: reason, file }, 'the SQLite checkpoint worker stopped; the main connection checkpoints the WAL itself again');
  };
  let failure: unknown = null;
  worker.on('error', (error) => (failure = error));
  const ready = await new Promise<boolean>((resolve) => {
    worker.once('message', () => resolve(true));
    worker.once('exit', () => resolve(false));
  });
  // Checkpoints are housekeeping: once started, they never keep the process alive. (Until then
  // the worker must, like stop() below: the caller awaits it, maybe with nothing else pending.)
  worker.unref();
  if (ready) {
    connection.pragma(`wal_autocheckpoint = ${BACKSTOP_AUTOCHECKPOINT_PAGES}`);
    worker.once('exit', (code) => takeCheckpointsBack(failure ?? new Error(`the worker exited with code ${code}`)));
  } else {
    takeCheckpointsBack(failure ?? new Error('the worker exited before it was ready'));
  }

  return {
    async stop() {
      if (stopping) return exited;
      stopping = true;
      // Held open until the worker has closed its connection, for a caller with nothing else pending.
      worker.ref();
      worker.postMessage('stop');
      await exited;
    },
  };
}
