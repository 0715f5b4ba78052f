/**
 * Identifier uniqueness among non-deleted rows, for any number of instances
 * on one database. TYPO3's tables carry no unique index the database could
 * enforce (deleted rows keep their identifiers, and the schema is TYPO3's),
 * so "check, then write" must run under a lock every instance respects:
 *
 * - MySQL/MariaDB: a named lock (`GET_LOCK`) per table, held on the
 *   connection that runs the transaction until after its commit. The next
 *   writer's check therefore sees the committed row and answers CONFLICT.
 * - SQLite: every transaction takes the database's write lock at its start
 *   (see `takeSqliteWriteLock`), so a check and its write are atomic across
 *   processes.
 *
 * Within one process a keyed mutex queues writers first, so one waiting
 * writer per table holds a pooled connection, not one per request.
 */
import type { DataSource, EntityManager } from 'typeorm';
import type { Dialect } from './data-source';
import { DatabaseBusyError } from '../shared/errors';
import { KeyedMutex } from '../shared/keyed-mutex';

/** How long a writer waits for another instance's identifier write before giving up (retryable). */
const LOCK_WAIT_SECONDS = 10;

export class IdentifierLock {
  private readonly local = new KeyedMutex();

  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
  ) {}

  /**
   * Runs `work` in a transaction holding the identifier lock of `table`.
   * Every create or rename that checks an identifier goes through here.
   */
  async transaction<T>(table: string, work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.local.run(table, () => (this.dialect === 'sqlite' ? this.dataSource.transaction(work) : this.mysqlTransaction(table, work)));
  }

  private async mysqlTransaction<T>(table: string, work: (manager: EntityManager) => Promise<T>): Promise<T> {
    const runner = this.dataSource.createQueryRunner();
    try {
      await runner.connect();
      // Named locks are server-wide: the database name keeps instances of different databases apart; SHA1 keeps the name under 64 characters.
      const name = "CONCAT('promptwire:', SHA1(CONCAT(DATABASE(), ':', ?)))";
      const rows = (await runner.query(`SELECT GET_LOCK(${name}, ?) AS acquired`, [table, LOCK_WAIT_SECONDS])) as { acquired: unknown }[];
      if (Number(rows[0]?.acquired) !== 1) {
        throw new DatabaseBusyError(`Another writer has held the ${table} identifiers for over ${LOCK_WAIT_SECONDS} s; try again shortly.`);
      }
      try {
        return await runner.manager.transaction(work);
      } finally {
        await runner.query(`SELECT RELEASE_LOCK(${name})`, [table]).catch(() => undefined);
      }
    } finally {
      await runner.release();
    }
  }
}
