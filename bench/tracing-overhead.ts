/**
 * What OpenTelemetry tracing costs, as ratios against the same service
 * without it, measured in the same run.
 *
 * Five servers, each in its own process (bench/tracing-overhead-server) on its
 * own SQLite database, the same in everything but their OTEL_* variables:
 *   - baseline: no OTEL_* variables at all;
 *   - no endpoint: OTEL_SERVICE_NAME, a sampler and message capture set, but
 *     no OTEL_EXPORTER_OTLP_ENDPOINT. The tracing module is then never loaded,
 *     so this runs the same code as the baseline: its ratio, with its
 *     confidence interval, shows what "costs nothing" looks like amid this
 *     machine's noise (the control);
 *   - sampled out: an endpoint, but OTEL_TRACES_SAMPLER=always_off: the SDK is
 *     loaded and asked for every span, none is recorded or sent;
 *   - exporting: OTEL_EXPORTER_OTLP_ENDPOINT pointing at a local OTLP/HTTP
 *     receiver in its own process (protobuf, every span sampled), so every span
 *     is built, batched, encoded and sent. The list's queries come without a
 *     traceparent, so by default (TRACE_QUERIES=parent) they get no span; a
 *     run's spans are all built and sent;
 *   - exporting every query: the same with TRACE_QUERIES=all, so every list
 *     request gets its span too;
 *   - exporting with content: the same with
 *     OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true (every chat span
 *     carries the messages sent, as JSON).
 * Metrics (`/metrics` and its per-request hooks) are on in every variant.
 *
 * One process per server, so one server's garbage, JIT and background export
 * never land in another's measurement; the load generator (autocannon) and
 * the bench's bookkeeping run in this process. Processes are not pinned to
 * cores: the machine is shared, and pinning would only choose which
 * neighbour each server competes with.
 *
 * Only one server works at a time, and the work is interleaved finely so that
 * the machine's load (other processes on a shared 2-core machine) falls on all
 * of them alike. Each round visits every server once, in a fresh random order
 * (fixed seed, so the same orders every time): no variant always comes first
 * or always follows the same one (a rotation would keep the same neighbours,
 * and a burst's export tail or garbage would always fall on the same one).
 *   - run: per round, one run on each server: RunService.start → END
 *     published on the trace bus, ROUNDS rounds against a zero-latency scripted
 *     provider (4 × CONTEXT REQUEST LLM TOOL, CONTEXT REQUEST LLM, END = 20
 *     steps, 10 spans with an exporting server), timed inside the server's
 *     process from the start to END's publishing (when its watchers get it).
 *     BENCH_RUNS rounds. Beside it, each server's CPU per run over an epoch's
 *     runs (the mean, with the export of their spans: a batch leaves on a
 *     timer and lands on a few runs, which a median would not see), as a
 *     ratio to the baseline's per epoch.
 *   - list: per round, one burst of `snippets(limit: 50)` over HTTP
 *     (autocannon, 20 connections, BENCH_BURST_SECONDS) on each server, then
 *     SETTLE_MS of quiet (longer than the exporters' 200 ms schedule delay, so
 *     a burst's last spans are encoded and sent before the next server's burst
 *     starts). Throughput is completed requests ÷ the burst's duration; beside
 *     it, the server process's CPU time per request, read before the burst and
 *     after the quiet, so it includes the export of the burst's spans.
 *     BENCH_BURSTS rounds.
 * The rounds are split into BENCH_EPOCHS epochs (default 4), each with fresh
 * server processes started in a random order: one process of the same code
 * can run a few per cent faster or slower than another for its whole life
 * (heap layout, JIT decisions), a bias pairing within rounds cannot remove;
 * new processes every epoch draw it anew, so it averages out instead of
 * landing on one variant, and the per-epoch medians show how large it is.
 * Every figure is paired: a round's variant ÷ the same round's baseline. The
 * table gives the median of those paired ratios and its distribution-free 95 %
 * confidence interval (order statistics of the binomial, no assumption about
 * the shape of the noise). A target of "at most 5 % slower" is met when the
 * interval's slow end is within 5 % (run ≤ 1.05×, list ≥ 0.952×); the control
 * shows how wide "no difference" is on the day.
 *
 * Run: `npm run build && NODE_ENV=production node dist/bench/tracing-overhead.js`
 * (BENCH_RUNS, BENCH_BURSTS, BENCH_BURST_SECONDS, BENCH_EPOCHS override 200, 30, 1, 4;
 * BENCH_VARIANTS=<comma-separated names> measures only those beside the baseline).
 * BENCH_COMPARE_BUILD=<another build's dist directory> adds a sixth server,
 * "exporting (other build)": the exporting variant run from that build, to
 * compare two versions of the code in one run (e.g. `git worktree` or
 * `tsc --outDir dist-before` of the older commit).
 */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import autocannon from 'autocannon';
import { productionNodeFlags, round, seededRandom, writeResult } from './bench-support';
import { RUNS_BENCH_TOKEN, markdownTable, sleep, stats } from './runs-support';
import { ROUNDS } from './tracing-overhead-server';

const WARMUP_RUNS = Number(process.env.BENCH_WARMUP_RUNS ?? 100);
const WARMUP_BURSTS = Number(process.env.BENCH_WARMUP_BURSTS ?? 2);
const SETTLE_MS = 400;
const CONNECTIONS = 20;

type VariantName = 'baseline' | 'no endpoint' | 'sampled out' | 'exporting' | 'exporting every query' | 'exporting with content' | 'exporting (other build)';

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

interface ServerProcess {
  variant: VariantName;
  url: string;
  ask<T>(message: { type: string }, answer: string): Promise<T>;
  stop(): Promise<void>;
}

async function startServerProcess(variant: VariantName, env: Record<string, string>, build = path.join(__dirname, '..')): Promise<ServerProcess> {
  const child: ChildProcess = fork(path.join(build, 'bench', 'tracing-overhead-server.js'), [JSON.stringify(env)], {
    // As the service is deployed (npm start, the Docker image): its young generation decides how long a queued span lives.
    execArgv: productionNodeFlags().split(' ').filter(Boolean),
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const ask = <T>(message: { type: string }, answer: string) =>
    new Promise<T>((resolve, reject) => {
      const onMessage = (reply: { type: string; message?: string }) => {
        if (reply.type !== answer && reply.type !== 'error') return;
        child.off('message', onMessage);
        child.off('exit', onExit);
        if (reply.type === 'error') reject(new Error(`${variant}: ${reply.message}`));
        else resolve(reply as T);
      };
      const onExit = (code: number | null) => reject(new Error(`the ${variant} server exited with ${code}`));
      child.on('message', onMessage);
      child.once('exit', onExit);
      if (message.type !== 'ready') child.send(message);
    });
  const { url } = await ask<{ url: string }>({ type: 'ready' }, 'ready');
  return {
    variant,
    url,
    ask,
    stop: () =>
      new Promise((resolve) => {
        if (child.exitCode !== null) return resolve();
        child.once('exit', () => resolve());
        child.send({ type: 'stop' });
      }),
  };
}

const median = (values: readonly number[]) => {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  return n === 0 ? Number.NaN : n % 2 ? sorted[(n - 1) / 2]! : (sorted[n / 2 - 1]! + sorted[n / 2]!) / 2;
};

/**
 * The median's distribution-free 95 % confidence interval: [x(r), x(n−r+1)]
 * with the largest r for which 2·P(Binomial(n, ½) ≤ r−1) ≤ 0.05.
 */
export function medianInterval(values: readonly number[]): [number, number] {
  const sorted = [...values].sort((a, b) => a - b);
  const n = sorted.length;
  if (n < 6) return [Number.NaN, Number.NaN];
  let r = 0;
  if (n <= 1000) {
    let pmf = 0.5 ** n; // P(B = 0)
    let cdf = pmf;
    // cdf = P(B ≤ r) on entry to each turn
    while (2 * cdf <= 0.05) {
      r += 1;
      pmf = (pmf * (n - r + 1)) / r;
      cdf += pmf;
    }
  } else {
    r = Math.floor(n / 2 - 0.98 * Math.sqrt(n));
  }
  // r is now the largest value with 2·P(B ≤ r−1) ≤ 0.05.
  return [sorted[r - 1]!, sorted[n - r]!];
}

const mean = (values: readonly number[]) => values.reduce((sum, value) => sum + value, 0) / Math.max(1, values.length);

const ratiosOf = (values: readonly number[], baseline: readonly number[]) => values.map((value, index) => value / (baseline[index] ?? Number.NaN));

/** `total` split into `parts` nearly equal whole shares. */
const spread = (total: number, parts: number) => Array.from({ length: parts }, (_, part) => Math.floor((total * (part + 1)) / parts) - Math.floor((total * part) / parts));

function pairedSummary(values: readonly number[], baseline: readonly number[]) {
  const ratios = ratiosOf(values, baseline);
  const [low, high] = medianInterval(ratios);
  return { median: round(median(ratios), 3), low: round(low, 3), high: round(high, 3) };
}

/** A fresh random order per round (Fisher–Yates): every server comes at every place and after every other equally often, on average. */
function shuffled<T>(items: readonly T[], random: () => number): T[] {
  const order = [...items];
  for (let i = order.length - 1; i > 0; i -= 1) {
    const j = Math.floor(random() * (i + 1));
    [order[i], order[j]] = [order[j]!, order[i]!];
  }
  return order;
}

export async function runTracingOverhead(): Promise<void> {
  const runs = Number(process.env.BENCH_RUNS ?? 200);
  const bursts = Number(process.env.BENCH_BURSTS ?? 30);
  const burstSeconds = Number(process.env.BENCH_BURST_SECONDS ?? 1);
  const epochs = Math.max(1, Math.trunc(Number(process.env.BENCH_EPOCHS ?? 4)));
  const receiver = await startReceiver();
  const exporting = {
    OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
    OTEL_EXPORTER_OTLP_PROTOCOL: 'http/protobuf',
    OTEL_SERVICE_NAME: 'promptwire-bench',
    OTEL_TRACES_SAMPLER: 'always_on',
    OTEL_BSP_SCHEDULE_DELAY: '200',
    OTEL_BSP_MAX_QUEUE_SIZE: '65536',
  };
  const otherBuild = process.env.BENCH_COMPARE_BUILD ? path.resolve(process.env.BENCH_COMPARE_BUILD) : null;
  const environments: Partial<Record<VariantName, Record<string, string>>> = {
    baseline: {},
    'no endpoint': { OTEL_SERVICE_NAME: 'promptwire-bench', OTEL_TRACES_SAMPLER: 'always_on', OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' },
    'sampled out': { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_TRACES_SAMPLER: 'always_off' },
    exporting,
    'exporting every query': { ...exporting, TRACE_QUERIES: 'all' },
    'exporting with content': { ...exporting, OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' },
    ...(otherBuild ? { 'exporting (other build)': exporting } : {}),
  };
  // BENCH_VARIANTS=<names, comma-separated>: only those beside the baseline (e.g. "exporting,exporting every query").
  const only = process.env.BENCH_VARIANTS ? new Set(['baseline', ...process.env.BENCH_VARIANTS.split(',').map((name) => name.trim())]) : null;
  const variants = (Object.keys(environments) as VariantName[]).filter((variant) => !only || only.has(variant));
  const runMs = new Map<VariantName, number[]>(variants.map((variant) => [variant, []]));
  const listRates = new Map<VariantName, number[]>(variants.map((variant) => [variant, []]));
  /** Per epoch, each server's CPU per run over its runs (µs, the mean: exports that land on a few runs count). */
  const runCpu = new Map<VariantName, number[]>(variants.map((variant) => [variant, []]));
  const listCpu = new Map<VariantName, number[]>(variants.map((variant) => [variant, []]));
  let listErrors = 0;
  let exported = { requests: 0, bytes: 0 };
  const body = JSON.stringify({ query: '{ snippets(limit: 50) { uid identifier name tags snippet isActive } }' });
  const burst = async (server: ServerProcess): Promise<{ rate: number; cpuMicrosPerRequest: number }> => {
    const before = await server.ask<{ micros: number }>({ type: 'cpu' }, 'cpu');
    const result = await autocannon({
      url: server.url,
      method: 'POST',
      body,
      headers: { 'content-type': 'application/json', authorization: `Bearer ${RUNS_BENCH_TOKEN}` },
      connections: CONNECTIONS,
      duration: burstSeconds,
    });
    await sleep(SETTLE_MS);
    const after = await server.ask<{ micros: number }>({ type: 'cpu' }, 'cpu');
    listErrors += result.errors + result.timeouts + result.non2xx;
    return { rate: result.requests.total / result.duration, cpuMicrosPerRequest: (after.micros - before.micros) / Math.max(1, result.requests.total) };
  };
  const random = seededRandom(14);
  const epochRuns = spread(runs, epochs);
  const epochBursts = spread(bursts, epochs);
  // Per epoch, the median paired list-CPU ratio of each variant: how far fresh processes of the same code land apart.
  const epochListCpu = new Map<VariantName, number[]>(variants.map((variant) => [variant, []]));
  try {
    for (let epoch = 0; epoch < epochs; epoch += 1) {
      // Fresh processes every epoch: a process's own lasting bias (heap layout, JIT decisions) is drawn again each time.
      const servers: ServerProcess[] = [];
      const firstBurst = listCpu.get('baseline')!.length;
      try {
        for (const variant of shuffled(variants, random)) servers.push(await startServerProcess(variant, environments[variant]!, variant === 'exporting (other build)' ? (otherBuild ?? undefined) : undefined));
        const oneRun = async (server: ServerProcess) => (await server.ask<{ ms: number }>({ type: 'run' }, 'run')).ms;
        for (let i = 0; i < WARMUP_RUNS; i += 1) for (const server of shuffled(servers, random)) await oneRun(server);
        // Each variant's list holds one value per round, so index i pairs it with the baseline's of the same round.
        const cpuOf = async (server: ServerProcess) => (await server.ask<{ micros: number }>({ type: 'cpu' }, 'cpu')).micros;
        const runCpuBefore = new Map<VariantName, number>();
        for (const server of servers) runCpuBefore.set(server.variant, await cpuOf(server));
        for (let i = 0; i < epochRuns[epoch]!; i += 1) for (const server of shuffled(servers, random)) runMs.get(server.variant)!.push(await oneRun(server));
        // Each server's CPU over its runs, its spans' export included (the quiet lets the last batch leave).
        await sleep(SETTLE_MS);
        for (const server of servers) {
          const micros = (await cpuOf(server)) - runCpuBefore.get(server.variant)!;
          runCpu.get(server.variant)!.push(micros / Math.max(1, epochRuns[epoch]!));
        }
        for (let i = 0; i < WARMUP_BURSTS; i += 1) for (const server of servers) await burst(server);
        for (let b = 0; b < epochBursts[epoch]!; b += 1) {
          for (const server of shuffled(servers, random)) {
            const { rate, cpuMicrosPerRequest } = await burst(server);
            listRates.get(server.variant)!.push(rate);
            listCpu.get(server.variant)!.push(cpuMicrosPerRequest);
          }
          console.log(`epoch ${epoch + 1}, list round ${b + 1}: ${variants.map((variant) => `${variant} ${round(listRates.get(variant)!.at(-1)!, 0)}`).join(', ')} req/s`);
        }
      } finally {
        for (const server of servers) await server.stop();
      }
      for (const variant of variants) {
        epochListCpu.get(variant)!.push(round(median(ratiosOf(listCpu.get(variant)!.slice(firstBurst), listCpu.get('baseline')!.slice(firstBurst))), 3));
      }
    }
  } finally {
    exported = await receiver.counts();
    await receiver.close();
  }

  const baselineRuns = runMs.get('baseline')!;
  const baselineRunStats = stats(baselineRuns);
  const rows = variants.map((variant) => {
    const run = stats(runMs.get(variant)!);
    return {
      variant,
      run,
      runRatioP50: round(run.p50 / baselineRunStats.p50, 3),
      runRatioMean: round(run.mean / baselineRunStats.mean, 3),
      // Each round's run time ÷ the baseline's of the same round: median and its 95 % interval.
      runRatioPaired: pairedSummary(runMs.get(variant)!, baselineRuns),
      runCpuMicrosPerRun: round(mean(runCpu.get(variant)!), 0),
      // Per epoch (fresh processes each): CPU per run ÷ the baseline's of the same epoch.
      runCpuRatioByEpoch: ratiosOf(runCpu.get(variant)!, runCpu.get('baseline')!).map((ratio) => round(ratio, 3)),
      listRequestsPerSecondMedian: round(median(listRates.get(variant)!), 0),
      listRatio: pairedSummary(listRates.get(variant)!, listRates.get('baseline')!),
      listCpuMicrosPerRequestMedian: round(median(listCpu.get(variant)!), 1),
      listCpuRatio: pairedSummary(listCpu.get(variant)!, listCpu.get('baseline')!),
      listCpuRatioByEpoch: epochListCpu.get(variant)!,
    };
  });
  // This build's exporting server ÷ the other build's, round by round.
  const againstOtherBuild =
    otherBuild && variants.includes('exporting') && variants.includes('exporting (other build)')
      ? {
          runRatio: pairedSummary(runMs.get('exporting')!, runMs.get('exporting (other build)')!),
          listRatio: pairedSummary(listRates.get('exporting')!, listRates.get('exporting (other build)')!),
          listCpuRatio: pairedSummary(listCpu.get('exporting')!, listCpu.get('exporting (other build)')!),
        }
      : null;
  writeResult('tracing-overhead', {
    measuredAt: new Date().toISOString(),
    node: process.version,
    nodeEnv: process.env.NODE_ENV ?? '',
    runsPerVariant: runs,
    rounds: ROUNDS,
    epochs,
    listBursts: bursts,
    listBurstSeconds: burstSeconds,
    listErrors,
    exported,
    ...(otherBuild ? { otherBuild, againstOtherBuild } : {}),
    rows,
  });
  const interval = (summary: { median: number; low: number; high: number }) => `${summary.median}× (${summary.low}–${summary.high})`;
  console.log(
    markdownTable(
      ['variant', 'run p50 / mean ms', 'run ratio p50 / mean', 'run ratio, paired (95 % CI)', 'list req/s', 'list ratio, paired (95 % CI)', 'list CPU µs/req', 'list CPU ratio, paired (95 % CI)'],
      rows.map((row) => [
        row.variant,
        `${row.run.p50} / ${row.run.mean}`,
        `${row.runRatioP50}× / ${row.runRatioMean}×`,
        interval(row.runRatioPaired),
        row.listRequestsPerSecondMedian,
        interval(row.listRatio),
        row.listCpuMicrosPerRequestMedian,
        interval(row.listCpuRatio),
      ]),
    ),
  );
  if (againstOtherBuild) {
    console.log(
      `exporting, this build ÷ other build: run ${interval(againstOtherBuild.runRatio)}, list ${interval(againstOtherBuild.listRatio)}, list CPU ${interval(againstOtherBuild.listCpuRatio)}`,
    );
  }
  console.log(`run CPU µs per run (mean) and its ratio per epoch: ${rows.map((row) => `${row.variant} ${row.runCpuMicrosPerRun} (${row.runCpuRatioByEpoch.map((ratio) => `${ratio}×`).join(' ')})`).join('; ')}`);
  console.log(`list CPU ratio per epoch (fresh processes each): ${rows.map((row) => `${row.variant} ${row.listCpuRatioByEpoch.map((ratio) => `${ratio}×`).join(' ')}`).join('; ')}`);
  console.log(`list errors: ${listErrors}; exported: ${exported.requests} OTLP requests, ${Math.round(exported.bytes / 1024)} KiB`);
}

if (require.main === module) {
  runTracingOverhead().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
