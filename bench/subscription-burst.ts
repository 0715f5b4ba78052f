/**
 * What a burst of subscriptions does to everyone else.
 *
 * The real server (`dist/src/main.js`) runs in its own process on a scratch
 * database with the demo model; one finished demo run has a trace of a few
 * steps. A bystander (bench/latency-prober, its own process) sends
 * `{ __typename }` over HTTP one request after another the whole time. Then one
 * client opens `BURST_CONNECTIONS` graphql-ws connections and sends
 * `BURST_PER_CONNECTION` `runTrace` subscriptions on each at once (every one
 * replays the stored trace from the database and completes).
 *
 * Reported: the bystander's latency before the burst (its baseline, same run)
 * and during it (p50 / p99 / max, and max ÷ baseline p99), and how long the
 * burst took to be served.
 *
 * `node dist/bench/subscription-burst.js` (after `npm run build`);
 * BENCH_DIALECT=mysql with BENCH_MYSQL_URL / TEST_MYSQL_URL for MySQL.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { round, writeResult } from './bench-support';
import { createScratchDatabase, type BenchDialect } from './runs-support';

const TOKEN = 'bench-burst-admin-token-0123456789';
const CONNECTIONS = Number(process.env.BURST_CONNECTIONS ?? 50);
const PER_CONNECTION = Number(process.env.BURST_PER_CONNECTION ?? 100);

interface Server {
  url: string;
  child: ChildProcess;
}

function startServer(databaseUrl: string): Promise<Server> {
  const root = path.resolve(__dirname, '..', '..');
  // BENCH_CHILD_NODE_ARGS passes node options to the server, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeArgs = (process.env.BENCH_CHILD_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, path.join(root, 'dist/src/main.js')], {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl,
      ADMIN_TOKEN: TOKEN,
      SECRET_KEY: 'bench-secret-key-0123456789',
      SEED_EXAMPLES: 'true',
      UI: 'false',
      LOG_LEVEL: 'silent',
      NODE_ENV: 'production',
      MAX_SUBSCRIPTIONS_PER_CONNECTION: String(PER_CONNECTION),
      MAX_SUBSCRIPTIONS_PER_TOKEN: String(CONNECTIONS * PER_CONNECTION),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /promptwire ready: (\S+)/.exec(output);
      if (match?.[1]) resolve({ url: match[1], child });
    });
    child.once('exit', (code) => reject(new Error(`the server exited with ${code}: ${output}`)));
  });
}

async function gql<T>(url: string, query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: T; errors?: unknown };
  if (!body.data) throw new Error(`GraphQL failed: ${JSON.stringify(body.errors)}`);
  return body.data;
}

async function finishedDemoRun(url: string): Promise<string> {
  const started = await gql<{ startRun: { id: string } }>(
    url,
    'mutation($input: StartRunInput!) { startRun(input: $input) { id } }',
    { input: { configuration: 'demo-assistant', prompt: 'What is 6 * 7?' } },
  );
  const id = started.startRun.id;
  for (;;) {
    const { run } = await gql<{ run: { status: string } }>(url, 'query($id: ID!) { run(id: $id) { status } }', { id });
    if (run.status !== 'RUNNING' && run.status !== 'QUEUED') return id;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function openSocket(wsUrl: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl, 'graphql-transport-ws');
    socket.once('error', reject);
    socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${TOKEN}` } })));
    socket.once('message', (data: Buffer) => {
      const message = JSON.parse(String(data)) as { type: string };
      if (message.type === 'connection_ack') resolve(socket);
      else reject(new Error(`unexpected ${message.type}`));
    });
  });
}

function startProber(url: string): { ready: Promise<void>; samples: Promise<[number, number][]>; startedAt: number; stop(): void } {
  const child = spawn(process.execPath, [path.join(__dirname, 'latency-prober.js'), url], { stdio: ['pipe', 'pipe', 'inherit'] });
  let output = '';
  let startedAt = 0;
  let markReady: () => void = () => undefined;
  const ready = new Promise<void>((resolve) => (markReady = resolve));
  const samples = new Promise<[number, number][]>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (!startedAt && output.includes('PROBING\n')) {
        startedAt = performance.now();
        result.startedAt = startedAt;
        markReady();
      }
      const match = /SAMPLES (.*)\n/.exec(output);
      if (match?.[1]) resolve(JSON.parse(match[1]) as [number, number][]);
    });
    child.once('exit', (code) => (code === 0 ? undefined : reject(new Error(`prober exited with ${code}`))));
  });
  const result = { ready, samples, startedAt, stop: () => child.stdin?.end() };
  return result;
}

const percentile = (values: number[], p: number) => {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
};

export interface BurstResult {
  dialect: BenchDialect;
  subscriptions: number;
  burstMs: number;
  baseline: { p50: number; p99: number; max: number; samples: number };
  during: { p50: number; p99: number; max: number; samples: number };
  maxOverBaselineP99: number;
}

export async function runSubscriptionBurst(dialect: BenchDialect): Promise<BurstResult> {
  const database = await createScratchDatabase(dialect);
  const server = await startServer(database.url);
  try {
    const runId = await finishedDemoRun(server.url);
    const wsUrl = server.url.replace(/^http/, 'ws');
    const sockets = await Promise.all(Array.from({ length: CONNECTIONS }, () => openSocket(wsUrl)));
    const prober = startProber(server.url);
    await prober.ready;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const total = CONNECTIONS * PER_CONNECTION;
    let answered = 0;
    const done = new Promise<void>((resolve) => {
      for (const socket of sockets) {
        socket.on('message', (data: Buffer) => {
          const message = JSON.parse(String(data)) as { type: string };
          if (message.type === 'complete' || message.type === 'error') {
            answered += 1;
            if (answered === total) resolve();
          }
        });
      }
    });
    const query = 'subscription($id: ID!) { runTrace(runId: $id) { sequence kind } }';
    const burstStart = performance.now();
    for (const [index, socket] of sockets.entries()) {
      for (let i = 0; i < PER_CONNECTION; i += 1) {
        socket.send(JSON.stringify({ type: 'subscribe', id: `s${index}_${i}`, payload: { query, variables: { id: runId } } }));
      }
    }
    await done;
    const burstEnd = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 500));
    prober.stop();
    const samples = await prober.samples;
    for (const socket of sockets) socket.close();
    // Sample times are relative to the prober's start; PROBING reached this process within a millisecond or so.
    const burstFrom = burstStart - prober.startedAt;
    const burstTo = burstEnd - prober.startedAt;
    const before = samples.filter(([sentAt]) => sentAt < burstFrom - 50).map(([, latency]) => latency);
    const during = samples.filter(([sentAt, latency]) => sentAt + latency >= burstFrom && sentAt <= burstTo).map(([, latency]) => latency);
    const stats = (values: number[]) => ({ p50: round(percentile(values, 50)), p99: round(percentile(values, 99)), max: round(Math.max(0, ...values)), samples: values.length });
    const baseline = stats(before);
    const burst = stats(during);
    return {
      dialect,
      subscriptions: total,
      burstMs: round(burstEnd - burstStart, 0),
      baseline,
      during: burst,
      maxOverBaselineP99: round(burst.max / Math.max(baseline.p99, 0.01)),
    };
  } finally {
    await new Promise((resolve) => {
      server.child.once('exit', resolve);
      server.child.kill('SIGTERM');
      setTimeout(() => server.child.kill('SIGKILL'), 10_000).unref();
    });
    await database.cleanup();
  }
}

export function formatSubscriptionBurst(results: BurstResult[]): string {
  return [
    '| database | burst | served in | bystander before: p50 / p99 / max | during the burst: p50 / p99 / max | max during ÷ p99 before |',
    '|---|---|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.dialect} | ${r.subscriptions} runTrace subscriptions | ${r.burstMs} ms | ${r.baseline.p50} / ${r.baseline.p99} / ${r.baseline.max} ms | ${r.during.p50} / ${r.during.p99} / ${r.during.max} ms | ${r.maxOverBaselineP99}× |`,
    ),
  ].join('\n');
}

if (require.main === module) {
  const dialects = (process.env.BENCH_DIALECT ?? 'sqlite').split(',') as BenchDialect[];
  (async () => {
    const results: BurstResult[] = [];
    for (const dialect of dialects) results.push(await runSubscriptionBurst(dialect));
    console.log(formatSubscriptionBurst(results));
    writeResult('subscription-burst', results);
  })().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
