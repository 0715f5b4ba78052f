/**
 * The baseline of the fan-out benchmark (runs-fanout.ts), in its own
 * process: graphql-ws's own `useServer` on a bare `ws` server, with a
 * schema of exactly the fields the watchers select and a plain async
 * generator per subscriber over an in-memory list of published steps — what
 * a minimal graphql-ws server does (every subscriber's event is executed,
 * serialised and written on its own).
 *
 * It serves the service's own steps (its output for the same run) with the
 * same provider timing: each call is answered DELAY_MS after it starts, and
 * each step is published as long after its call's answer as the service,
 * watched by nobody, took to store and publish it; the next call starts as
 * long after the answer as it did there. Before each measurement the
 * orchestrator sends the timings of the service's most recent unwatched runs;
 * each run replays the one the orchestrator names (a watched run and the
 * unwatched run paired with it the same), jitter included.
 * Nothing is stored. Not meant to be started by hand.
 */
import type { AddressInfo } from 'node:net';
import { buildSchema, type GraphQLField, type GraphQLObjectType } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import { Worker } from 'node:worker_threads';
import { WebSocketServer } from 'ws';
import { TRACE_FIELDS, epochMs, reply, serveRequests, type RunPlan, type RunRecord, type RunTiming } from './runs-fanout-protocol';

type Step = Record<string, unknown> & { sequence: number; kind: string };

interface BaselineRun {
  record: RunRecord;
  steps: Step[];
  waiters: (() => void)[];
}

const schema = buildSchema(`
  type RunStep { sequence: Int! kind: String! round: Int! durationMs: Float! status: String terminationReason: String content: String finishReason: String totalTokens: Int toolName: String toolResult: String toolIsError: Boolean }
  type Query { ok: Boolean }
  type Subscription { runTrace(runId: ID!, afterSequence: Int): RunStep }
`);
const stepFields = (schema.getType('RunStep') as GraphQLObjectType).getFields();
const missing = TRACE_FIELDS.split(' ').filter((field) => !(field in stepFields));
if (missing.length > 0) throw new Error(`the baseline's RunStep lacks ${missing.join(', ')}`);
const runs = new Map<string, BaselineRun>();
const traceField = schema.getSubscriptionType()!.getFields().runTrace as GraphQLField<unknown, unknown>;
traceField.subscribe = (_root: unknown, args: { runId: string }) => trace(args.runId);
traceField.resolve = (step: unknown) => step;

async function* trace(runId: string): AsyncGenerator<Step> {
  const run = runs.get(runId);
  if (!run) throw new Error(`no run ${runId}`);
  let next = 0;
  for (;;) {
    while (next < run.steps.length) {
      const step = run.steps[next++]!;
      yield step;
      if (step.kind === 'END') return;
    }
    await new Promise<void>((resolve) => run.waiters.push(resolve));
  }
}

function publish(run: BaselineRun, step: Step, call: number): void {
  run.steps.push(step);
  run.record.published.push([step.sequence, epochMs(), call]);
  const waiters = run.waiters;
  run.waiters = [];
  for (const wake of waiters) wake();
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Sub-millisecond waits without spending CPU. Node's timers have millisecond
 * steps, so this waits in a worker thread (Atomics.wait takes fractions of a
 * millisecond and sleeps in the kernel), which posts back at the time, less
 * the measured hop from the worker to this thread. (Spinning the event loop
 * until the time, as this baseline once did, kept one core busy for as long
 * as the schedule's waits lasted, in watched and unwatched runs alike, and
 * its deliveries ran inside that spin: their CPU disappeared from the
 * difference that CPU per delivery is made of.)
 */
class Clock {
  private readonly worker = new Worker(
    `const { parentPort } = require('node:worker_threads');
     const { performance } = require('node:perf_hooks');
     const cell = new Int32Array(new SharedArrayBuffer(4));
     parentPort.on('message', ({ id, at }) => {
       const wait = at - (performance.timeOrigin + performance.now());
       if (wait > 0) Atomics.wait(cell, 0, 0, wait);
       parentPort.postMessage(id);
     });`,
    { eval: true },
  );
  private readonly waiting = new Map<number, () => void>();
  private counter = 0;
  /** Median time from the worker's post to this thread's handling, ms. */
  private hop = 0;

  constructor() {
    this.worker.on('message', (id: number) => {
      const wake = this.waiting.get(id);
      this.waiting.delete(id);
      wake?.();
    });
    this.worker.unref();
  }

  /** Measures the hop: the worker is asked for times a little ahead, and the lateness of its answers is taken. */
  async calibrate(): Promise<void> {
    const late: number[] = [];
    for (let i = 0; i < 60; i += 1) {
      const at = epochMs() + 2;
      await this.post(at);
      late.push(epochMs() - at);
    }
    late.sort((a, b) => a - b);
    this.hop = late[Math.floor(late.length / 2)]!;
  }

  /** Resolves at `at` (epoch ms), or at once when it has passed. */
  until(at: number): Promise<void> {
    return epochMs() >= at ? Promise.resolve() : this.post(at - this.hop);
  }

  private post(at: number): Promise<void> {
    const id = (this.counter += 1);
    return new Promise<void>((resolve) => {
      this.waiting.set(id, resolve);
      this.worker.postMessage({ id, at });
    });
  }
}

const clock = new Clock();
const until = (at: number) => clock.until(at);

async function drive(run: BaselineRun, plan: RunPlan, timing: RunTiming): Promise<void> {
  const live = (plan.steps as Step[]).filter((step) => step.sequence > plan.replaySequence);
  const calls = timing.callStarts.length + 1;
  let next = 0;
  let startedAt = epochMs();
  for (let call = 0; call < calls; call += 1) {
    const dueAt = startedAt + plan.delayMs;
    run.record.calls.push({ startedAt, dueAt });
    await sleep(plan.delayMs);
    while (next < live.length && timing.offsets[next]![0] === call) {
      await until(dueAt + timing.offsets[next]![1]);
      publish(run, live[next]!, call);
      next += 1;
    }
    if (call + 1 < calls) {
      await until(dueAt + timing.callStarts[call]!);
      startedAt = epochMs();
    }
  }
}

function main(): void {
  const wsServer = new WebSocketServer({ port: 0, host: '127.0.0.1', path: '/graphql' });
  useServer({ schema }, wsServer);
  let plan: RunPlan | null = null;
  let counter = 0;
  let opened = 0;
  serveRequests(async (request) => {
    switch (request.type) {
      case 'plan':
        plan = request.plan;
        return reply({ type: 'planned' });
      case 'prepare': {
        if (!plan) throw new Error('no plan yet');
        const runIds: string[] = [];
        for (let i = 0; i < request.count; i += 1) {
          const runId = `baseline-run-${(counter += 1)}`;
          const run: BaselineRun = { record: { runId, calls: [], published: [] }, steps: [], waiters: [] };
          for (const step of plan.steps as Step[]) if (step.sequence <= plan.replaySequence) publish(run, step, -1);
          runs.set(runId, run);
          runIds.push(runId);
        }
        return reply({ type: 'prepared', runIds, replaySequence: plan.replaySequence });
      }
      case 'open': {
        const run = runs.get(request.runId);
        if (!run || !plan) throw new Error(`no prepared run ${request.runId}`);
        await drive(run, plan, plan.timings[(request.timing ?? (opened += 1)) % plan.timings.length]!);
        // Watchers still being served keep their own reference to the run.
        runs.delete(request.runId);
        return reply({ type: 'ended', record: run.record });
      }
      default:
        throw new Error(`the baseline does not answer ${request.type}`);
    }
  });
  wsServer.once('listening', () => void clock.calibrate().then(() => reply({ type: 'ready', wsUrl: `ws://127.0.0.1:${(wsServer.address() as AddressInfo).port}/graphql`, token: 'none' })));
}

main();
