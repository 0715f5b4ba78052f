/**
 * A heartbeat tells how many leases it renewed, on both databases: the count
 * RunService relies on before it lets a TOOL step's write overlap the turn's
 * next call (src/runs/lease-clock.ts). A lease renewed within the same second
 * changes no value and must still count (mysql2 connects with FOUND_ROWS); a
 * run another instance took over must not.
 */
import crypto from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../../src/db/data-source';
import { RunStore } from '../../src/runs/run-store';
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';

const LEASE_SECONDS = 15;

describe.each(testDialects)('run lease heartbeat (%s)', (dialect) => {
  let database: TestDatabase | null = null;
  let dataSource: DataSource | null = null;

  afterEach(async () => {
    await dataSource?.destroy();
    dataSource = null;
    await database?.drop();
    database = null;
  }, 60_000);

  test('counts every lease it renewed, also twice in one second, and not a run another instance took over', async () => {
    database = await createTestDatabase(dialect);
    ({ dataSource } = await createDataSource({ database: database.config, schemaMode: 'own' }));
    await dataSource.runMigrations({ transaction: 'each' });
    const store = new RunStore(dataSource);
    const runs: number[] = [];
    for (let i = 0; i < 3; i += 1) {
      const row = await store.createRun({ uuid: crypto.randomUUID(), configurationUid: 1, configurationIdentifier: 'lease' }, 'instance-a', '{}');
      await store.markRunning(row.uid);
      runs.push(row.uid);
    }

    expect(await store.heartbeat('instance-a', runs)).toBe(3);
    // The same second again: nothing changes in the rows, all three are still renewed.
    expect(await store.heartbeat('instance-a', runs)).toBe(3);
    expect(await store.heartbeat('instance-a', [])).toBe(0);

    // instance-a stalled past its lease on the last run, and instance-b claimed it.
    await database.query('UPDATE promptwire_run_lease SET heartbeat_at = 0 WHERE run_uid = ?', [runs[2]]);
    expect(await store.claimOrphan(runs[2]!, 'instance-b', LEASE_SECONDS)).toBe(true);
    expect(await store.heartbeat('instance-a', runs)).toBe(2);
    expect(await store.heartbeat('instance-b', runs)).toBe(1);
  });
});
