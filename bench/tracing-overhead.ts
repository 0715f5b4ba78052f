/**
 * What OpenTelemetry tracing costs, as ratios against the same service
 * without it, measured in the same run.
 *
 * Five servers run side by side in this process, each on its own database,
 * the same in everything but their OTEL_* variables:
 *   - baseline: no OTEL_* variables at all;
 *   - no endpoint: OTEL_SERVICE_NAME, a sampler and message capture set, but
 *     no OTEL_EXPORTER_OTLP_ENDPOINT. The tracing module is then never loaded,
 *     so this runs the same code as the baseline: the ratio shows what
 *     "costs nothing" looks like amid this machine's noise;
 *   - sampled out: an endpoint, but OTEL_TRACES_SAMPLER=always_off: the SDK is
 *     loaded and asked for every span, none is recorded or sent;
 *   - exporting: OTEL_EXPORTER_OTLP_ENDPOINT pointing at a local OTLP/HTTP
 *     receiver in its own process (protobuf, every span sampled), so every span
 *     is built, batched, encoded and sent;
 *   - exporting with content: the same with
 *     OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (every chat span
 *     carries the messages sent, as JSON).
 *
 * The work is interleaved finely so that the machine's load (other processes
 * on a shared 2-core machine) falls on all of them alike:
 *   - run: one run on each server in turn, BENCH_RUNS times: RunService.start
 *     → END published on the trace bus, ROUNDS rounds against a zero-latency
 *     scripted provider (4 × CONTEXT REQUEST LLM TOOL, CONTEXT REQUEST LLM,
 *     END = 20 steps, 10 spans with the exporting server);
 *   - list: `snippets(limit: 50)` over HTTP, one burst of BENCH_BURST_SECONDS
 *     (autocannon, 20 connections) on each server in turn, BENCH_BURSTS times;
 *     the ratio is the median of each round's variant ÷ baseline.
 *
 * Run: `npm run build && NODE_ENV=production node dist/bench/tracing-overhead.js`
 * (BENCH_RUNS, BENCH_BURSTS, BENCH_BURST_SECONDS override 200, 10, 2.)
 */
import { fork } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { createScriptedAdapter, type ScriptedReply } from '../src/runs/engine/scripted-adapter';
import type { BusListener } from '../src/runs/trace-bus';
import type { RunningServer } from '../src/server';
import { load, round, writeResult } from './bench-support';
import {
  BENCH_CALLER,
  RUNS_BENCH_TOKEN,
  createScratchDatabase,
  markdownTable,
  seedRunConfiguration,
  startRunsServer,
  stats,
  traceBusOf,
  withDeadline,
  type ScratchDatabase,
} from './runs-support';

const ROUNDS = 5;
const WARMUP_RUNS = 10;

type VariantName = 'baseline' | 'no endpoint' | 'sampled out' | 'exporting' | 'exporting with content';

function script(): ScriptedReply[] {
  const replies: ScriptedReply[] = [];
  for (let r = 1; r < ROUNDS; r += 1) replies.push({ toolCalls: [{ name: 'calculator', arguments: { expression: `${r} * 21 + 7` } }], usage: [120 + 30 * r, 14] });
  replies.push({ content: 'All the intermediate results are computed; the final value is 112.', usage: [120 + 30 * ROUNDS, 18] });
  return replies;
}

/** A collector in its own process that accepts every export and keeps only counts (bench/otlp-receiver). */
async function startReceiver(): Promise<{ url: string; counts: () => Promise<{ requests: number; bytes: number }>; close: () => Promise<void> }> {
  const child = fork(path.join(__dirname, 'otlp-receiver.js'), [], { stdio: ['ignore', 'pipe', 'inherit', 'ipc'] });
  const url = await new Promise<string>((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /READY (\S+)/.exec(output);
      if (match?.[1]) resolve(match[1]);
    });
    child.once('exit', (code) => reject(new Error(`the OTLP receiver exited with ${code}`)));
  });
  return {
    url,
    counts: () =>
      new Promise((resolve) => {
        child.once('message', (message: { requests: number; bytes: number }) => resolve(message));
        child.send({ type: 'counts' });
      }),
    close: () =>
      new Promise((resolve) => {
        child.once('exit', () => resolve());
        child.send({ type: 'exit' });
      }),
  };
}

export async function runTracingOverhead(): Promise<void> {
  const runs = Number(process.env.BENCH_RUNS ?? 200);
  const bursts = Number(process.env.BENCH_BURSTS ?? 10);
  const burstSeconds = Number(process.env.BENCH_BURST_SECONDS ?? 2);
  const receiver = await startReceiver();
  const environments: Record<VariantName, Record<string, string>> = {
    baseline: {},
    'no endpoint': { OTEL_SERVICE_NAME: 'promptwire-bench', OTEL_TRACES_SAMPLER: 'always_on', OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' },
    'sampled out': { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_off' },
    exporting: {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_SERVICE_NAME: 'promptwire-bench',
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_BSP_MAX_QUEUE_SIZE: '65536',
    },
    'exporting with content': {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
      OTEL_SERVICE_NAME: 'promptwire-bench',
      OTEL_TRACES_SAMPLER: 'always_on',
      OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true',
      OTEL_BSP_SCHEDULE_DELAY: '200',
      OTEL_BSP_MAX_QUEUE_SIZE: '65536',
    },
  };
  const variants = Object.keys(environments) as VariantName[];
  const servers: { variant: VariantName; database: ScratchDatabase; server: RunningServer; configuration: string }[] = [];
  const runMs = new Map<VariantName, number[]>(variants.map((variant) => [variant, []]));
  const listRates = new Map<VariantName, number[]>(variants.map((variant) => [variant, []]));
  let listErrors = 0;
  let exported = { requests: 0, bytes: 0 };
  try {
    for (const variant of variants) {
      const database = await createScratchDatabase('sqlite');
      const server = await startRunsServer(database, { runs: { adapterFactory: () => createScriptedAdapter(script()) } }, environments[variant]);
      servers.push({ variant, database, server, configuration: await seedRunConfiguration(server.services) });
    }
    const oneRun = async ({ server, configuration }: (typeof servers)[number]): Promise<number> => {
      const bus = traceBusOf(server.services.runs);
      const started = performance.now();
      const view = await server.services.runs.start({ configuration, prompt: 'Compute the values step by step with the calculator.', tools: ['calculator'], maxRounds: ROUNDS, stream: false }, BENCH_CALLER);
      let resolveEnd!: () => void;
      const ended = new Promise<void>((resolve) => (resolveEnd = resolve));
      const listener: BusListener = (message) => {
        if (message.type === 'step' && message.step.kind === 'end') resolveEnd();
      };
      const unsubscribe = bus.subscribe(view.row.uuid, listener);
      try {
        await withDeadline(ended, 30_000, `END of run ${view.row.uuid}`);
      } finally {
        unsubscribe();
      }
      return performance.now() - started;
    };
    for (let i = 0; i < WARMUP_RUNS; i += 1) for (const entry of servers) await oneRun(entry);
    for (let i = 0; i < runs; i += 1) {
      // The order rotates, so no variant always follows the same one.
      for (let k = 0; k < servers.length; k += 1) {
        const entry = servers[(i + k) % servers.length]!;
        runMs.get(entry.variant)!.push(await oneRun(entry));
      }
    }
    const body = JSON.stringify({ query: '{ snippets(limit: 50) { uid identifier name tags snippet isActive } }' });
    for (let b = 0; b < bursts; b += 1) {
      for (let k = 0; k < servers.length; k += 1) {
        const entry = servers[(b + k) % servers.length]!;
        const result = await load(entry.server.url, body, { authorization: `Bearer ${RUNS_BENCH_TOKEN}` }, burstSeconds, 20);
        listRates.get(entry.variant)!.push(result.requestsPerSecond);
        listErrors += result.errors + result.non2xx;
      }
      console.log(`list round ${b + 1}: ${variants.map((variant) => `${variant} ${round(listRates.get(variant)!.at(-1)!, 0)}`).join(', ')} req/s`);
    }
  } finally {
    for (const { server, database } of servers) {
      await server.stop();
      await database.cleanup();
    }
    exported = await receiver.counts();
    await receiver.close();
  }

  const median = (values: readonly number[]) => {
    const sorted = [...values].sort((a, b) => a - b);
    return sorted[Math.floor(sorted.length / 2)] ?? Number.NaN;
  };
  const baselineRuns = stats(runMs.get('baseline')!);
  const baselineRates = listRates.get('baseline')!;
  const rows = variants.map((variant) => {
    const run = stats(runMs.get(variant)!);
    const rates = listRates.get(variant)!;
    return {
      variant,
      run,
      runRatioP50: round(run.p50 / baselineRuns.p50, 3),
      runRatioMean: round(run.mean / baselineRuns.mean, 3),
      listRequestsPerSecondMedian: round(median(rates), 0),
      // Each round's ratio against the baseline's burst of the same round, then the median of those.
      listRatio: round(median(rates.map((rate, index) => rate / (baselineRates[index] ?? Number.NaN))), 3),
    };
  });
  writeResult('tracing-overhead', {
    measuredAt: new Date().toISOString(),
    node: process.version,
    nodeEnv: process.env.NODE_ENV ?? '',
    runsPerVariant: runs,
    rounds: ROUNDS,
    listBursts: bursts,
    listBurstSeconds: burstSeconds,
    listErrors,
    exported,
    rows,
  });
  console.log(
    markdownTable(
      ['variant', 'run p50 / mean / p99 ms', 'run ratio p50 / mean', 'list req/s (median burst)', 'list ratio (median of paired bursts)'],
      rows.map((row) => [row.variant, `${row.run.p50} / ${row.run.mean} / ${row.run.p99}`, `${row.runRatioP50}× / ${row.runRatioMean}×`, row.listRequestsPerSecondMedian, `${row.listRatio}×`]),
    ),
  );
  console.log(`list errors: ${listErrors}; exported: ${exported.requests} OTLP requests, ${Math.round(exported.bytes / 1024)} KiB`);
}

if (require.main === module) {
  runTracingOverhead().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
