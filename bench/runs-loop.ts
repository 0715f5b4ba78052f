/**
 * Agent-loop overhead per round against a zero-latency provider.
 *
 * The real server runs in this process with the scripted adapter swapped in
 * (options.runs.adapterFactory): the model asks for one `calculator` call in
 * each of the first ROUNDS−1 rounds and answers with text in the last, so a
 * run of 5 rounds stores 20 steps (4 × CONTEXT REQUEST LLM TOOL, then
 * CONTEXT REQUEST LLM, END) and ends COMPLETED/completed. Runs are started one
 * after the other with RunService.start (no HTTP: that is not the loop).
 * Each dialect is measured twice, on a fresh database each time: with
 * `stream: false` (adapter.chat) and `stream: true` (adapter.stream, content
 * deltas published on the bus as well).
 *
 * Definition of "loop time per round" (what the targets apply to):
 *
 *     loop time of a run = t(END published) − t(start() resolved) − provider time
 *     loop time per round = loop time of a run / ROUNDS
 *
 *   - t(start() resolved): `await runs.start(...)` returned (validation,
 *     configuration lookups and the QUEUED insert are done; they are reported
 *     apart as "start()").
 *   - t(END published): a listener this benchmark subscribes to the server's
 *     in-process TraceBus for the run receives the END step (the bus calls
 *     listeners synchronously inside publish).
 *   - provider time: the time spent inside adapter.chat (or from the start to
 *     the end of adapter.stream), measured by a wrapper around the scripted
 *     adapter (including the fake's own request copy).
 *   So it covers: the setImmediate hop, markRunning, assembly, context
 *   fitting, request snapshots, tool execution, 20 step inserts (END in a
 *   transaction with the run row and the run's lease), JSON encoding and 20
 *   publishes.
 *
 * "per step" is the time between two consecutive publishes of the same run
 * (for an LLM step minus the provider call it waited for): one step's build,
 * persist and publish.
 *
 * Baseline, measured in the same process on the same database, one replay
 * after each measured run (interleaved, so both see the same machine load):
 * that run's persistence done again by hand with the raw driver
 * (better-sqlite3 / mysql2, no TypeORM, no loop): one UPDATE of the run row
 * (markRunning), one INSERT per step with the very payloads the run stored,
 * the END INSERT + run-row UPDATE in one transaction, and a publish of each
 * step to one in-process listener. Baseline per round = one replay / ROUNDS.
 * The ratio (loop / baseline, at p50) is the figure that carries to another
 * machine.
 *
 * Targets: loop time per round p50 < 2 ms on SQLite, < 5 ms on MySQL.
 *
 * Run: `npx tsc -p tsconfig.build.json && NODE_ENV=production node dist/bench/runs-loop.js`
 * (BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306/test adds MySQL; BENCH_RUNS, BENCH_ROUNDS override 200 / 5.)
 */
import { performance } from 'node:perf_hooks';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';
import { createScriptedAdapter, type ScriptedReply } from '../test/support/scripted-adapter';
import type { BusListener, StoredStep } from '../src/runs/trace-bus';
import { round, writeResult } from './bench-support';
import {
  BENCH_CALLER,
  benchDialects,
  createScratchDatabase,
  markdownTable,
  seedRunConfiguration,
  startRunsServer,
  stats,
  timedAdapter,
  traceBusOf,
  type ProviderTime,
  withDeadline,
  type BenchDialect,
  type ScratchDatabase,
  type Stats,
} from './runs-support';

const TARGET_MS: Record<BenchDialect, number> = { sqlite: 2, mysql: 5 };
const WARMUP_RUNS = 20;
/** No dialect may take longer than this for its measured runs (the loop stops early and says so). */
const MEASURE_BUDGET_MS = 180_000;
const RUN_TIMEOUT_MS = 10_000;

export interface LoopRow {
  dialect: BenchDialect;
  /** adapter.chat (false) or adapter.stream with deltas published to the bus (true). */
  stream: boolean;
  runs: number;
  rounds: number;
  stepsPerRun: number;
  failures: number;
  failureSamples: string[];
  /** Loop time per round (ms), see the file comment. */
  loopPerRound: Stats;
  target: number;
  /** Time inside adapter.chat per round (ms) — the zero-latency fake. */
  providerPerRound: Stats;
  /** `await runs.start()` (ms), per run. */
  start: Stats;
  /** From start() resolved to the first step published (ms), per run. */
  firstStep: Stats;
  /** Time between consecutive publishes, minus provider time (ms), per step. */
  perStep: Stats;
  perStepByKind: Record<string, Stats>;
  /** Raw-driver replay of the same persistence + publish, per round (ms). */
  baselinePerRound: Stats;
  /** Raw INSERT + publish of one non-END step (ms). */
  baselinePerStep: Stats;
  /** loopPerRound.p50 / baselinePerRound.p50. */
  ratioP50: number;
  ratioP99: number;
}

function script(rounds: number): ScriptedReply[] {
  const replies: ScriptedReply[] = [];
  for (let r = 1; r < rounds; r += 1) {
    replies.push({ toolCalls: [{ name: 'calculator', arguments: { expression: `${r} * 21 + 7` } }], usage: [120 + 30 * r, 14] });
  }
  replies.push({ content: 'All the intermediate results are computed; the final value is 112.', usage: [120 + 30 * rounds, 18] });
  return replies;
}

interface RunSample {
  ok: boolean;
  problem?: string;
  startMs: number;
  /** t(first step published) − t(start() resolved): the setImmediate hop, markRunning, assembly, first CONTEXT. */
  firstStepMs: number;
  loopMs: number;
  providerMs: number;
  gaps: { kind: string; ms: number }[];
  steps: StoredStep[];
  runUid: number;
}

export async function runRunsLoop(runs = Number(process.env.BENCH_RUNS ?? 200), rounds = Number(process.env.BENCH_ROUNDS ?? 5)): Promise<LoopRow[]> {
  if (!Number.isInteger(runs) || runs < 1 || runs > 10_000) throw new Error('BENCH_RUNS must be 1..10000');
  if (!Number.isInteger(rounds) || rounds < 1 || rounds > 20) throw new Error('BENCH_ROUNDS must be 1..20');
  const rows: LoopRow[] = [];
  for (const dialect of benchDialects()) {
    for (const stream of [false, true]) {
      const database = await createScratchDatabase(dialect);
      try {
        rows.push(await measureDialect(database, runs, rounds, stream));
      } finally {
        await database.cleanup();
      }
    }
  }
  writeResult('runs-loop', {
    measuredAt: new Date().toISOString(),
    node: process.version,
    nodeEnv: process.env.NODE_ENV ?? '',
    definition:
      'loop time per round = (t(END published on the TraceBus) − t(RunService.start resolved) − time inside the adapter call) / rounds; baseline per round = raw-driver replay, after each run, of that run\'s persistence (markRunning UPDATE, one INSERT per step, END INSERT+UPDATE in a transaction) plus an in-process publish of each step, / rounds',
    rows,
  });
  return rows;
}

async function measureDialect(database: ScratchDatabase, runs: number, rounds: number, stream: boolean): Promise<LoopRow> {
  const sink: { current: ProviderTime } = { current: { ms: 0, each: [] } };
  const server = await startRunsServer(database, {
    runs: {
      adapterFactory: () => {
        // Called inside start(), once per run: the run's own provider-time record.
        const target = sink.current;
        return timedAdapter(createScriptedAdapter(script(rounds)), () => target);
      },
    },
  });
  try {
    const { services } = server;
    const configuration = await seedRunConfiguration(services);
    const bus = traceBusOf(services.runs);

    const oneRun = async (): Promise<RunSample> => {
      const provider: ProviderTime = { ms: 0, each: [] };
      sink.current = provider;
      const t0 = performance.now();
      const view = await services.runs.start(
        { configuration, prompt: 'Compute the values step by step with the calculator.', tools: ['calculator'], maxRounds: rounds, stream },
        BENCH_CALLER,
      );
      const t1 = performance.now();
      // Subscribed before the run's first step: execute() waits for setImmediate before storing anything.
      const published: { step: StoredStep; t: number }[] = [];
      let resolveEnd!: () => void;
      const ended = new Promise<void>((resolve) => (resolveEnd = resolve));
      const listener: BusListener = (message) => {
        if (message.type !== 'step') return;
        published.push({ step: message.step, t: performance.now() });
        if (message.step.kind === 'end') resolveEnd();
      };
      const unsubscribe = bus.subscribe(view.row.uuid, listener);
      try {
        await withDeadline(ended, RUN_TIMEOUT_MS, `END of run ${view.row.uuid}`);
      } finally {
        unsubscribe();
      }
      const tEnd = published[published.length - 1]?.t ?? performance.now();
      const steps = published.map((p) => p.step);
      const end = steps[steps.length - 1];
      const expected = (rounds - 1) * 4 + 3 + 1;
      let problem: string | undefined;
      if (steps.some((s, i) => s.sequence !== i + 1)) problem = `sequences ${steps.map((s) => s.sequence).join(',')}`;
      else if (steps.length !== expected) problem = `${steps.length} steps, expected ${expected}`;
      else if (end?.status !== 'COMPLETED' || end.terminationReason !== 'completed') problem = `ended ${String(end?.status)}/${String(end?.terminationReason)}: ${String(end?.error)}`;
      const gaps: { kind: string; ms: number }[] = [];
      let call = 0;
      for (let i = 1; i < published.length; i += 1) {
        const current = published[i]!;
        let ms = current.t - published[i - 1]!.t;
        if (current.step.kind === 'llm') ms -= provider.each[call++] ?? 0;
        gaps.push({ kind: current.step.kind, ms });
      }
      return { ok: problem === undefined, problem, startMs: t1 - t0, firstStepMs: (published[0]?.t ?? tEnd) - t1, loopMs: tEnd - t1 - provider.ms, providerMs: provider.ms, gaps, steps, runUid: view.row.uid };
    };

    // Loop runs and baseline replays alternate, so both see the same machine
    // (other processes, database background work) and the ratio stays stable.
    const baseline = await openBaseline(database);
    const samples: RunSample[] = [];
    const baselinePerRun: number[] = [];
    const baselinePerStep: number[] = [];
    try {
      for (let i = 0; i < WARMUP_RUNS; i += 1) {
        const warm = await oneRun();
        if (warm.ok) await baseline.replay(warm.steps, warm.runUid, 1_000_000 + i);
      }
      const deadline = performance.now() + MEASURE_BUDGET_MS;
      while (samples.length < runs && performance.now() < deadline) {
        const sample = await oneRun();
        samples.push(sample);
        if (!sample.ok) continue;
        const replay = await baseline.replay(sample.steps, sample.runUid, 2_000_000 + samples.length);
        baselinePerRun.push(replay.ms);
        baselinePerStep.push(...replay.perStep);
      }
    } finally {
      await baseline.close();
    }
    if (samples.length < runs) console.log(`${database.dialect}: stopped after ${samples.length} of ${runs} runs (time budget ${MEASURE_BUDGET_MS} ms)`);

    const good = samples.filter((s) => s.ok);
    const failures = samples.filter((s) => !s.ok);
    const reference = good[good.length - 1] ?? samples[samples.length - 1];
    if (!reference) throw new Error('no run was measured');
    if (baselinePerRun.length === 0) throw new Error('no baseline replay: every run failed');

    const loopPerRound = stats(good.map((s) => s.loopMs / rounds));
    const baselinePerRound = stats(baselinePerRun.map((ms) => ms / rounds));
    const byKind: Record<string, number[]> = {};
    for (const sample of good) for (const gap of sample.gaps) (byKind[gap.kind] ??= []).push(gap.ms);
    return {
      dialect: database.dialect,
      stream,
      runs: samples.length,
      rounds,
      stepsPerRun: reference.steps.length,
      failures: failures.length,
      failureSamples: failures.slice(0, 5).map((f) => f.problem ?? 'unknown'),
      loopPerRound,
      target: TARGET_MS[database.dialect],
      providerPerRound: stats(good.map((s) => s.providerMs / rounds)),
      start: stats(samples.map((s) => s.startMs)),
      firstStep: stats(good.map((s) => s.firstStepMs)),
      perStep: stats(good.flatMap((s) => s.gaps.map((g) => g.ms))),
      perStepByKind: Object.fromEntries(Object.entries(byKind).map(([kind, values]) => [kind, stats(values)])),
      baselinePerRound,
      baselinePerStep: stats(baselinePerStep),
      ratioP50: round(loopPerRound.p50 / baselinePerRound.p50),
      ratioP99: round(loopPerRound.p99 / baselinePerRound.p99),
    };
  } finally {
    await server.stop();
  }
}

const INSERT_EVENT = 'INSERT INTO tx_nrllm_agentrun_event (run, sequence, kind, round, duration_ms, payload, crdate) VALUES (?, ?, ?, ?, ?, ?, ?)';
const MARK_RUNNING = "UPDATE tx_nrllm_agentrun SET status = 'RUNNING', started_at = ?, tstamp = ? WHERE uid = ?";
const CLOSE_RUN =
  'UPDATE tx_nrllm_agentrun SET status = ?, termination_reason = ?, iterations = ?, truncated = ?, total_prompt_tokens = ?, total_completion_tokens = ?, total_tokens = ?, estimated_cost = ?, error_class = ?, finished_at = ?, tstamp = ? WHERE uid = ?';

interface Baseline {
  /**
   * Stores `steps` again by hand, as the service does for one run: the run row
   * marked RUNNING, one INSERT per step with the same payload text, the END
   * INSERT and the run-row UPDATE in one transaction, each step published to
   * one in-process listener. Events go to `eventRun` (there is no foreign key;
   * the index is the same); the run-row UPDATEs hit the measured run's own row.
   */
  replay(steps: readonly StoredStep[], runUid: number, eventRun: number): Promise<{ ms: number; perStep: number[] }>;
  close(): Promise<void>;
}

function eventValues(step: StoredStep, eventRun: number, now: number): unknown[] {
  const { kind, round: stepRound, durationMs, sequence, ...payload } = step;
  return [eventRun, sequence, kind, stepRound, durationMs, JSON.stringify(payload), now];
}

function closeValues(end: StoredStep, runUid: number, now: number): unknown[] {
  return [end.status, end.terminationReason, end.iterations, end.truncated ? 1 : 0, end.promptTokens, end.completionTokens, end.totalTokens, end.estimatedCost ?? null, end.errorClass ?? '', now, now, runUid];
}

async function openBaseline(database: ScratchDatabase): Promise<Baseline> {
  const listeners = new Set<BusListener>([() => undefined]);
  const publish = (step: StoredStep) => {
    for (const listener of [...listeners]) listener({ type: 'step', step });
  };
  if (database.dialect === 'sqlite') {
    // A second connection to the same file, set up like the server's (WAL is a property of the file).
    const db = new Database(database.file!);
    db.pragma('busy_timeout = 5000');
    db.pragma('synchronous = NORMAL');
    const insert = db.prepare(INSERT_EVENT);
    const markRunning = db.prepare(MARK_RUNNING);
    const closeRun = db.prepare(CLOSE_RUN);
    const closeTransaction = db.transaction((values: unknown[], close: unknown[]) => {
      insert.run(...values);
      closeRun.run(...close);
    });
    return {
      async replay(steps, runUid, eventRun) {
        const perStep: number[] = [];
        const started = performance.now();
        const now = Math.floor(Date.now() / 1000);
        markRunning.run(now, now, runUid);
        for (const step of steps) {
          const stepStarted = performance.now();
          if (step.kind === 'end') closeTransaction(eventValues(step, eventRun, now), closeValues(step, runUid, now));
          else insert.run(...eventValues(step, eventRun, now));
          publish(step);
          if (step.kind !== 'end') perStep.push(performance.now() - stepStarted);
        }
        return { ms: performance.now() - started, perStep };
      },
      async close() {
        db.close();
      },
    };
  }
  const connection = await mysql.createConnection({ uri: database.url, charset: 'utf8mb4_unicode_ci', supportBigNumbers: true });
  return {
    async replay(steps, runUid, eventRun) {
      const perStep: number[] = [];
      const started = performance.now();
      const now = Math.floor(Date.now() / 1000);
      await connection.query(MARK_RUNNING, [now, now, runUid]);
      for (const step of steps) {
        const stepStarted = performance.now();
        if (step.kind === 'end') {
          await connection.query('START TRANSACTION');
          await connection.query(INSERT_EVENT, eventValues(step, eventRun, now));
          await connection.query(CLOSE_RUN, closeValues(step, runUid, now));
          await connection.query('COMMIT');
        } else {
          await connection.query(INSERT_EVENT, eventValues(step, eventRun, now));
        }
        publish(step);
        if (step.kind !== 'end') perStep.push(performance.now() - stepStarted);
      }
      return { ms: performance.now() - started, perStep };
    },
    async close() {
      await connection.end();
    },
  };
}

export function formatRunsLoop(rows: readonly LoopRow[]): string {
  return markdownTable(
    ['database', 'provider call', 'runs × rounds (steps/run)', 'loop/round p50 / p99 ms (target p50)', 'per step p50 / p99 ms', 'start() p50 / p99 ms', 'baseline/round p50 / p99 ms', 'ratio p50 / p99', 'failures'],
    rows.map((row) => [
      row.dialect,
      row.stream ? 'stream' : 'chat',
      `${row.runs} × ${row.rounds} (${row.stepsPerRun})`,
      `${row.loopPerRound.p50} / ${row.loopPerRound.p99} (< ${row.target}) ${row.loopPerRound.p50 < row.target ? 'ok' : 'MISSED'}`,
      `${row.perStep.p50} / ${row.perStep.p99}`,
      `${row.start.p50} / ${row.start.p99}`,
      `${row.baselinePerRound.p50} / ${row.baselinePerRound.p99}`,
      `${row.ratioP50}× / ${row.ratioP99}×`,
      String(row.failures),
    ]),
  );
}

if (require.main === module) {
  runRunsLoop()
    .then((rows) => {
      console.log(formatRunsLoop(rows));
      for (const row of rows) {
        console.log(`\n${row.dialect} ${row.stream ? 'stream' : 'chat'}: start() resolved → first step ${row.firstStep.p50} / ${row.firstStep.p99} ms; per step by kind (ms p50 / p99):`, Object.entries(row.perStepByKind).map(([kind, s]) => `${kind} ${s.p50} / ${s.p99}`).join(', '));
        if (row.failureSamples.length > 0) console.log(`${row.dialect} failures:`, row.failureSamples);
      }
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
