/**
 * Several instances on one database with the Redis event bus (api.md
 * REDIS_URL): a run started on one instance is watched and cancelled through
 * another. Needs a Redis server: set TEST_REDIS_URL (skipped otherwise).
 */
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { collect, startTestServer, type TestServer } from '../support/server';
import { RunKit, expectWellFormedTrace } from './run-kit';
import { withTimeout } from './scripted-provider';

const redisUrl = process.env.TEST_REDIS_URL?.trim() || null;
const describeWithRedis = redisUrl ? describe.each(testDialects) : describe.skip.each(testDialects);

describeWithRedis('two instances sharing a database and Redis (%s)', (dialect) => {
  let first: TestServer;
  let second: TestServer;
  const kit = new RunKit(() => first);
  // Made in beforeAll, not while the suite is collected: a skipped suite's body still runs, and a connection
  // it left opening outlived its test environment and failed another suite of the worker.
  let database: TestDatabase | null = null;

  beforeAll(async () => {
    const env = { REDIS_URL: redisUrl! };
    database = await createTestDatabase(dialect);
    first = await startTestServer(dialect, { database, keepDatabase: true, env });
    second = await startTestServer(dialect, { database, keepDatabase: true, env });
  });
  afterAll(async () => {
    await second?.stop();
    await first?.stop();
    await kit.closeProviders();
    await database?.drop();
  });

  test('a watcher on the other instance sees the live trace without gap', async () => {
    const started = await kit.startHeldToolRun('5 + 5', 'Ten.');
    const watcher = collect<{ runTrace: { sequence: number; kind: string } }>(second.wsClient(), 'subscription($id: ID!) { runTrace(runId: $id) { sequence kind } }', { id: started.id });
    const deadline = Date.now() + 5_000;
    while (watcher.events.length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 10));
    started.release();
    await withTimeout(watcher.done, 10_000, 'the watcher on the second instance did not complete');
    const run = await kit.run(started.id);
    expect(watcher.events.map((e) => e.runTrace.sequence)).toEqual(run.steps.map((s) => s.sequence));
    expectWellFormedTrace(run.steps);
  });

  test('cancelRun sent to the other instance cancels the run', async () => {
    const setup = await kit.setup();
    setup.provider.script({ text: 'too late', delayMs: 20_000 });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] });
    await setup.provider.waitForRequest(1);
    const cancelled = await second.ok<{ cancelRun: { status: string } }>('mutation($id: ID!) { cancelRun(id: $id) { status } }', { id: started.id });
    expect(cancelled.cancelRun.status).toBe('CANCELLED');
    const run = await kit.waitForRun(started.id, 5_000);
    expect(run.status).toBe('CANCELLED');
    expectWellFormedTrace(run.steps);
  });
});
