/**
 * Watching runs over graphql-ws: runTrace replays stored steps then streams
 * live ones without gap or duplicate, ends after END; runDeltas forwards
 * streamed output; the socket refuses callers without a valid token.
 */
import type { Client } from 'graphql-ws';
import { testDialects } from '../support/databases';
import { collect, startTestServer, type TestServer } from '../support/server';
import { RunKit, expectWellFormedTrace, sleep } from './run-kit';
import { gate, withTimeout } from './scripted-provider';

const TRACE = `subscription($runId: ID!, $afterSequence: Int) {
  runTrace(runId: $runId, afterSequence: $afterSequence) { sequence kind round status terminationReason content toolName toolResult }
}`;
const DELTAS = 'subscription($runId: ID!) { runDeltas(runId: $runId) { kind text round } }';

interface TraceEvent {
  runTrace: { sequence: number; kind: string; round: number; status: string | null; terminationReason: string | null; content: string | null; toolName: string | null; toolResult: string | null };
}
interface DeltaEvent {
  runDeltas: { kind: string; text: string; round: number };
}

const sequences = (events: TraceEvent[]) => events.map((e) => e.runTrace.sequence);

async function until(condition: () => boolean, what: string, timeoutMs = 5_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!condition()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await sleep(10);
  }
}

describe.each(testDialects)('run traces over graphql-ws (%s)', (dialect) => {
  let ts: TestServer;
  const kit = new RunKit(() => ts);

  beforeAll(async () => {
    ts = await startTestServer(dialect);
  });
  afterAll(async () => {
    await ts?.stop();
    await kit.closeProviders();
  });

  /** A finished two-round run (tool call, then answer): 8 steps. */
  async function finishedRun(): Promise<{ id: string; steps: { sequence: number; kind: string }[] }> {
    const setup = await kit.setup();
    setup.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression: '2 * 21' } }], usage: { prompt: 5, completion: 5 } },
      { text: 'It is 42.', usage: { prompt: 5, completion: 5 } },
    );
    const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: ['calculator'] })).id);
    expect(run.status).toBe('COMPLETED');
    expect(run.steps).toHaveLength(8);
    return run;
  }

  test('a subscriber that joins after END gets the replay and END, then the subscription completes', async () => {
    const run = await finishedRun();
    const late = collect<TraceEvent>(ts.wsClient(), TRACE, { runId: run.id });
    await withTimeout(late.done, 5_000, 'the late subscription did not complete');
    expect(late.errors).toEqual([]);
    expect(sequences(late.events)).toEqual(run.steps.map((s) => s.sequence));
    expect(late.events.map((e) => e.runTrace.kind)).toEqual(run.steps.map((s) => s.kind));
    expect(late.events.at(-1)!.runTrace).toMatchObject({ kind: 'END', status: 'COMPLETED', terminationReason: 'completed', content: 'It is 42.' });
    expectWellFormedTrace(late.events.map((e) => e.runTrace));
  });

  test('afterSequence resumes after the given step', async () => {
    const run = await finishedRun();
    const resumed = collect<TraceEvent>(ts.wsClient(), TRACE, { runId: run.id, afterSequence: 5 });
    await withTimeout(resumed.done, 5_000, 'the resumed subscription did not complete');
    expect(resumed.errors).toEqual([]);
    expect(sequences(resumed.events)).toEqual([6, 7, 8]);
    expect(resumed.events.at(-1)!.runTrace.kind).toBe('END');
  });

  test('resubscribing after END with the END step\'s sequence completes at once, without events', async () => {
    const run = await finishedRun();
    // A client that saw END but lost the socket before `complete` resumes from its last sequence.
    const resumed = collect<TraceEvent>(ts.wsClient(), TRACE, { runId: run.id, afterSequence: run.steps.length });
    await withTimeout(resumed.done, 3_000, 'a subscription after the END step did not complete');
    expect(resumed.errors).toEqual([]);
    expect(resumed.events).toEqual([]);
  });

  test('20 concurrent subscribers of a live run all see the same complete sequence', async () => {
    const setup = await kit.setup();
    const first = gate();
    setup.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression: '6 * 7' } }], usage: { prompt: 5, completion: 5 }, gate: first.promise },
      { text: 'Forty-two, streamed in pieces.', usage: { prompt: 5, completion: 5 }, chunkDelayMs: 5 },
    );
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: ['calculator'] });
    await setup.provider.waitForRequest(1); // CONTEXT and REQUEST of round 1 are stored

    const watchers = Array.from({ length: 20 }, () => collect<TraceEvent>(ts.wsClient(), TRACE, { runId: started.id }));
    // Each has replayed the stored steps, so its live listener is attached: everything after this is live.
    await until(() => watchers.every((w) => w.events.length >= 2), 'every watcher to replay the stored steps');
    first.open();
    await withTimeout(Promise.all(watchers.map((w) => w.done)), 15_000, 'not every watcher completed');

    const stored = (await kit.run(started.id)).steps;
    expect(stored.at(-1)!.kind).toBe('END');
    for (const watcher of watchers) {
      expect(watcher.errors).toEqual([]);
      expect(sequences(watcher.events)).toEqual(stored.map((s) => s.sequence));
      expect(watcher.events.map((e) => e.runTrace.kind)).toEqual(stored.map((s) => s.kind));
    }
  });

  test('watchers of one live run with different selections each get their own shape (events are shared only between identical operations)', async () => {
    const started = await kit.startHeldToolRun('2 + 2', 'Four.');
    const NARROW = 'subscription($runId: ID!) { runTrace(runId: $runId) { sequence } }';
    const ALIASED = 'subscription($runId: ID!) { runTrace(runId: $runId) { n: sequence what: kind } }';
    const full = [collect<TraceEvent>(ts.wsClient(), TRACE, { runId: started.id }), collect<TraceEvent>(ts.wsClient(), TRACE, { runId: started.id })];
    const narrow = collect<{ runTrace: Record<string, unknown> }>(ts.wsClient(), NARROW, { runId: started.id });
    const aliased = collect<{ runTrace: Record<string, unknown> }>(ts.wsClient(), ALIASED, { runId: started.id });
    const viewer = collect<TraceEvent>(ts.wsClient(await ts.tokenFor('VIEWER')), TRACE, { runId: started.id });
    const all = [...full, narrow, aliased, viewer];
    await until(() => all.every((w) => w.events.length >= 2), 'every watcher to replay the stored steps');
    started.release();
    await withTimeout(Promise.all(all.map((w) => w.done)), 15_000, 'not every watcher completed');

    const stored = (await kit.run(started.id)).steps;
    for (const watcher of all) expect(watcher.errors).toEqual([]);
    expect(full[0]!.events).toEqual(full[1]!.events);
    expect(viewer.events).toEqual(full[0]!.events);
    expect(narrow.events).toEqual(stored.map((step) => ({ runTrace: { sequence: step.sequence } })));
    expect(aliased.events).toEqual(stored.map((step) => ({ runTrace: { n: step.sequence, what: step.kind } })));
  });

  test('a watcher that leaves while the run waits for its model releases its listener at once', async () => {
    const setup = await kit.setup();
    const first = gate();
    setup.provider.script({ text: 'Done.', usage: { prompt: 5, completion: 5 }, gate: first.promise });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x' });
    await setup.provider.waitForRequest(1);
    const idle = ts.server.services.runReader.watcherCount(started.id);
    const client = ts.wsClient();
    const traceWatcher = collect<TraceEvent>(client, TRACE, { runId: started.id });
    collect<DeltaEvent>(client, DELTAS, { runId: started.id });
    await until(() => traceWatcher.events.length >= 2 && ts.server.services.runReader.watcherCount(started.id) === idle + 2, 'both watchers to listen');
    await client.dispose();
    // No step arrives while the model is held: the listeners must go without one.
    await until(() => ts.server.services.runReader.watcherCount(started.id) === idle, 'the listeners to be released', 2_000);
    first.open();
    expect((await kit.waitForRun(started.id)).status).toBe('COMPLETED');
  });

  test('a client that disconnects mid-run and resubscribes from its last sequence sees no gap and no duplicate', async () => {
    const setup = await kit.setup();
    const first = gate();
    const second = gate();
    setup.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression: '1 + 2' } }], usage: { prompt: 5, completion: 5 }, gate: first.promise },
      { text: 'Three.', usage: { prompt: 5, completion: 5 }, gate: second.promise },
    );
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: ['calculator'] });
    await setup.provider.waitForRequest(1);

    const firstClient: Client = ts.wsClient();
    const before = collect<TraceEvent>(firstClient, TRACE, { runId: started.id });
    await until(() => before.events.length >= 2, 'the first watcher to see the stored steps');
    await firstClient.dispose();
    const seen = sequences(before.events);
    const last = seen.at(-1)!;

    // While nobody watches, round 1 finishes and round 2 starts.
    first.open();
    await setup.provider.waitForRequest(2);

    const after = collect<TraceEvent>(ts.wsClient(), TRACE, { runId: started.id, afterSequence: last });
    await until(() => after.events.length >= 1, 'the second watcher to replay what it missed');
    second.open();
    await withTimeout(after.done, 10_000, 'the resumed subscription did not complete');
    expect(after.errors).toEqual([]);

    const stored = (await kit.run(started.id)).steps;
    const combined = [...seen, ...sequences(after.events)];
    expect(combined).toEqual(stored.map((s) => s.sequence));
    expect(new Set(combined).size).toBe(combined.length);
    expect(stored.at(-1)!.kind).toBe('END');
  });

  test('runDeltas delivers the content and thinking deltas of a streamed answer, then completes', async () => {
    const setup = await kit.setup();
    const held = gate();
    const text = 'Hello, streaming world!';
    setup.provider.script({ text, thinking: 'Let me think.', contentChunks: ['Hello', ', ', 'streaming', ' world!'], chunkDelayMs: 10, usage: { prompt: 3, completion: 4 }, gate: held.promise });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] });
    await setup.provider.waitForRequest(1);

    const deltas = collect<DeltaEvent>(ts.wsClient(), DELTAS, { runId: started.id });
    // The delta stream keeps no history: give the subscription time to attach before the answer flows.
    await sleep(300);
    held.open();
    await withTimeout(deltas.done, 10_000, 'the delta subscription did not complete');

    expect(deltas.errors).toEqual([]);
    const content = deltas.events.filter((e) => e.runDeltas.kind === 'content');
    expect(content.map((e) => e.runDeltas.text)).toEqual(['Hello', ', ', 'streaming', ' world!']);
    expect(deltas.events.filter((e) => e.runDeltas.kind === 'thinking').map((e) => e.runDeltas.text).join('')).toBe('Let me think.');
    expect(deltas.events.every((e) => e.runDeltas.round === 1)).toBe(true);

    const run = await kit.waitForRun(started.id);
    const llm = run.steps.find((s) => s.kind === 'LLM')!;
    expect(llm.content).toBe(text);
    expect(llm.thinking).toBe('Let me think.');
    expect(run.finalContent).toBe(text);
  });

  test('a WebSocket without a token or with an invalid one is closed with 4403', async () => {
    for (const token of [null, 'not-a-valid-token']) {
      const refused = collect<TraceEvent>(ts.wsClient(token), TRACE, { runId: '00000000-0000-4000-8000-000000000000' });
      await withTimeout(refused.done, 5_000, 'the refused socket did not end the subscription');
      expect(refused.events).toEqual([]);
      expect(refused.errors).toHaveLength(1);
      expect((refused.errors[0] as { code?: number }).code).toBe(4403);
    }
  });

  test('EDITOR and VIEWER tokens can subscribe', async () => {
    const run = await finishedRun();
    for (const role of ['EDITOR', 'VIEWER'] as const) {
      const watcher = collect<TraceEvent>(ts.wsClient(await ts.tokenFor(role)), TRACE, { runId: run.id });
      await withTimeout(watcher.done, 5_000, `the ${role} subscription did not complete`);
      expect(watcher.errors).toEqual([]);
      expect(sequences(watcher.events)).toEqual(run.steps.map((s) => s.sequence));
    }
  });

  test('runTrace of an unknown run is refused with NOT_FOUND', async () => {
    const watcher = collect<TraceEvent>(ts.wsClient(), TRACE, { runId: '00000000-0000-4000-8000-000000000000' });
    await withTimeout(watcher.done, 5_000, 'the subscription did not end');
    expect(watcher.events).toEqual([]);
    // graphql-ws hands the sink the list of GraphQL errors of the operation.
    const reported = watcher.errors.flat() as { message: string; extensions?: { code?: string } }[];
    expect(reported).toHaveLength(1);
    expect(reported[0]!.message).toContain('No run with id');
    // api.md: every refused request carries extensions.code — over graphql-ws too.
    expect(reported[0]).toMatchObject({ extensions: { code: 'NOT_FOUND' } });
  });
});
