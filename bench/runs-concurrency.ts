/**
 * Concurrent runs: RUNS (default 50) runs started at once over HTTP
 * (`startRun`, admin token), the calculator tool on, against the scripted
 * adapter (options.runs.adapterFactory) answering after a random 0–20 ms:
 * each run asks for the calculator in K rounds (K random in 1..4, told to the
 * fake through the prompt), then answers — 4K + 4 steps, status COMPLETED,
 * reason completed. The runs use the server's default call mode (no `stream`
 * argument).
 *
 * Every run is watched from the moment startRun answers by a runTrace
 * subscription (one graphql-ws client, one subscription per run), so replay
 * followed by live delivery is checked under load too.
 *
 * A run counts as failed unless: startRun answered without error; the run is
 * COMPLETED with reason `completed`, no error and K + 1 iterations; its stored
 * steps (`run { steps }` over HTTP) are sequences 1..n with n = 4K + 4, exactly
 * one END and it is last; and its runTrace subscription delivered exactly
 * those sequences and completed.
 *
 * Wall time: from sending the first startRun to the last run finished
 * (RunService.drain resolves once no run of the process is active). One
 * warm-up run goes first, alone, and is not counted.
 *
 * Run: `npx tsc -p tsconfig.build.json && NODE_ENV=production node dist/bench/runs-concurrency.js`
 * (BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306/test adds MySQL; RUNS, BENCH_SEED override 50 / 42.)
 */
import { performance } from 'node:perf_hooks';
import { createClient } from 'graphql-ws';
import WebSocket from 'ws';
import type { ChatRequest } from '../src/providers/adapters/types';
import { createScriptedAdapter, type ScriptedAnswer } from '../test/support/scripted-adapter';
import { round, seededRandom, writeResult } from './bench-support';
import {
  RUNS_BENCH_TOKEN,
  benchDialects,
  createScratchDatabase,
  markdownTable,
  postGraphQL,
  seedRunConfiguration,
  startRunsServer,
  stats,
  withDeadline,
  type BenchDialect,
  type Stats,
} from './runs-support';

const RUN_DEADLINE_MS = 120_000;

export interface ConcurrencyRow {
  dialect: BenchDialect;
  runs: number;
  completed: number;
  failures: number;
  failureSamples: string[];
  wallMs: number;
  /** HTTP round trip of startRun, ms. */
  startRun: Stats;
  stepsTotal: number;
  toolRoundsTotal: number;
  traceDeliveries: number;
}

const START_RUN = 'mutation($input: StartRunInput!) { startRun(input: $input) { id status } }';
const RUN = 'query($id: ID!) { run(id: $id) { id status terminationReason error iterations steps { sequence kind round } } }';
const TRACE = 'subscription($runId: ID!) { runTrace(runId: $runId) { sequence kind } }';

interface RunResult {
  id: string;
  status: string;
  terminationReason: string | null;
  error: string | null;
  iterations: number;
  steps: { sequence: number; kind: string; round: number }[];
}

export async function runRunsConcurrency(runCount = Number(process.env.RUNS ?? 50), seed = Number(process.env.BENCH_SEED ?? 42)): Promise<ConcurrencyRow[]> {
  if (!Number.isInteger(runCount) || runCount < 1 || runCount > 1000) throw new Error('RUNS must be 1..1000');
  const rows: ConcurrencyRow[] = [];
  for (const dialect of benchDialects()) {
    const database = await createScratchDatabase(dialect);
    try {
      rows.push(await measure(dialect, database, runCount, seed));
    } finally {
      await database.cleanup();
    }
  }
  writeResult('runs-concurrency', { measuredAt: new Date().toISOString(), node: process.version, nodeEnv: process.env.NODE_ENV ?? '', seed, rows });
  return rows;
}

async function measure(dialect: BenchDialect, database: Awaited<ReturnType<typeof createScratchDatabase>>, runCount: number, seed: number): Promise<ConcurrencyRow> {
  const random = seededRandom(seed);
  const toolRoundsOf = (request: ChatRequest): number => {
    const user = request.messages.find((m) => m.role === 'user');
    const match = /tool rounds: (\d+)/.exec(typeof user?.content === 'string' ? user.content : '');
    return Number(match?.[1] ?? 0);
  };
  const reply = (request: ChatRequest, callNumber: number): ScriptedAnswer => {
    const delayMs = Math.floor(random() * 21);
    if (callNumber <= toolRoundsOf(request)) {
      return { toolCalls: [{ name: 'calculator', arguments: { expression: `${callNumber} * 6 + 0.5` } }], usage: [80 + 25 * callNumber, 11], delayMs };
    }
    return { content: `Done after ${callNumber - 1} tool rounds.`, contentChunks: ['Done after ', `${callNumber - 1} tool rounds.`], usage: [80 + 25 * callNumber, 9], delayMs };
  };
  // Each run's adapter is built once, in start(); it needs no more replies than maxRounds + 1 calls.
  const server = await startRunsServer(database, { runs: { adapterFactory: () => createScriptedAdapter(Array.from({ length: 6 }, () => reply)) } });
  const ws = createClient({ url: server.wsUrl, webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${RUNS_BENCH_TOKEN}` }, retryAttempts: 0 });
  try {
    const configuration = await seedRunConfiguration(server.services);
    // One run first, alone, so the burst below does not pay for first-request warm-up.
    const warm = await postGraphQL<{ startRun: { id: string } }>(server.url, START_RUN, { input: { configuration, prompt: 'warm-up; tool rounds: 1', tools: ['calculator'], maxRounds: 5 } });
    if (!warm.data?.startRun.id) throw new Error(`the warm-up run did not start: ${JSON.stringify(warm.errors)}`);
    await withDeadline(server.services.runs.drain(false), 10_000, 'the end of the warm-up run');

    const plans = Array.from({ length: runCount }, () => 1 + Math.floor(random() * 4));
    const problems = new Map<number, string[]>();
    const problem = (index: number, text: string) => (problems.get(index) ?? problems.set(index, []).get(index)!).push(text);
    const watched: { sequences: number[]; done: Promise<void>; error: string | null }[] = [];

    const startedAt = performance.now();
    const starts = await Promise.all(
      plans.map(async (toolRounds, index) => {
        const sent = performance.now();
        try {
          const result = await postGraphQL<{ startRun: { id: string } }>(server.url, START_RUN, {
            input: { configuration, prompt: `Run ${index}: use the calculator; tool rounds: ${toolRounds}`, tools: ['calculator'], maxRounds: 5 },
          });
          const ms = performance.now() - sent;
          const id = result.data?.startRun.id;
          if (!id) {
            problem(index, `startRun failed: ${JSON.stringify(result.errors ?? result)}`);
            return { id: null, ms };
          }
          // Watch at once: the run may be anywhere between its first and its last step by now.
          const entry = { sequences: [] as number[], done: Promise.resolve(), error: null as string | null };
          entry.done = new Promise<void>((resolve) => {
            ws.subscribe<{ runTrace: { sequence: number; kind: string } }>(
              { query: TRACE, variables: { runId: id } },
              {
                next: (value) => {
                  if (value.errors?.length) entry.error ??= value.errors.map((e) => e.message).join('; ');
                  if (value.data) entry.sequences.push(value.data.runTrace.sequence);
                },
                error: (error: unknown) => {
                  entry.error ??= error instanceof Error ? error.message : String(error);
                  resolve();
                },
                complete: resolve,
              },
            );
          });
          watched[index] = entry;
          return { id, ms };
        } catch (error) {
          problem(index, `startRun request failed: ${error instanceof Error ? error.message : String(error)}`);
          return { id: null, ms: performance.now() - sent };
        }
      }),
    );
    await withDeadline(server.services.runs.drain(false), RUN_DEADLINE_MS, 'the end of all runs');
    const wallMs = performance.now() - startedAt;
    await withDeadline(Promise.all(watched.filter(Boolean).map((w) => w.done)), 30_000, 'the end of every runTrace subscription');

    let stepsTotal = 0;
    let traceDeliveries = 0;
    let completed = 0;
    for (const [index, start] of starts.entries()) {
      if (!start.id) continue;
      const toolRounds = plans[index]!;
      const result = await postGraphQL<{ run: RunResult | null }>(server.url, RUN, { id: start.id });
      const run = result.data?.run;
      if (!run) {
        problem(index, `run ${start.id} not readable: ${JSON.stringify(result.errors)}`);
        continue;
      }
      stepsTotal += run.steps.length;
      if (run.status === 'COMPLETED') completed += 1;
      if (run.status !== 'COMPLETED' || run.terminationReason !== 'completed' || run.error !== null) problem(index, `run ${run.id} ended ${run.status}/${run.terminationReason}: ${run.error}`);
      if (run.iterations !== toolRounds + 1) problem(index, `run ${run.id}: ${run.iterations} iterations, expected ${toolRounds + 1}`);
      const sequences = run.steps.map((s) => s.sequence);
      if (sequences.some((sequence, i) => sequence !== i + 1)) problem(index, `run ${run.id}: stored sequences ${sequences.join(',')}`);
      if (run.steps.length !== 4 * toolRounds + 4) problem(index, `run ${run.id}: ${run.steps.length} steps, expected ${4 * toolRounds + 4}`);
      if (run.steps.filter((s) => s.kind === 'END').length !== 1 || run.steps[run.steps.length - 1]?.kind !== 'END') problem(index, `run ${run.id}: END is not once and last (${run.steps.map((s) => s.kind).join(',')})`);
      const trace = watched[index];
      if (trace) {
        traceDeliveries += trace.sequences.length;
        if (trace.error) problem(index, `run ${run.id}: runTrace error ${trace.error}`);
        if (trace.sequences.join(',') !== sequences.join(',')) problem(index, `run ${run.id}: runTrace delivered ${trace.sequences.join(',')}, stored ${sequences.join(',')}`);
      }
    }
    const failureSamples = [...problems.values()].flat();
    return {
      dialect,
      runs: runCount,
      completed,
      failures: problems.size,
      failureSamples: failureSamples.slice(0, 10),
      wallMs: round(wallMs, 1),
      startRun: stats(starts.map((s) => s.ms), 2),
      stepsTotal,
      toolRoundsTotal: plans.reduce((sum, k) => sum + k, 0),
      traceDeliveries,
    };
  } finally {
    await ws.dispose();
    await server.stop();
  }
}

export function formatRunsConcurrency(rows: readonly ConcurrencyRow[]): string {
  return markdownTable(
    ['database', 'runs', 'completed', 'failed runs', 'wall ms', 'startRun p50 / p99 / max ms', 'steps stored', 'runTrace deliveries'],
    rows.map((row) => [row.dialect, row.runs, row.completed, row.failures, row.wallMs, `${row.startRun.p50} / ${row.startRun.p99} / ${row.startRun.max}`, row.stepsTotal, row.traceDeliveries]),
  );
}

if (require.main === module) {
  runRunsConcurrency()
    .then((rows) => {
      console.log(formatRunsConcurrency(rows));
      for (const row of rows) if (row.failureSamples.length > 0) console.log(`${row.dialect} failures:\n  ${row.failureSamples.join('\n  ')}`);
      if (rows.some((row) => row.failures > 0)) process.exitCode = 1;
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
