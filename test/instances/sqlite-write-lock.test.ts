/**
 * Another process holding SQLite's write lock (a second instance, a backup,
 * someone in the sqlite3 shell) must not freeze the server: it keeps
 * answering, and a write that cannot get the lock in time is refused with a
 * retryable error and changes nothing.
 */
import Database from 'better-sqlite3';
import type { TestDatabase } from '../support/databases';
import { Instances } from '../support/instances';
import type { ServerProcess } from '../support/server-process';

jest.setTimeout(60_000);

describe('a SQLite write lock held by another process', () => {
  const instances = new Instances('sqlite');
  let database: TestDatabase;
  let server: ServerProcess;

  beforeAll(async () => {
    database = await instances.database();
    server = await instances.start({ SQLITE_LOCK_WAIT_MS: '1500' });
  });
  afterAll(() => instances.stop());

  test('the server keeps answering while a write waits, and the write is refused as retryable', async () => {
    if (database.config.kind !== 'sqlite') throw new Error('unreachable');
    const other = new Database(database.config.file);
    other.exec('BEGIN IMMEDIATE');
    try {
      const order: string[] = [];
      const create = server
        .gql('mutation { createSnippet(input: { identifier: "while_locked", name: "n", snippet: "s" }) { uid } }')
        .then((result) => (order.push('create'), result));
      await new Promise((resolve) => setTimeout(resolve, 200));
      const health = await fetch(`${server.origin}/healthz`).then((response) => (order.push('health'), response.status));
      const read = await server.gql<{ snippets: unknown[] }>('{ snippets { uid } }').then((result) => (order.push('read'), result));
      const refused = await create;

      expect(health).toBe(200);
      expect(read.data?.snippets).toEqual([]);
      expect(order).toEqual(['health', 'read', 'create']);
      expect(refused.errors?.[0]?.extensions).toEqual({ code: 'SERVICE_UNAVAILABLE', retryable: true });
      expect(refused.errors?.[0]?.message).toMatch(/try again/i);
    } finally {
      other.exec('ROLLBACK');
      other.close();
    }
    const retried = await server.gql<{ createSnippet: { uid: number } }>('mutation { createSnippet(input: { identifier: "while_locked", name: "n", snippet: "s" }) { uid } }');
    expect(retried.errors).toBeUndefined();
    expect(retried.data?.createSnippet.uid).toEqual(expect.any(Number));
  });

  test('a write that waits less than the limit goes through once the lock is released', async () => {
    if (database.config.kind !== 'sqlite') throw new Error('unreachable');
    const other = new Database(database.config.file);
    other.exec('BEGIN IMMEDIATE');
    const create = server.gql('mutation { createSnippet(input: { identifier: "after_release", name: "n", snippet: "s" }) { uid } }');
    await new Promise((resolve) => setTimeout(resolve, 300));
    other.exec('ROLLBACK');
    other.close();
    const result = await create;
    expect(result.errors).toBeUndefined();
  });
});
