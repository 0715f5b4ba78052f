/**
 * WAL checkpoints of the embedded SQLite database run in a worker thread, not
 * inside a commit on the main thread (src/db/sqlite-checkpointer.ts). The
 * worker is seen through the `Worker` constructor, wrapped by a spy; the WAL
 * through its file: salt-1 in its header goes up each time a commit starts
 * the WAL over, which it only does after a complete checkpoint; commits
 * through `data_version` on a connection of the test's own, which changes
 * whenever another connection commits.
 */
import { execFile } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import workerThreads, { type Worker } from 'node:worker_threads';
import Database from 'better-sqlite3';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../../src/db/data-source';
import {
  BACKSTOP_AUTOCHECKPOINT_PAGES,
  DEFAULT_AUTOCHECKPOINT_PAGES,
  startSqliteCheckpointer,
  type SqliteCheckpointer,
  WAL_SIZE_LIMIT_BYTES,
} from '../../src/db/sqlite-checkpointer';
import { createLogger } from '../../src/logger';
import { createTestDatabase, type TestDatabase } from '../support/databases';
import { startTestServer } from '../support/server';

/** Short, so that the tests need not wait for the production interval. */
const TEST_INTERVAL_MS = 5;
/** About one 4 KiB page per row. */
const PAGE_OF_TEXT = 'p'.repeat(3500);
const root = path.resolve(__dirname, '../..');

const pause = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

async function eventually(check: () => Promise<boolean> | boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await pause(10);
  }
}

/**
 * Salt-1 of the WAL header, which every start-over of the WAL increments, whichever connection
 * does it (the checkpoint sequence number next to it counts only the writing connection's own).
 */
function walSalt(file: string): number {
  const header = Buffer.alloc(20);
  const fd = fs.openSync(`${file}-wal`, 'r');
  try {
    fs.readSync(fd, header, 0, 20, 0);
  } finally {
    fs.closeSync(fd);
  }
  return header.readUInt32BE(16);
}

/** How often the WAL was started over since its salt-1 was `salt` (a random start, so modulo 2^32). */
function restartsSince(file: string, salt: number): number {
  return (walSalt(file) - salt) >>> 0;
}

async function pragma(dataSource: DataSource, name: string): Promise<number> {
  const [row] = (await dataSource.query(`PRAGMA ${name}`)) as Record<string, number>[];
  return Number(row?.[name]);
}

describe('WAL checkpoints in a worker thread', () => {
  let started: Worker[];
  let warnings: string[];
  const logger = createLogger('warn', { write: (line: string) => void warnings.push(line) });
  let database: TestDatabase | null;
  let opened: { dataSource: DataSource; checkpointer: SqliteCheckpointer | null } | null;

  beforeEach(() => {
    started = [];
    warnings = [];
    database = null;
    opened = null;
    const RealWorker = workerThreads.Worker;
    jest.spyOn(workerThreads, 'Worker').mockImplementation((...args: ConstructorParameters<typeof Worker>) => {
      const worker = new RealWorker(...args);
      started.push(worker);
      return worker;
    });
  });
  afterEach(async () => {
    jest.restoreAllMocks();
    await opened?.checkpointer?.stop();
    await opened?.dataSource.destroy();
    await database?.drop();
  });

  /** `quietMs` short by default: the worker's own commits then meet the test's writes often. */
  async function openFileDatabase(quietMs = TEST_INTERVAL_MS) {
    database = await createTestDatabase('sqlite');
    if (database.config.kind !== 'sqlite') throw new Error('unreachable');
    opened = await createDataSource({ database: database.config, schemaMode: 'own', sqliteCheckpoints: { logger, intervalMs: TEST_INTERVAL_MS, quietMs } });
    await opened.dataSource.runMigrations();
    await opened.dataSource.query('CREATE TABLE filler (body TEXT)');
    return { ...opened, file: database.config.file };
  }

  it('checkpoints the WAL while the main connection only writes, and the restarted WAL is cut back', async () => {
    const { dataSource, file } = await openFileDatabase();
    expect(started).toHaveLength(1);
    expect(await pragma(dataSource, 'wal_autocheckpoint')).toBe(BACKSTOP_AUTOCHECKPOINT_PAGES);
    expect(await pragma(dataSource, 'journal_size_limit')).toBe(WAL_SIZE_LIMIT_BYTES);

    // About 1,500 pages in one commit: past SQLite's default of 1,000 but short of the backstop,
    // so the main connection checkpoints nothing itself.
    await dataSource.transaction(async (manager) => {
      for (let row = 0; row < 1500; row++) await manager.query('INSERT INTO filler (body) VALUES (?)', [PAGE_OF_TEXT]);
    });
    expect(fs.statSync(`${file}-wal`).size).toBeGreaterThan(WAL_SIZE_LIMIT_BYTES);
    const saltBefore = walSalt(file);

    // A commit starts the WAL over only once every frame in it was checkpointed.
    await eventually(async () => {
      await dataSource.query('INSERT INTO filler (body) VALUES (?)', ['small']);
      return restartsSince(file, saltBefore) > 0;
    });
    expect(fs.statSync(`${file}-wal`).size).toBeLessThanOrEqual(WAL_SIZE_LIMIT_BYTES);
  });

  it('writes from the main connection never fail while the worker checkpoints', async () => {
    const { dataSource, file } = await openFileDatabase();
    const saltBefore = walSalt(file);
    const restarts = () => restartsSince(file, saltBefore);
    // The main connection's backstop alone starts the WAL over at most once per BACKSTOP pages; a row
    // is one page of text plus at most a few b-tree pages, so 4 frames per row bounds it from above.
    const backstopRestartsAtMost = (rows: number) => Math.ceil((rows * 4) / BACKSTOP_AUTOCHECKPOINT_PAGES);
    // The writers stop once the WAL started over 10 times more than the backstop could have made it,
    // however long that takes on a loaded machine (the deadline only ends a test that would fail).
    const deadline = Date.now() + 20_000;
    let written = 0;
    const enough = () => restarts() >= 10 + backstopRestartsAtMost(written) || Date.now() > deadline;
    const insert = 'INSERT INTO filler (body) VALUES (?)';
    // Both ways the service writes: in a transaction, which first takes the write lock with busy_timeout 0
    // (takeSqliteWriteLock), and as a single statement.
    // Bursts of writes with pauses between them, as a server's: a checkpoint can complete in a pause.
    // All writers pause together: while one of them went on writing, a checkpoint that the worker
    // began could never take in the WAL's last frame, and on a loaded machine the WAL then started
    // over too rarely (63 times where 69 were asked for, after 20 s of writing).
    let quiet: Promise<unknown> | null = null;
    const writer = async (transactional: boolean) => {
      while (!enough()) {
        if (quiet) await quiet;
        if (transactional) await dataSource.transaction((manager) => manager.query(insert, [PAGE_OF_TEXT]));
        else await dataSource.query(insert, [PAGE_OF_TEXT]);
        written += 1;
        if (written % 30 === 0) quiet = pause(5);
      }
    };
    await Promise.all([writer(true), writer(false), writer(true)]);

    const [count] = (await dataSource.query('SELECT COUNT(*) AS count FROM filler')) as { count: number }[];
    expect(Number(count?.count)).toBe(written);
    // The writes overlapped checkpoints of the worker's that completed: the WAL started over after each.
    expect(restarts()).toBeGreaterThanOrEqual(10 + backstopRestartsAtMost(written));
    expect(warnings).toEqual([]);
  });

  it('after a quiet moment the worker starts the WAL over itself, then leaves it; the main connection\'s next commit only appends', async () => {
    // Quiet for this long (many of the test's intervals), the WAL is started over: until then the test reads it as the main connection left it.
    const quietMs = 300;
    const { dataSource, file } = await openFileDatabase(quietMs);
    const observer = new Database(file, { readonly: true });
    try {
      // Past the size a WAL started over is cut back to.
      await dataSource.transaction(async (manager) => {
        for (let row = 0; row < 1500; row++) await manager.query('INSERT INTO filler (body) VALUES (?)', [PAGE_OF_TEXT]);
      });
      expect(fs.statSync(`${file}-wal`).size).toBeGreaterThan(WAL_SIZE_LIMIT_BYTES);
      const saltAfterWrite = walSalt(file);
      // Read before the worker can commit (it waits quietMs for quiet first).
      const versionAfterWrite = observer.pragma('data_version', { simple: true });

      // Nothing more is written from the main connection: the worker starts the WAL over (and syncs its
      // header), cuts it back, and commits. The WAL's new header is in the file before that commit is
      // done (it is written, then synced, with the commit's frame).
      await eventually(
        () =>
          restartsSince(file, saltAfterWrite) > 0 &&
          fs.statSync(`${file}-wal`).size <= WAL_SIZE_LIMIT_BYTES &&
          observer.pragma('data_version', { simple: true }) !== versionAfterWrite,
      );
      // data_version can also move before that commit is done: starting the WAL over rewrites the
      // WAL index's header at once (a reader sees a change), and the commit rewrites it again. So the
      // worker's commit is done once data_version holds still for a moment far shorter than its quiet
      // moment, which it must wait out before it could commit again.
      let version = observer.pragma('data_version', { simple: true });
      await eventually(async () => {
        const before = version;
        await pause(quietMs / 6);
        version = observer.pragma('data_version', { simple: true });
        return version === before;
      });
      const saltByWorker = walSalt(file);
      // Then it commits nothing more while nobody else does, for many times its interval and twice its quiet moment.
      await pause(2 * quietMs);
      expect(observer.pragma('data_version', { simple: true })).toBe(version);

      await dataSource.query('INSERT INTO filler (body) VALUES (?)', ['appended']);
      await dataSource.transaction((manager) => manager.query('INSERT INTO filler (body) VALUES (?)', ['appended too']));

      expect(walSalt(file)).toBe(saltByWorker);
      const [count] = (await dataSource.query('SELECT COUNT(*) AS count FROM filler')) as { count: number }[];
      expect(Number(count?.count)).toBe(1502);
    } finally {
      observer.close();
    }
  });

  it('two workers on one file do not answer each other\'s commit that starts the WAL over', async () => {
    const { dataSource, file } = await openFileDatabase();
    // A second instance's checkpointer on the same file: each sees the other's commits.
    const secondConnection = new Database(file);
    const observer = new Database(file, { readonly: true });
    const second = await startSqliteCheckpointer(secondConnection, file, { logger, intervalMs: TEST_INTERVAL_MS });
    try {
      await dataSource.query('INSERT INTO filler (body) VALUES (?)', [PAGE_OF_TEXT]);
      await pause(200);
      const version = observer.pragma('data_version', { simple: true });

      await pause(400);

      expect(observer.pragma('data_version', { simple: true })).toBe(version);
    } finally {
      await second.stop();
      secondConnection.close();
      observer.close();
    }
    expect(warnings).toEqual([]);
  });

  it('when the worker dies, the main connection checkpoints every 1,000 pages again and a warning says so', async () => {
    const { dataSource } = await openFileDatabase();
    expect(await pragma(dataSource, 'wal_autocheckpoint')).toBe(BACKSTOP_AUTOCHECKPOINT_PAGES);

    await started[0]!.terminate();

    await eventually(async () => (await pragma(dataSource, 'wal_autocheckpoint')) === DEFAULT_AUTOCHECKPOINT_PAGES);
    expect(warnings).toHaveLength(1);
    expect(JSON.parse(warnings[0]!)).toMatchObject({ level: 40, msg: expect.stringMatching(/checkpoint worker stopped/) });
  });

  it('when the worker cannot start, the main connection keeps checkpointing itself and a warning says so', async () => {
    database = await createTestDatabase('sqlite');
    if (database.config.kind !== 'sqlite') throw new Error('unreachable');
    const file = database.config.file;
    const connection = new Database(file);
    try {
      connection.pragma('journal_mode = WAL');
      // The worker opens only an existing file: gone from the directory, it cannot.
      fs.rmSync(file);
      const checkpointer = await startSqliteCheckpointer(connection, file, { logger, intervalMs: TEST_INTERVAL_MS });
      expect(connection.pragma('wal_autocheckpoint', { simple: true })).toBe(DEFAULT_AUTOCHECKPOINT_PAGES);
      expect(warnings).toHaveLength(1);
      expect(JSON.parse(warnings[0]!)).toMatchObject({ err: { code: 'SQLITE_CANTOPEN' } });
      await checkpointer.stop();
    } finally {
      connection.close();
    }
  });

  it('an in-memory database starts no worker', async () => {
    opened = await createDataSource({ database: { kind: 'sqlite', file: ':memory:', dataDirectory: path.resolve('data') }, schemaMode: 'own', sqliteCheckpoints: { logger } });
    expect(opened.checkpointer).toBeNull();
    expect(started).toEqual([]);
    expect(await pragma(opened.dataSource, 'wal_autocheckpoint')).toBe(DEFAULT_AUTOCHECKPOINT_PAGES);
  });

  it('stopping the server ends the worker and closes its connection before the database closes', async () => {
    const server = await startTestServer('sqlite', { keepDatabase: true, server: { logger } });
    database = server.database;
    if (database.config.kind !== 'sqlite') throw new Error('unreachable');
    const file = database.config.file;
    expect(started).toHaveLength(1);
    const exited = new Promise<number>((resolve) => started[0]!.once('exit', resolve));
    await server.ok('mutation { createSnippet(input: { identifier: "checkpointed", name: "n", snippet: "s" }) { uid } }');
    // Long enough for the worker to have checkpointed, so that it has the WAL open.
    await pause(300);

    await server.stop();

    await expect(Promise.race([exited, pause(0).then(() => 'still running')])).resolves.toBe(0);
    // The last connection to close removes the WAL: the worker's was closed, not left open.
    expect(fs.existsSync(`${file}-wal`)).toBe(false);
    expect(warnings).toEqual([]);
  });

  it('the worker neither keeps the process alive nor lets it end before it has started or stopped', async () => {
    database = await createTestDatabase('sqlite');
    if (database.config.kind !== 'sqlite') throw new Error('unreachable');
    // Nothing but the checkpointer is pending in this process while it starts and stops;
    // the second one is left running when the script ends.
    const script = `
      const Database = require('better-sqlite3');
      const { startSqliteCheckpointer } = require('./src/db/sqlite-checkpointer.ts');
      const file = ${JSON.stringify(database.config.file)};
      const connection = new Database(file);
      connection.pragma('journal_mode = WAL');
      const options = { logger: require('pino')({ level: 'silent' }) };
      const autocheckpoint = () => connection.pragma('wal_autocheckpoint', { simple: true });
      (async () => {
        const first = await startSqliteCheckpointer(connection, file, options);
        process.stdout.write('started ' + autocheckpoint());
        await first.stop();
        process.stdout.write(', stopped ' + autocheckpoint());
        await startSqliteCheckpointer(connection, file, options);
        process.stdout.write(', started ' + autocheckpoint());
      })();
    `;
    const output = await new Promise<string>((resolve, reject) => {
      execFile(process.execPath, ['-r', path.join(root, 'test/support/register-ts.js'), '-e', script], { cwd: root, timeout: 20_000 }, (error, stdout, stderr) =>
        error ? reject(new Error(`${error.message}\n${stderr}`)) : resolve(stdout),
      );
    });
    expect(output).toBe(`started ${BACKSTOP_AUTOCHECKPOINT_PAGES}, stopped ${DEFAULT_AUTOCHECKPOINT_PAGES}, started ${BACKSTOP_AUTOCHECKPOINT_PAGES}`);
  });
});
