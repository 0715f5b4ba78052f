/**
 * Live-trace fan-out: SUBSCRIBERS graphql-ws clients (default 1,000, each its
 * own socket to 127.0.0.1, opened in batches of 50) watch one run's runTrace.
 *
 * The server runs in this process (SQLite, scripted adapter through
 * options.runs.adapterFactory); the clients run in a child process
 * (runs-fanout-clients.js), so this process's memory is the server's alone.
 *
 * The run: ROUNDS rounds (default 10), the model asks for one calculator call
 * in each but the last and answers after DELAY_MS (default 5 ms) per call —
 * 40 steps. Its first call waits on a gate: steps 1–2 (CONTEXT, REQUEST of
 * round 1) are stored before any client subscribes and reach them as replay;
 * a client that has them is subscribed live. Once all are, the idle memory is
 * taken, then the gate opens and the remaining steps are streamed.
 *
 * The clients are lean graphql-transport-ws clients (default), or the
 * graphql-ws client library (FANOUT_CLIENT=library; `npm run bench` measures
 * both). All 1,000 share one process on the server's machine, so the cost of
 * the client code shows in the latency; the server's work is the same.
 *
 * Before it, the same clients watch a warm-up run with the same script to
 * its end over the same sockets (what is measured is the steady state, not
 * the first JIT compilation of the delivery path); nothing of it is counted.
 *
 * Latency of a delivery = t(client received the step) − t(step published),
 * where t(published) is when a listener this benchmark subscribed to the
 * server's in-process TraceBus (before any client) is called — the bus calls
 * listeners synchronously inside publish, right after the step is stored.
 * Both clocks are epoch ms from performance.timeOrigin + performance.now();
 * the child's offset is estimated over IPC (the sample with the smallest
 * round trip) and removed. Only steps published after the gate (live
 * deliveries, not replay) count: p50/p99 over all of them.
 *
 * Memory per idle subscriber = (heapUsed + external with the clients
 * connected, subscribed and idle − the same before the child started) / clients,
 * both after global.gc() (run node with --expose-gc).
 *
 * Also reported: server CPU per live delivery (process.cpuUsage of this
 * process from gate to last delivery, divided by deliveries; includes the
 * run's own work, which is small beside the fan-out).
 *
 * Targets: p99 < 100 ms, < 50 kB per idle subscriber.
 *
 * Run: `npx tsc -p tsconfig.build.json && NODE_ENV=production node --expose-gc dist/bench/runs-fanout.js`
 * (SUBSCRIBERS, ROUNDS, DELAY_MS override 1000 / 10 / 5.)
 */
import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createScriptedAdapter, type ScriptedReply } from '../src/runs/engine/scripted-adapter';
import type { StoredStep } from '../src/runs/trace-bus';
import { round, writeResult } from './bench-support';
import {
  BENCH_CALLER,
  RUNS_BENCH_TOKEN,
  createScratchDatabase,
  epochMs,
  markdownTable,
  seedRunConfiguration,
  sleep,
  startRunsServer,
  stats,
  traceBusOf,
  withDeadline,
  type Stats,
} from './runs-support';

const P99_TARGET_MS = 100;
const MEMORY_TARGET_KB = 50;

/** The clients: the graphql-ws client library, or lean graphql-transport-ws clients (see runs-fanout-clients.ts). */
export type FanoutClient = 'library' | 'lean';

export interface FanoutRow {
  client: FanoutClient;
  subscribers: number;
  subscribed: number;
  rounds: number;
  delayMs: number;
  steps: number;
  /** Steps published after the gate (live). */
  liveSteps: number;
  deliveriesExpected: number;
  deliveriesReceived: number;
  completedClients: number;
  clientErrors: string[];
  /** Live deliveries, ms. */
  latency: Stats;
  /** Per live step: the latency of the last subscriber to get it, ms. */
  lastSubscriberPerStep: Stats;
  p99Target: number;
  /** Time from the gate to the END step published / to the last delivery, ms. */
  runMs: number;
  lastDeliveryMs: number;
  serverCpuUsPerDelivery: number;
  /** The client process's CPU (all 1,000 clients) per live delivery, µs. */
  clientCpuUsPerDelivery: number;
  /** (heapUsed + external) delta per idle subscriber, kB. */
  memoryPerSubscriberKb: number;
  heapPerSubscriberKb: number;
  externalPerSubscriberKb: number;
  rssPerSubscriberKb: number;
  memoryTargetKb: number;
  openMs: number;
  clockOffsetMs: number;
  clockUncertaintyMs: number;
}

interface ChildMessage {
  type: string;
  id?: number;
  t?: number;
  ready?: number;
  failed?: number;
  openMs?: number;
  errors?: (string | null)[];
  received?: number[][];
  completed?: number;
  clientCpuMs?: number;
}

interface Held {
  opened: Promise<void>;
  open(): void;
  wasReached: Promise<void>;
  reached(): void;
}

function held(): Held {
  let open!: () => void;
  let reached!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  const wasReached = new Promise<void>((resolve) => (reached = resolve));
  return { opened, open, wasReached, reached };
}

function gc(): void {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (!collect) throw new Error('global.gc is missing: run node with --expose-gc');
  collect();
  collect();
}

function memory(): { heap: number; external: number; rss: number } {
  gc();
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed, external: usage.external, rss: usage.rss };
}

class ChildLink {
  private readonly waiting = new Map<string, (message: ChildMessage) => void>();
  private readonly inbox: ChildMessage[] = [];
  private exited: string | null = null;

  constructor(readonly child: ChildProcess) {
    child.on('message', (message: ChildMessage) => {
      const key = message.type === 'clock' ? `clock:${message.id}` : message.type;
      const resolve = this.waiting.get(key);
      if (resolve) {
        this.waiting.delete(key);
        resolve(message);
      } else {
        this.inbox.push(message);
      }
    });
    child.once('exit', (code) => {
      this.exited = `the client process exited with ${code}`;
      for (const [, resolve] of this.waiting) resolve({ type: 'exit' });
      this.waiting.clear();
    });
  }

  next(type: string, timeoutMs: number): Promise<ChildMessage> {
    const index = this.inbox.findIndex((m) => m.type === type);
    if (index >= 0) return Promise.resolve(this.inbox.splice(index, 1)[0]!);
    if (this.exited) return Promise.reject(new Error(this.exited));
    const message = new Promise<ChildMessage>((resolve) => this.waiting.set(type, resolve)).then((m) => {
      if (m.type === 'exit') throw new Error(this.exited ?? 'the client process exited');
      return m;
    });
    return withDeadline(message, timeoutMs, `the client process's "${type}" message`);
  }

  /** Offset of the child's clock (child − parent) from the fastest of `samples` round trips. */
  async clockOffset(samples = 40): Promise<{ offset: number; uncertainty: number }> {
    let best = { rtt: Number.POSITIVE_INFINITY, offset: 0 };
    for (let id = 0; id < samples; id += 1) {
      const sent = epochMs();
      const reply = withDeadline(
        new Promise<ChildMessage>((resolve) => this.waiting.set(`clock:${id}`, resolve)),
        5_000,
        'a clock reply',
      );
      this.child.send({ type: 'clock', id });
      const message = await reply;
      const back = epochMs();
      if (back - sent < best.rtt) best = { rtt: back - sent, offset: (message.t ?? 0) - (sent + back) / 2 };
    }
    return { offset: best.offset, uncertainty: best.rtt / 2 };
  }
}

export async function runRunsFanout(
  subscribers = Number(process.env.SUBSCRIBERS ?? 1000),
  rounds = Number(process.env.ROUNDS ?? 10),
  delayMs = Number(process.env.DELAY_MS ?? 5),
  client: FanoutClient = process.env.FANOUT_CLIENT === 'library' ? 'library' : 'lean',
): Promise<FanoutRow[]> {
  if (!Number.isInteger(subscribers) || subscribers < 1 || subscribers > 5000) throw new Error('SUBSCRIBERS must be 1..5000');
  if (!Number.isInteger(rounds) || rounds < 5 || rounds > 20) throw new Error('ROUNDS must be 5..20 (at least 20 steps)');
  gc();
  const database = await createScratchDatabase('sqlite');
  // Two runs with the same script, each held at its first provider call by its own
  // gate: a warm-up run the clients watch first, then the measured one.
  const gates = [held(), held()];
  let started = 0;
  const script = (gate: Held): ScriptedReply[] => {
    const replies: ScriptedReply[] = [];
    for (let r = 1; r <= rounds; r += 1) {
      const answer =
        r < rounds
          ? { toolCalls: [{ name: 'calculator', arguments: { expression: `${r} * 21` } }], usage: [100 + 20 * r, 12] as const, delayMs }
          : { content: 'Every intermediate value is computed.', usage: [100 + 20 * r, 12] as const, delayMs };
      replies.push(
        r === 1
          ? async () => {
              gate.reached();
              await gate.opened;
              return answer;
            }
          : answer,
      );
    }
    return replies;
  };
  const server = await startRunsServer(database, { runs: { adapterFactory: () => createScriptedAdapter(script(gates[started++] ?? held())) } });
  const [warmGate, gate] = gates as [Held, Held];
  let child: ChildProcess | null = null;
  try {
    const { services } = server;
    const configuration = await seedRunConfiguration(services);
    const input = { configuration, prompt: 'Work it out with the calculator.', tools: ['calculator'], maxRounds: rounds, stream: false };
    const warmUp = await services.runs.start(input, BENCH_CALLER);
    await withDeadline(warmGate.wasReached, 10_000, 'the warm-up run\'s first provider call');
    const view = await services.runs.start(input, BENCH_CALLER);
    const published = new Map<number, number>();
    let endPublishedAt = 0;
    let resolveEnd!: () => void;
    const ended = new Promise<void>((resolve) => (resolveEnd = resolve));
    // Subscribed before the run stores its first step (execute() waits for setImmediate) and before any client.
    traceBusOf(services.runs).subscribe(view.row.uuid, (message) => {
      if (message.type !== 'step') return;
      const step: StoredStep = message.step;
      published.set(step.sequence, epochMs());
      if (step.kind === 'end') {
        endPublishedAt = epochMs();
        resolveEnd();
      }
    });
    await withDeadline(gate.wasReached, 10_000, 'the first provider call');
    const replayed = published.size;

    const before = memory();
    child = fork(path.join(__dirname, 'runs-fanout-clients.js'), [], {
      env: {
        ...process.env,
        WS_URL: server.wsUrl,
        TOKEN: RUNS_BENCH_TOKEN,
        RUN_IDS: `${warmUp.row.uuid},${view.row.uuid}`,
        FANOUT_CLIENT: client,
        CLIENTS: String(subscribers),
        BATCH: '50',
        READY_SEQUENCE: String(replayed),
      },
      stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
    });
    const link = new ChildLink(child);
    // The warm-up run: every client watches it to the end (JIT-compiled paths, socket buffers).
    await link.next('ready', 300_000);
    warmGate.open();
    const warmDone = await link.next('done', 180_000);
    if ((warmDone.completed ?? 0) < subscribers) throw new Error(`only ${warmDone.completed} of ${subscribers} clients completed the warm-up run`);
    const ready = await link.next('ready', 300_000);
    if ((ready.failed ?? 0) > 0) console.log(`${ready.failed} of ${subscribers} clients did not subscribe:`, ready.errors);
    await sleep(1_000);
    const idle = memory();
    const clock = await link.clockOffset();

    const cpuBefore = process.cpuUsage();
    const gateAt = epochMs();
    gate.open();
    await withDeadline(ended, 120_000, 'the END step');
    const done = await link.next('done', 180_000);
    const cpu = process.cpuUsage(cpuBefore);

    const latencies: number[] = [];
    const slowestPerStep = new Map<number, number>();
    let lastDelivery = gateAt;
    for (const received of done.received ?? []) {
      for (let i = 0; i < received.length; i += 2) {
        const sequence = received[i]!;
        if (sequence <= replayed) continue;
        const at = received[i + 1]! - clock.offset;
        lastDelivery = Math.max(lastDelivery, at);
        const publishedAt = published.get(sequence);
        if (publishedAt === undefined) continue;
        latencies.push(at - publishedAt);
        slowestPerStep.set(sequence, Math.max(slowestPerStep.get(sequence) ?? 0, at - publishedAt));
      }
    }
    const liveSteps = published.size - replayed;
    const subscribed = ready.ready ?? 0;
    const perClient = (bytes: number) => round(bytes / subscribers / 1024, 2);
    const row: FanoutRow = {
      client,
      subscribers,
      subscribed,
      rounds,
      delayMs,
      steps: published.size,
      liveSteps,
      deliveriesExpected: subscribed * liveSteps,
      deliveriesReceived: latencies.length,
      completedClients: done.completed ?? 0,
      clientErrors: [...new Set((done.errors ?? []).filter((e): e is string => e !== null))].slice(0, 5),
      latency: stats(latencies, 2),
      lastSubscriberPerStep: stats([...slowestPerStep.values()], 2),
      p99Target: P99_TARGET_MS,
      runMs: round(endPublishedAt - gateAt, 1),
      lastDeliveryMs: round(lastDelivery - gateAt, 1),
      serverCpuUsPerDelivery: round((cpu.user + cpu.system) / Math.max(1, latencies.length), 1),
      clientCpuUsPerDelivery: round(((done.clientCpuMs ?? 0) * 1000) / Math.max(1, latencies.length), 1),
      memoryPerSubscriberKb: perClient(idle.heap + idle.external - before.heap - before.external),
      heapPerSubscriberKb: perClient(idle.heap - before.heap),
      externalPerSubscriberKb: perClient(idle.external - before.external),
      rssPerSubscriberKb: perClient(idle.rss - before.rss),
      memoryTargetKb: MEMORY_TARGET_KB,
      openMs: round(ready.openMs ?? 0, 0),
      clockOffsetMs: round(clock.offset, 3),
      clockUncertaintyMs: round(clock.uncertainty, 3),
    };
    child.send({ type: 'exit' });
    await Promise.race([new Promise((resolve) => child?.once('exit', resolve)), sleep(10_000)]);
    writeResult(`runs-fanout-${client}`, {
      measuredAt: new Date().toISOString(),
      node: process.version,
      nodeEnv: process.env.NODE_ENV ?? '',
      definition:
        'latency = t(client received) − t(step published on the in-process TraceBus), live steps only; memory per subscriber = Δ(heapUsed + external) of the server process with the clients idle and subscribed, after gc, / clients',
      rows: [row],
    });
    return [row];
  } finally {
    if (child && child.exitCode === null) child.kill('SIGTERM');
    await server.stop();
    await database.cleanup();
  }
}

export function formatRunsFanout(rows: readonly FanoutRow[]): string {
  return markdownTable(
    ['clients', 'subscribers (subscribed)', 'live steps (delay)', 'deliveries received / expected', 'latency p50 / p99 / max ms (target p99)', 'last subscriber per step p50 / max ms', 'last delivery after gate / run ms', 'server / client CPU µs per delivery', 'memory per idle subscriber kB (target)', 'errors'],
    rows.map((row) => [
      row.client === 'library' ? 'graphql-ws library' : 'lean protocol',
      `${row.subscribers} (${row.subscribed})`,
      `${row.liveSteps} of ${row.steps} (${row.delayMs} ms/call)`,
      `${row.deliveriesReceived} / ${row.deliveriesExpected}`,
      `${row.latency.p50} / ${row.latency.p99} / ${row.latency.max} (< ${row.p99Target}) ${row.latency.p99 < row.p99Target ? 'ok' : 'MISSED'}`,
      `${row.lastSubscriberPerStep.p50} / ${row.lastSubscriberPerStep.max}`,
      `${row.lastDeliveryMs} / ${row.runMs}`,
      `${row.serverCpuUsPerDelivery} / ${row.clientCpuUsPerDelivery}`,
      `${row.memoryPerSubscriberKb} (heap ${row.heapPerSubscriberKb} + external ${row.externalPerSubscriberKb}; rss ${row.rssPerSubscriberKb}) (< ${row.memoryTargetKb}) ${row.memoryPerSubscriberKb < row.memoryTargetKb ? 'ok' : 'MISSED'}`,
      row.clientErrors.length === 0 ? '0' : row.clientErrors.join('; '),
    ]),
  );
}

if (require.main === module) {
  runRunsFanout()
    .then((rows) => console.log(formatRunsFanout(rows)))
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
