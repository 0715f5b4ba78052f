/**
 * Runs a process left unfinished: at start the server closes every run still
 * QUEUED or RUNNING as FAILED, reason `interrupted`, with an END step after
 * the steps it had stored; a graceful stop closes in-flight runs itself.
 */
import crypto from 'node:crypto';
import type { LoopStep } from '../../src/runs/engine/loop-step';
import { createTestDatabase, testDialects } from '../support/databases';
import { collect, startTestServer, type TestServer } from '../support/server';
import { RunKit, expectWellFormedTrace } from './run-kit';
import { gate, withTimeout } from './scripted-provider';

describe.each(testDialects)('interrupted runs (%s)', (dialect) => {
  let ts: TestServer | null = null;
  const kit = new RunKit(() => ts!);

  afterEach(async () => {
    await ts?.stop();
    ts = null;
    await kit.closeProviders();
  });

  test('a run left RUNNING (and one left QUEUED) by a process that died is FAILED interrupted with an END step after restart', async () => {
    const database = await createTestDatabase(dialect);
    ts = await startTestServer(dialect, { database, keepDatabase: true });
    const setup = await kit.setup();

    // A finished run, which recovery must leave alone.
    setup.provider.script({ text: 'done', usage: { prompt: 1, completion: 1 } });
    const finished = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
    expect(finished.status).toBe('COMPLETED');

    // What a process that died in the middle of round 1 leaves behind.
    const store = ts.server.services.runs.store;
    const running = await store.createRun({ uuid: crypto.randomUUID(), configurationUid: setup.configurationUid, configurationIdentifier: setup.configuration });
    await store.markRunning(running.uid);
    const context = { kind: 'context', round: 1, durationMs: 0, contextBudget: { window: 8192, reserve: 1000, safety: 246, budget: 6946, estimate: 20, droppedTurns: 0, calibration: 1, fits: true } } as LoopStep;
    const request = { kind: 'request', round: 1, durationMs: 0, messagesSent: [{ role: 'user', content: 'x' }], toolsOffered: [] } as LoopStep;
    await store.appendStep(running.uid, 1, context);
    await store.appendStep(running.uid, 2, request);
    const queued = await store.createRun({ uuid: crypto.randomUUID(), configurationUid: setup.configurationUid, configurationIdentifier: setup.configuration });
    expect((await kit.run(running.uuid)).status).toBe('RUNNING');

    await ts.stop();
    ts = await startTestServer(dialect, { database });

    const recovered = await kit.run(running.uuid);
    expect(recovered).toMatchObject({ status: 'FAILED', terminationReason: 'interrupted' });
    expect(recovered.error).toEqual(expect.any(String));
    expectWellFormedTrace(recovered.steps);
    expect(recovered.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'END']);
    expect(recovered.steps[2]).toMatchObject({ sequence: 3, status: 'FAILED', terminationReason: 'interrupted', error: recovered.error });
    expect(recovered.finishedAt).not.toBeNull();

    const neverStarted = await kit.run(queued.uuid);
    expect(neverStarted).toMatchObject({ status: 'FAILED', terminationReason: 'interrupted' });
    expect(neverStarted.steps.map((s) => [s.sequence, s.kind])).toEqual([[1, 'END']]);

    const untouched = await kit.run(finished.id);
    expect(untouched.status).toBe('COMPLETED');
    expect(untouched.steps).toEqual(finished.steps);

    // A watcher of the recovered run gets the whole trace and its END.
    const watcher = collect<{ runTrace: { sequence: number; kind: string } }>(ts.wsClient(), 'subscription($id: ID!) { runTrace(runId: $id) { sequence kind } }', { id: running.uuid });
    await withTimeout(watcher.done, 5_000, 'the trace of the recovered run did not complete');
    expect(watcher.events.map((e) => e.runTrace.sequence)).toEqual([1, 2, 3]);
  });

  test('a server that stops while a slow run is in flight ends it with an END step, and a restart leaves it alone', async () => {
    const database = await createTestDatabase(dialect);
    ts = await startTestServer(dialect, { database, keepDatabase: true });
    const setup = await kit.setup();
    setup.provider.script({ text: 'too late', delayMs: 20_000 });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] });
    await setup.provider.waitForRequest(1);

    const begun = Date.now();
    await ts.stop();
    expect(Date.now() - begun).toBeLessThan(5_000);
    ts = await startTestServer(dialect, { database });

    const run = await kit.run(started.id);
    expect(['CANCELLED', 'FAILED']).toContain(run.status);
    expectWellFormedTrace(run.steps);
    expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'END']);
  });
});

describe.each(testDialects)('several instances on one database (%s)', (dialect) => {
  test('an instance that starts while another runs a run leaves that run alone', async () => {
    const database = await createTestDatabase(dialect);
    const first = await startTestServer(dialect, { database, keepDatabase: true });
    let second: TestServer | null = null;
    const kit = new RunKit(() => first);
    try {
      const setup = await kit.setup();
      const { promise, open } = gate();
      setup.provider.script({ text: 'Finished on the first instance.', usage: { prompt: 1, completion: 1 }, gate: promise });
      const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] });
      await setup.provider.waitForRequest(1);

      // A second instance (scale-out, rolling deploy) starts on the same database.
      second = await startTestServer(dialect, { database, keepDatabase: true });
      open();
      const run = await kit.waitForRun(started.id);

      expect(run).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed', finalContent: 'Finished on the first instance.' });
      expectWellFormedTrace(run.steps);
    } finally {
      await second?.stop();
      await first.stop();
      await kit.closeProviders();
      await database.drop();
    }
  });
});
