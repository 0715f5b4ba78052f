/**
 * ParameterWrites on both dialects: rows written as TypeORM writes them
 * (the columns' transformers, flags), the generated id, rows matched, the
 * SQL text the same for every value, and a large value on MySQL.
 */
import { createDataSource } from '../../src/db/data-source';
import { LARGE_VALUE_CHARS } from '../../src/db/large-values';
import { ParameterWrites } from '../../src/db/parameter-writes';
import { AgentRunEntity } from '../../src/runs/agent-run.entity';
import { RunRequestEntity } from '../../src/runs/run-request.entity';
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import type { DataSource } from 'typeorm';

describe.each(testDialects)('ParameterWrites (%s)', (dialect) => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let destroy: () => Promise<void>;
  const statements: string[] = [];

  beforeAll(async () => {
    database = await createTestDatabase(dialect);
    const opened = await createDataSource({ database: database.config, schemaMode: 'own', onQuery: (sql) => statements.push(sql) });
    dataSource = opened.dataSource;
    destroy = () => dataSource.destroy();
    await dataSource.runMigrations();
  });
  afterAll(async () => {
    await destroy?.();
    await database?.drop();
  });

  const run = (uuid: string, crdate: number): Omit<AgentRunEntity, 'uid'> => ({
    pid: 0,
    uuid,
    status: 'QUEUED',
    configurationUid: 7,
    configurationIdentifier: 'conf',
    beUser: 0,
    iterations: 0,
    truncated: true,
    totalPromptTokens: 0,
    totalCompletionTokens: 0,
    totalTokens: 0,
    estimatedCost: 0.25,
    errorClass: '',
    terminationReason: '',
    suspendedState: null,
    queuedRequest: null,
    claimedBy: '',
    leaseExpires: 0,
    requeueCount: 0,
    pendingEffect: '',
    startedAt: 0,
    finishedAt: 0,
    tstamp: crdate,
    crdate,
  });

  test('insert answers the generated id; the row reads back as TypeORM reads it; update and delete answer the rows matched', async () => {
    const writes = new ParameterWrites(dataSource);
    const first = await writes.insert(null, AgentRunEntity, run('00000000-0000-4000-8000-000000000001', 1_700_000_000));
    const second = await dataSource.transaction((manager) => writes.insert(manager, AgentRunEntity, run('00000000-0000-4000-8000-000000000002', 1_700_000_001)));
    expect(first).toBeGreaterThan(0);
    expect(second).toBe(first + 1);
    const stored = await dataSource.getRepository(AgentRunEntity).findOneByOrFail({ uid: first });
    expect(stored).toMatchObject({ ...run('00000000-0000-4000-8000-000000000001', 1_700_000_000), uid: first });
    // The status goes through its column's transformer, as TypeORM stores it (nr_llm's spelling).
    const [raw] = (await dataSource.query(`SELECT status, truncated FROM tx_nrllm_agentrun WHERE uid = ${first}`)) as { status: string; truncated: number }[];
    expect({ status: raw!.status, truncated: Number(raw!.truncated) }).toEqual({ status: 'queued', truncated: 1 });

    expect(await writes.update(null, AgentRunEntity, { uid: first }, { status: 'RUNNING', startedAt: 1_700_000_005 })).toBe(1);
    expect(await writes.update(null, AgentRunEntity, { uid: 999_999 }, { status: 'RUNNING', startedAt: 1_700_000_005 })).toBe(0);
    expect(await dataSource.getRepository(AgentRunEntity).findOneByOrFail({ uid: first })).toMatchObject({ status: 'RUNNING', startedAt: 1_700_000_005, truncated: true });
    expect(await writes.delete(null, AgentRunEntity, { uid: second })).toBe(1);
    expect(await writes.delete(null, AgentRunEntity, { uid: second })).toBe(0);
  });

  test('the SQL text is the same whatever the values; a write that would change every row is refused', async () => {
    const writes = new ParameterWrites(dataSource);
    statements.length = 0;
    for (const [uid, at] of [[11, 1], [12, 2], [13, 3]] as const) await writes.update(null, AgentRunEntity, { uid }, { tstamp: 1_700_000_000 + at });
    expect(new Set(statements).size).toBe(1);
    expect(statements[0]).not.toMatch(/1700000001|\b11\b/);
    await expect(writes.update(null, AgentRunEntity, {}, { tstamp: 1 })).rejects.toThrow(/names the rows it changes/);
    await expect(writes.delete(null, AgentRunEntity, {})).rejects.toThrow(/names the rows it changes/);
    await expect(writes.update(null, AgentRunEntity, { uid: 1 }, { notAColumn: 1 } as never)).rejects.toThrow(/has no column for "notAColumn"/);
  });

  test('a large value is stored whole (on MySQL as a prepared statement), with its id', async () => {
    const writes = new ParameterWrites(dataSource);
    const uid = await writes.insert(null, AgentRunEntity, run('00000000-0000-4000-8000-000000000003', 1_700_000_010));
    const request = JSON.stringify({ prompt: 'é'.repeat(LARGE_VALUE_CHARS * 2) });
    await writes.insert(null, RunRequestEntity, { runUid: uid, request, requeueCount: 0 });
    expect((await dataSource.getRepository(RunRequestEntity).findOneByOrFail({ runUid: uid })).request).toBe(request);
    const large = await writes.insert(null, AgentRunEntity, { ...run('00000000-0000-4000-8000-000000000004', 1_700_000_011), suspendedState: 'x'.repeat(LARGE_VALUE_CHARS + 1) });
    expect(large).toBe(uid + 1);
  });
});
