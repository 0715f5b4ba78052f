/**
 * Every run ends: whatever the provider reports and whatever the database
 * does, a run reaches a stored END, its trace has no gap, and its watchers
 * are not left waiting.
 */
import crypto from 'node:crypto';
import { createTestDatabase, testDialects, type TestDialect } from '../support/databases';
import { collect, startTestServer, type TestServer } from '../support/server';
import { RunKit, expectWellFormedTrace } from './run-kit';
import { gate, withTimeout } from './scripted-provider';

const TRACE = 'subscription($id: ID!, $after: Int) { runTrace(runId: $id, afterSequence: $after) { sequence kind status } }';
type TraceEvent = { runTrace: { sequence: number; kind: string; status: string | null } };

describe.each(testDialects)('every run ends (%s)', (dialect) => {
  let ts: TestServer | null = null;
  const kit = new RunKit(() => ts!);

  afterEach(async () => {
    await ts?.stop();
    ts = null;
    await kit.closeProviders();
  });

  test('a provider that reports 5e9 completion tokens: the run completes with clamped totals and lists with the others', async () => {
    ts = await startTestServer(dialect);
    const setup = await kit.setup({ costInput: 100, costOutput: 100 });
    setup.provider.script({ text: 'huge', usage: { prompt: 5, completion: 5e9 } });
    const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
    expect(run).toMatchObject({ status: 'COMPLETED', promptTokens: 5, completionTokens: 100_000_000, totalTokens: 100_000_005 });
    expectWellFormedTrace(run.steps);
    const listed = await ts.gql<{ runs: { id: string; totalTokens: number }[] }>('{ runs(limit: 10) { id totalTokens } }');
    expect(listed.errors).toBeUndefined();
    expect(listed.data?.runs.map((r) => r.id)).toContain(run.id);
  });

  test('a cost far beyond decimal(10,6): the run completes with a stored END, the column holds its largest value, the API the exact cost', async () => {
    ts = await startTestServer(dialect);
    const setup = await kit.setup({ costInput: 2_000_000_000, costOutput: 2_000_000_000 });
    setup.provider.script({ text: 'expensive', usage: { prompt: 100_000_000, completion: 100_000_000 } });
    const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
    expect(run).toMatchObject({ status: 'COMPLETED', finalContent: 'expensive', estimatedCost: 4_000_000_000 });
    expect(run.steps.map((step) => step.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'END']);
    const [row] = (await ts.database.query('SELECT status, estimated_cost FROM tx_nrllm_agentrun WHERE uuid = ?', [run.id])) as { status: string; estimated_cost: unknown }[];
    expect({ status: row.status, cost: Number(row.estimated_cost) }).toEqual({ status: 'completed', cost: 9999.999999 });
  });

  test('a run row holding 3e9 tokens (written by another program) does not break the runs list', async () => {
    ts = await startTestServer(dialect);
    const setup = await kit.setup();
    setup.provider.script({ text: 'a', usage: { prompt: 1, completion: 1 } }, { text: 'b', usage: { prompt: 1, completion: 1 } });
    const first = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
    const second = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
    await ts.database.query('UPDATE tx_nrllm_agentrun SET total_tokens = 3000000000, total_completion_tokens = 3000000000 WHERE uuid = ?', [first.id]).catch(async () => {
      // MySQL's signed int refuses it: a row can only hold the largest int there.
      await ts!.database.query('UPDATE tx_nrllm_agentrun SET total_tokens = 2147483647 WHERE uuid = ?', [first.id]);
    });
    const listed = await ts.gql<{ runs: { id: string; totalTokens: number }[] }>('{ runs(limit: 10) { id totalTokens } }');
    expect(listed.errors).toBeUndefined();
    expect(listed.data?.runs.map((r) => r.id).sort()).toEqual([first.id, second.id].sort());
    expect(listed.data?.runs.find((r) => r.id === first.id)?.totalTokens).toBe(2147483647);
  });

  test('the event table briefly unavailable: the run still completes with a gap-free trace', async () => {
    ts = await startTestServer(dialect, { server: { runs: { storeRetryDelaysMs: [100, 500, 2_000] } } });
    const setup = await kit.setup();
    const held = gate();
    setup.provider.script({ text: 'stored after all', usage: { prompt: 1, completion: 1 }, gate: held.promise });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] });
    await setup.provider.waitForRequest(1);
    const rename = (from: string, to: string) =>
      ts!.database.query(dialect === 'mysql' ? `RENAME TABLE ${from} TO ${to}` : `ALTER TABLE ${from} RENAME TO ${to}`);
    await rename('tx_nrllm_agentrun_event', 'tx_nrllm_agentrun_event_away');
    held.open();
    await new Promise((resolve) => setTimeout(resolve, 300));
    await rename('tx_nrllm_agentrun_event_away', 'tx_nrllm_agentrun_event');
    const run = await kit.waitForRun(started.id);
    expect(run).toMatchObject({ status: 'COMPLETED', finalContent: 'stored after all' });
    expectWellFormedTrace(run.steps);
    expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'END']);
  });

  test('a step the database refuses for good ends the run FAILED with a stored END and no gap', async () => {
    ts = await startTestServer(dialect, { server: { runs: { storeRetryDelaysMs: [20, 20] } } });
    const setup = await kit.setup();
    const held = gate();
    setup.provider.script({ text: 'never stored', usage: { prompt: 1, completion: 1 }, gate: held.promise });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] });
    await setup.provider.waitForRequest(1);
    // Only LLM steps are refused (a column check of the kind), for as long as the test wants.
    const watcher = collect<TraceEvent>(ts.wsClient(), TRACE, { id: started.id, after: 0 });
    await ts.database.query(
      dialect === 'mysql'
        ? "ALTER TABLE tx_nrllm_agentrun_event ADD CONSTRAINT no_llm CHECK (kind <> 'llm')"
        : "CREATE TRIGGER no_llm BEFORE INSERT ON tx_nrllm_agentrun_event WHEN NEW.kind = 'llm' BEGIN SELECT RAISE(ABORT, 'refused'); END",
    );
    held.open();
    const run = await kit.waitForRun(started.id);
    expect(run).toMatchObject({ status: 'FAILED', terminationReason: 'error' });
    expectWellFormedTrace(run.steps);
    expect(run.steps.map((s) => [s.sequence, s.kind])).toEqual([[1, 'CONTEXT'], [2, 'REQUEST'], [3, 'END']]);
    await withTimeout(watcher.done, 5_000, 'the watcher did not receive the END');
    expect(watcher.events.map((e) => e.runTrace.sequence)).toEqual([1, 2, 3]);
  });

  test('a run whose instance died is cancelled at once', async () => {
    ts = await startTestServer(dialect);
    const setup = await kit.setup();
    const store = ts.server.services.runs.store;
    // One without a lease, one whose owner stopped renewing it long ago.
    const orphan = await store.createRun({ uuid: crypto.randomUUID(), configurationUid: setup.configurationUid, configurationIdentifier: setup.configuration });
    await store.markRunning(orphan.uid);
    const stale = await store.createRun({ uuid: crypto.randomUUID(), configurationUid: setup.configurationUid, configurationIdentifier: setup.configuration }, 'a-dead-instance');
    await ts.database.query('UPDATE promptwire_run_lease SET heartbeat_at = 1 WHERE run_uid = ?', [stale.uid]);
    for (const uuid of [orphan.uuid, stale.uuid]) {
      const begun = Date.now();
      const cancelled = await ts.ok<{ cancelRun: { status: string } }>('mutation($id: ID!) { cancelRun(id: $id) { status } }', { id: uuid });
      expect(cancelled.cancelRun.status).toBe('CANCELLED');
      expect(Date.now() - begun).toBeLessThan(2_000);
      const run = await kit.run(uuid);
      expect(run).toMatchObject({ status: 'CANCELLED', terminationReason: 'cancelled' });
      expect(run.steps.map((s) => [s.sequence, s.kind])).toEqual([[1, 'END']]);
    }
  });

  test('runTrace from beyond the last sequence completes, for a live run and a finished one', async () => {
    ts = await startTestServer(dialect);
    const held = await kit.startHeldToolRun();
    const live = collect<TraceEvent>(ts.wsClient(), TRACE, { id: held.id, after: 50 });
    held.release();
    await withTimeout(live.done, 10_000, 'a trace asked from beyond the end never completed');
    expect(live.events).toEqual([]);
    expect(live.errors).toEqual([]);
    const finished = collect<TraceEvent>(ts.wsClient(), TRACE, { id: held.id, after: 50 });
    await withTimeout(finished.done, 5_000, 'a trace of a finished run asked from beyond its end never completed');
    expect(finished.events).toEqual([]);
  });

  test('a watcher whose bus messages were lost reads the steps and the END from the table', async () => {
    ts = await startTestServer(dialect, { server: { runs: { watcherRecheckMs: 200 } } });
    const setup = await kit.setup();
    const store = ts.server.services.runs.store;
    // A run another instance executes; its messages never reach this instance's bus.
    const run = await store.createRun({ uuid: crypto.randomUUID(), configurationUid: setup.configurationUid, configurationIdentifier: setup.configuration }, 'another-instance');
    await store.markRunning(run.uid);
    const watcher = collect<TraceEvent>(ts.wsClient(), TRACE, { id: run.uuid, after: 0 });
    await new Promise((resolve) => setTimeout(resolve, 100));
    await store.appendStep(run.uid, 1, { kind: 'context', round: 1, durationMs: 0, contextBudget: { window: 8192, reserve: 1000, safety: 246, budget: 6946, estimate: 9, droppedTurns: 0, calibration: 1, fits: true } });
    const end = { kind: 'end', round: 1, durationMs: 0, status: 'CANCELLED', terminationReason: 'cancelled', iterations: 0, truncated: false, finalContent: null, promptTokens: 0, completionTokens: 0, totalTokens: 0, estimatedCost: null, error: null, errorClass: null, dryRun: false } as const;
    await store.closeIfOpen(run.uid, 2, end);
    await withTimeout(watcher.done, 5_000, 'the watcher never read the steps from the table');
    expect(watcher.events.map((e) => [e.runTrace.sequence, e.runTrace.kind])).toEqual([[1, 'CONTEXT'], [2, 'END']]);
  });

  test('on stop, live watchers receive the END of their cancelled run before their socket closes', async () => {
    const database = await createTestDatabase(dialect);
    ts = await startTestServer(dialect, { database });
    const held = await kit.startHeldToolRun();
    const client = ts.wsClient();
    const watcher = collect<TraceEvent>(client, TRACE, { id: held.id, after: 0 });
    const deadline = Date.now() + 5_000;
    while (watcher.events.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
    await ts.server.stop();
    await withTimeout(watcher.done, 5_000, 'the watcher was not closed');
    expect(watcher.events.map((e) => e.runTrace.kind)).toEqual(['CONTEXT', 'REQUEST', 'END']);
    expect(watcher.events[2]?.runTrace.status).toBe('CANCELLED');
    held.release();
    await client.dispose();
    await database.drop();
    ts = null;
  });

  test("the provider's apiTimeout bounds a run's silent provider call", async () => {
    ts = await startTestServer(dialect);
    const setup = await kit.setup({ apiTimeout: 1 });
    setup.provider.script({ text: 'too late', delayMs: 8_000 });
    const begun = Date.now();
    const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
    expect(run).toMatchObject({ status: 'FAILED', terminationReason: 'provider_failed' });
    expect(run.error).toContain('timed out after 1s');
    expect(Date.now() - begun).toBeLessThan(6_000);
  });
});

// MySQL only; without TEST_MYSQL_URL the block is listed as skipped (describe.each refuses an empty table).
const overLimitDialects = testDialects.filter((d) => d === 'mysql');
(overLimitDialects.length > 0 ? describe.each(overLimitDialects) : describe.skip.each<TestDialect>(['mysql']))('answers over the database limit (%s)', (dialect) => {
  test("a 20 MB answer over MySQL's max_allowed_packet ends the run FAILED with a stored END", async () => {
    const ts = await startTestServer(dialect, { env: { PROVIDER_MAX_RESPONSE_BYTES: String(64 * 1024 * 1024) }, server: { runs: { storeRetryDelaysMs: [20] } } });
    const kit = new RunKit(() => ts);
    try {
      const setup = await kit.setup();
      setup.provider.script({ text: 'x'.repeat(20 * 1024 * 1024), usage: { prompt: 1, completion: 1 }, contentChunks: ['x'.repeat(10 * 1024 * 1024), 'x'.repeat(10 * 1024 * 1024)] });
      const id = (await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id;
      // The server is busy with 20 MB for a while: a poll whose kept-alive connection it closed meanwhile is asked again.
      let run: Awaited<ReturnType<RunKit['waitForRun']>> | null = null;
      for (let attempt = 0; run === null; attempt += 1) {
        run = await kit.waitForRun(id, 100_000).catch((error: unknown) => {
          if (attempt >= 5 || !String(error).includes('fetch failed')) throw error;
          return null;
        });
      }
      expect(run.status).toBe('FAILED');
      expectWellFormedTrace(run.steps);
      expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'END']);
    } finally {
      await ts.stop();
      await kit.closeProviders();
    }
  }, 120_000);
});
