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
 * connection's writes never wait for it. The main connection's first commit
 * after a complete checkpoint starts the WAL from its beginning again, so the
 * file stays small and the main thread copies nothing.
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
const database = new Database(workerData.file, { fileMustExist: true, timeout: 0 });
const timer = setInterval(() => {
  try {
    database.pragma('wal_checkpoint(PASSIVE)');
  } catch (error) {
    if (!String(error && error.code).startsWith('SQLITE_BUSY')) throw error;
  }
}, workerData.intervalMs);
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
    workerData: { driver: require.resolve('better-sqlite3'), file, intervalMs: options.intervalMs ?? CHECKPOINT_INTERVAL_MS },
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
