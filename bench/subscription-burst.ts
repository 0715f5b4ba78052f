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
import { performance } from 'node:perf_hooks';
import WebSocket from 'ws';
import { round, writeResult } from './bench-support';
import { bystanderLatency, gql, type LatencyStats, type ServiceProcess, startProber, startServiceProcess } from './bystander';
import { createScratchDatabase, type BenchDialect } from './runs-support';

const CONNECTIONS = Number(process.env.BURST_CONNECTIONS ?? 50);
const PER_CONNECTION = Number(process.env.BURST_PER_CONNECTION ?? 100);

async function finishedDemoRun(service: ServiceProcess): Promise<string> {
  const started = await gql<{ startRun: { id: string } }>(service, 'mutation($input: StartRunInput!) { startRun(input: $input) { id } }', {
    input: { configuration: 'demo-assistant', prompt: 'What is 6 * 7?' },
  });
  const id = started.startRun.id;
  for (;;) {
    const { run } = await gql<{ run: { status: string } }>(service, 'query($id: ID!) { run(id: $id) { status } }', { id });
    if (run.status !== 'RUNNING' && run.status !== 'QUEUED') return id;
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

function openSocket(wsUrl: string, token: string): Promise<WebSocket> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(wsUrl, 'graphql-transport-ws');
    socket.once('error', reject);
    socket.once('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload: { authorization: `Bearer ${token}` } })));
    socket.once('message', (data: Buffer) => {
      const message = JSON.parse(String(data)) as { type: string };
      if (message.type === 'connection_ack') resolve(socket);
      else reject(new Error(`unexpected ${message.type}`));
    });
  });
}

export interface BurstResult {
  dialect: BenchDialect;
  subscriptions: number;
  burstMs: number;
  baseline: LatencyStats;
  during: LatencyStats;
  maxOverBaselineP99: number;
}

export async function runSubscriptionBurst(dialect: BenchDialect): Promise<BurstResult> {
  const database = await createScratchDatabase(dialect);
  const service = await startServiceProcess(database.url, {
    MAX_SUBSCRIPTIONS_PER_CONNECTION: String(PER_CONNECTION),
    MAX_SUBSCRIPTIONS_PER_TOKEN: String(CONNECTIONS * PER_CONNECTION),
  });
  try {
    const runId = await finishedDemoRun(service);
    const wsUrl = service.url.replace(/^http/, 'ws');
    const sockets = await Promise.all(Array.from({ length: CONNECTIONS }, () => openSocket(wsUrl, service.token)));
    const prober = startProber(service.url);
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
    const samples = await prober.stop();
    for (const socket of sockets) socket.close();
    const { before, during } = bystanderLatency(prober, samples, burstStart, burstEnd);
    return {
      dialect,
      subscriptions: total,
      burstMs: round(burstEnd - burstStart, 0),
      baseline: before,
      during,
      maxOverBaselineP99: round(during.max / Math.max(before.p99, 0.01)),
    };
  } finally {
    await service.stop();
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
