/**
 * Live-trace fan-out as a client sees it: the same run watched by 1, 10, 100
 * and 1,000 graphql-ws clients, served by the service and by a bare
 * graphql-ws `useServer` baseline, in the same run, in alternating order.
 *
 * Processes: this orchestrator; the service (runs-fanout-service.js: the
 * real server, SQLite, a scripted provider answering each call DELAY_MS after
 * it is made, ROUNDS rounds with a calculator call in each but the last); the
 * baseline (runs-fanout-baseline.js: graphql-ws's useServer over a plain
 * in-memory step list, serving the service's own steps with the same provider
 * timing and the step timing of the service's most recent unwatched runs, each
 * replayed with its own jitter, see planBaseline); and, per measurement, the
 * clients (runs-fanout-clients.js: SUBSCRIBERS sockets to 127.0.0.1, lean
 * graphql-transport-ws clients, or the graphql-ws client library with
 * FANOUT_CLIENT=library). Every process's clock is related to this one's over
 * IPC (the sample with the smallest round trip).
 *
 * A measurement (one server, one audience size): the clients connect and
 * watch FANOUT_WARMUP_RUNS warm-up runs (5) to their end (not counted), then
 * runsAt(size) measured runs one after the other (60 at 1; from 10 watchers on,
 * enough for 1,000 live steps, 27 with the default run — a p99 of steps, and
 * paired CPU readings that a stray run does not move), each subscribed while
 * held before its first provider call and then let go. Figures:
 * - provider answer → receipt: for every delivery of a live step,
 *   t(client received it) − t(the answer it follows was due); the due time is
 *   when the provider's answer was ready (call start + DELAY_MS), so a server
 *   that handles the answer late, e.g. behind the fan-out of the previous
 *   burst, pays for it here;
 * - spread: per live step, last subscriber's receipt − first subscriber's;
 * - CPU per delivery: the server process's CPU from letting a run go to its
 *   last delivery, minus the CPU of an unwatched run measured right after it
 *   (same window: from the reading before letting the run go to the one after
 *   it ended), the median of these paired differences divided by a run's
 *   deliveries. Pairing keeps the server's drift (warming up, caches, the
 *   machine) out of the difference, which at 1 watcher is a few hundred µs
 *   against a run's several ms. The clients subscribe to the next run only
 *   after both readings. Neither server spends CPU on waiting: the baseline
 *   waits for its schedule in a worker thread (see runs-fanout-baseline's Clock);
 * - published → received (printed per turn, not a target): t(received) −
 *   t(the server published the step), the delivery path without the loop;
 * - client CPU per delivery (printed per turn, not a target): the client processes' CPU while the run
 *   goes on, per delivery: what the stand-in clients take from the machine both servers run on;
 * - memory per subscriber: Δ(heapUsed + external) of the server process with
 *   the clients subscribed and idle, after gc, / clients (100 and 1,000 only);
 * - answer → stored step: t(first step after an answer published) − t(answer
 *   due), on the server; the loop's next step waiting behind the fan-out shows here.
 * Every measurement is repeated TURNS times (default 3); the tables show the
 * median turn of every figure and of every ratio (service ÷ baseline, per turn).
 *
 * Both servers run with the service's production Node flags (package.json's config.nodeFlags). Before the
 * measured turns, both are warmed up alike with a measurement at each of WARMUP_SIZES (not counted).
 *
 * Run: `npm run build && NODE_ENV=production node dist/bench/runs-fanout.js`
 * (SIZES=1,10,100,1000 TURNS=3 ROUNDS=10 DELAY_MS=5 FANOUT_CLIENT=lean|library WARMUP_SIZES=100,1,1
 * CLIENT_PROCESSES=<CPUs>; diagnostics: FANOUT_SERVER_NODE_ARGS, FANOUT_SERVICE_NODE_ARGS, FANOUT_BASELINE_NODE_ARGS,
 * FANOUT_CPU_MARKS, FANOUT_TAIL=1 to print each measurement's worst 1 % of published → received as
 * `ms@sequence r run (answer → receipt ms)`, of answer due → published as `ms@sequence r run` (LATE) and of the
 * spread as `ms@sequence r run w<first>→w<last> (+published → first receipt ms)` (SPREAD; watchers numbered in
 * the order the client processes hold them), with every client process's first and last receipt of those
 * steps after publishing as `ms@sequence r run [first, last] …` (READING, one window per process), the
 * spread's p50/p99 by the step's place after its answer (BYPOS: #0 the first step that follows it),
 * published → received p50/p90/max by sequence (BYSEQ), answer due → first step published p50/p90/max by
 * provider call, watched and unwatched runs (BYCALL), every measured run's spread p50/max (BYRUN) and
 * every run's server and client CPU in ms (RUNCPU, w: warm-up);
 * FANOUT_RUNS=<size>:<runs>,… and FANOUT_WARMUP_RUNS=<n> for other run counts;
 * FANOUT_CLIENT_NODE_ARGS for the client processes' Node flags (e.g. --trace-gc, --cpu-prof);
 * FANOUT_PIN=1 to run the servers on one CPU and everything else on the others, see `pinned`;
 * FANOUT_CLIENT_NICE=<n> to run the client processes at that niceness, see `clientNice`).
 */
import { execFileSync, fork, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { productionNodeFlags, round, writeResult } from './bench-support';
import { epochMs, type Reply, type Request, type RunPlan, type RunRecord, type RunTiming } from './runs-fanout-protocol';
import { markdownTable, percentile, sleep, withDeadline } from './runs-support';

const P99_ABSOLUTE_TARGET_MS = 100;
/** How many of the service's most recent unwatched runs the baseline replays the timings of (see planBaseline). */
const REPLAYED_TIMINGS = 120;

type Kind = 'service' | 'baseline';

interface ClientMessage {
  type: string;
  id?: number;
  t?: number;
  ready?: number;
  failed?: number;
  errors?: (string | null)[];
  received?: number[][];
  completed?: number;
  clientCpuMs?: number;
}

/** A forked process that answers requests over IPC, one kind of reply at a time. */
class Link<M extends { type: string; id?: number }> {
  private readonly waiting = new Map<string, (message: M) => void>();
  private readonly inbox: M[] = [];
  private exited: string | null = null;
  offset = 0;

  constructor(
    readonly name: string,
    readonly child: ChildProcess,
  ) {
    child.on('message', (message: M) => {
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
      this.exited = `${name} exited with ${code}`;
      for (const [, resolve] of this.waiting) resolve({ type: 'exit' } as M);
      this.waiting.clear();
    });
  }

  next(type: string, timeoutMs = 300_000): Promise<M> {
    const index = this.inbox.findIndex((m) => m.type === type);
    if (index >= 0) return Promise.resolve(this.inbox.splice(index, 1)[0]!);
    if (this.exited) return Promise.reject(new Error(this.exited));
    const message = new Promise<M>((resolve) => this.waiting.set(type, resolve)).then((m) => {
      if (m.type === 'exit') throw new Error(this.exited ?? `${this.name} exited`);
      return m;
    });
    return withDeadline(message, timeoutMs, `${this.name}'s "${type}" message`);
  }

  send(message: unknown): void {
    this.child.send(message as object);
  }

  /** Sets `offset` (child clock − this clock) from the fastest of `samples` round trips. */
  async syncClock(samples = 40): Promise<void> {
    let best = { rtt: Number.POSITIVE_INFINITY, offset: 0 };
    for (let id = 0; id < samples; id += 1) {
      const sent = epochMs();
      const reply = withDeadline(new Promise<M>((resolve) => this.waiting.set(`clock:${id}`, resolve)), 5_000, 'a clock reply');
      this.send({ type: 'clock', id });
      const message = (await reply) as M & { t?: number };
      const back = epochMs();
      if (back - sent < best.rtt) best = { rtt: back - sent, offset: (message.t ?? 0) - (sent + back) / 2 };
    }
    this.offset = best.offset;
  }

  async exit(): Promise<void> {
    if (this.child.exitCode !== null) return;
    const exited = new Promise((resolve) => this.child.once('exit', resolve));
    this.send({ type: 'exit' });
    await Promise.race([exited, sleep(10_000)]);
    if (this.child.exitCode === null) this.child.kill('SIGTERM');
  }
}

type ServerLink = Link<Reply>;

/**
 * FANOUT_PIN=1: the servers run on the last CPU, this process and the clients on the others (taskset), as a
 * server and its clients are on separate machines in use. Otherwise a server's loop and a client's reading
 * share both CPUs, and a watched run's loop is preempted by its own client.
 */
const pinned = process.env.FANOUT_PIN === '1' && os.availableParallelism() >= 2;
const serverCpus = String(os.availableParallelism() - 1);
const clientCpus = `0-${os.availableParallelism() - 2}`;

/**
 * FANOUT_CLIENT_NICE=<n>: the client processes run at that niceness (os.setPriority), so that on a machine
 * where they share the CPUs with the servers a server writing to its subscribers is not preempted by their
 * reading (on separate machines it never is); the clients still read on any CPU the servers leave idle.
 */
const clientNice = Number(process.env.FANOUT_CLIENT_NICE ?? 0);

function pin(pid: number | undefined, cpus: string): void {
  if (!pinned || pid === undefined) return;
  // -a: every thread of the process (libuv's and V8's too); threads started later inherit it.
  execFileSync('taskset', ['-a', '-p', '-c', cpus, String(pid)], { stdio: 'ignore' });
}

async function startServer(script: string, env: Record<string, string>): Promise<{ link: ServerLink; wsUrl: string; token: string }> {
  const child = fork(path.join(__dirname, script), [], {
    env: { ...process.env, NODE_ENV: 'production', ...env },
    // Both servers run with the service's production Node flags (package.json's config.nodeFlags, as `npm start`
    // and the Docker image run it), then the flags of FANOUT_SERVER_NODE_ARGS for both and of
    // FANOUT_SERVICE_NODE_ARGS / FANOUT_BASELINE_NODE_ARGS for one (diagnostics such as --cpu-prof or --trace-deopt).
    execArgv: [
      '--expose-gc',
      ...[productionNodeFlags(), process.env.FANOUT_SERVER_NODE_ARGS, process.env[script.includes('baseline') ? 'FANOUT_BASELINE_NODE_ARGS' : 'FANOUT_SERVICE_NODE_ARGS']].join(' ').split(' ').filter(Boolean),
    ],
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  pin(child.pid, serverCpus);
  const link = new Link<Reply>(script, child);
  const ready = (await link.next('ready', 120_000)) as Extract<Reply, { type: 'ready' }>;
  await link.syncClock();
  return { link, wsUrl: ready.wsUrl, token: ready.token };
}

function request<T extends Reply['type']>(link: ServerLink, message: Request, replyType: T): Promise<Extract<Reply, { type: T }>> {
  const reply = link.next(replyType);
  link.send(message);
  return reply as Promise<Extract<Reply, { type: T }>>;
}

/** One server watched by `size` clients: the raw figures of one turn. */
export interface Measurement {
  kind: Kind;
  size: number;
  runs: number;
  deliveriesExpected: number;
  deliveriesReceived: number;
  errors: string[];
  latencyP50: number;
  latencyP99: number;
  /** Published on the server → received, ms. */
  handOverP50: number;
  handOverP99: number;
  spreadP50: number;
  spreadP99: number;
  cpuUsPerDelivery: number;
  /** Of which the garbage collector's pauses (mean of the paired differences, per delivery): a diagnostic. */
  gcUsPerDelivery: number;
  /**
   * The client processes' CPU from the moment every client was subscribed to the run's END, summed over
   * them, per delivery received (not a target: a diagnostic of what the stand-in clients take from the
   * machine the servers run on).
   */
  clientCpuUsPerDelivery: number;
  memoryKbPerSubscriber: number | null;
  storedDelayP50: number;
  storedDelayP99: number;
  /** Every live step: published − the answer it follows due, ms, in the watched runs and in their paired unwatched runs (a diagnostic). */
  publishedDelayP50: number;
  publishedDelayP99: number;
  unwatchedPublishedDelayP50: number;
  unwatchedPublishedDelayP99: number;
}

interface Reference {
  storedDelayP50: number;
  storedDelayP99: number;
  records: RunRecord[];
}

const median = (values: readonly number[]) => percentile([...values].sort((a, b) => a - b), 50);

/**
 * Live steps a measurement at 10 watchers or more takes at least, so that its spread's p99 is a p99: with
 * 8 runs at 100 watchers (304 steps) it was the third-largest step's spread and with 3 at 1,000 (114
 * steps) the second-largest, and the three steps of one chain corked into one write share one spread,
 * so one slow moment decided a turn's figure (2026-12-01: at 100 watchers the per-turn ratio went from
 * 0.98× to 2.03× between runs of the same build).
 */
const MIN_STEPS_PER_MEASUREMENT = 1000;

/** FANOUT_RUNS=<size>:<runs>,…: measured runs per measurement at those sizes instead of runsAt's. */
const runsOverride = new Map((process.env.FANOUT_RUNS ?? '').split(',').filter(Boolean).map((pair) => pair.split(':').map(Number) as [number, number]));

/**
 * Runs the clients watch after subscribing, before the measured ones (not counted). Each measurement starts
 * fresh client processes: their CPU per run fell from some 185 ms to 45 ms only by the fourth or fifth run (100
 * watchers; the service's own CPU per run from 140–170 ms to 50–90 ms), and with one warm-up run the first
 * two measured runs' spreads (p50 8.9 and 4.9 ms against 1.6–2.7 ms after) made most of the service's
 * worst 1 % (2026-12-01). Five since 2026-12-02 (see settleBeforeRun).
 */
const warmupRuns = Number(process.env.FANOUT_WARMUP_RUNS ?? 5);

/**
 * The warm-up run before which the server's memory is read (a forced collection and half a second idle) and the
 * clocks are related: early, so that the runs after it warm up again before the measured ones. Read right before
 * the first measured run (until 2026-12-02), it made that run the measurement's slowest: at 100 watchers its
 * client CPU was 82–108 ms against 39–54 ms for the run after it, and its spread p50 4–8.5 ms against about 2.
 */
const settleBeforeRun = Math.min(1, warmupRuns - 1);

/** Measured runs at `size` watchers for runs of `liveSteps` live steps: 60 at 1 watcher (for the latency's p99), else enough for MIN_STEPS_PER_MEASUREMENT steps. */
function runsAt(size: number, liveSteps: number): number {
  return runsOverride.get(size) ?? (size <= 1 ? 60 : Math.ceil(MIN_STEPS_PER_MEASUREMENT / Math.max(1, liveSteps)));
}

/** Per live step: [published − the answer it follows due (ms, server clock), its sequence, its run's index in `records`]. */
function publishedDelays(records: readonly RunRecord[]): [number, number, number][] {
  const delays: [number, number, number][] = [];
  records.forEach((record, run) => {
    for (const [sequence, publishedAt, answer] of record.published) if (answer >= 0) delays.push([publishedAt - record.calls[answer]!.dueAt, sequence, run]);
  });
  return delays;
}

/** p50 and p99 of publishedDelays. */
function publishedDelayPercentiles(records: readonly RunRecord[]): [number, number] {
  const delays = publishedDelays(records)
    .map(([delay]) => delay)
    .sort((a, b) => a - b);
  return [round(percentile(delays, 50), 2), round(percentile(delays, 99), 2)];
}

/** FANOUT_TAIL: per provider call of a run (#0 the first), answer due → first step after it published, p50/p90/max over the runs. */
function byCall(records: readonly RunRecord[]): string {
  const perCall: number[][] = [];
  for (const record of records) {
    record.calls.forEach((call, index) => {
      const first = record.published.find(([, , answer]) => answer === index);
      if (first) (perCall[index] ??= []).push(first[1] - call.dueAt);
    });
  }
  return perCall
    .map((list, index) => {
      list.sort((a, b) => a - b);
      return `#${index} ${round(percentile(list, 50), 2)}/${round(percentile(list, 90), 2)}/${round(list[list.length - 1]!, 2)}`;
    })
    .join(' ');
}

/** Per answer: first step after it published − answer due (ms, server clock). */
function storedDelays(records: readonly RunRecord[]): number[] {
  const delays: number[] = [];
  for (const record of records) {
    record.calls.forEach((call, index) => {
      const first = record.published.find(([, , answer]) => answer === index);
      if (first) delays.push(first[1] - call.dueAt);
    });
  }
  return delays;
}

/**
 * Lets a prepared run go with nobody watching; its record and its CPU, over the same window as a watched run's
 * (measure): from the reading before `open` to the one after `ended`, so work the server does after a run's last
 * step (finishing the run) counts on both sides.
 */
async function runUnwatched(link: ServerLink, runId: string, timing?: number): Promise<{ record: RunRecord; cpuUs: number; gcUs: number }> {
  const atOpen = await request(link, { type: 'cpu', label: 'unwatched-open' }, 'cpu');
  const { record } = await request(link, { type: 'open', runId, timing }, 'ended');
  const atDone = await request(link, { type: 'cpu', label: 'unwatched-done' }, 'cpu');
  return { record, cpuUs: atDone.us - atOpen.us, gcUs: atDone.gcUs - atOpen.gcUs };
}

async function unwatched(link: ServerLink, count: number): Promise<Reference> {
  const prepared = await request(link, { type: 'prepare', count }, 'prepared');
  const records: RunRecord[] = [];
  for (const runId of prepared.runIds) {
    records.push((await runUnwatched(link, runId)).record);
    await sleep(20);
  }
  const delays = storedDelays(records).sort((a, b) => a - b);
  return { storedDelayP50: percentile(delays, 50), storedDelayP99: percentile(delays, 99), records };
}

/**
 * The plan the baseline follows: the service's steps, and the timing of each of `records` (unwatched runs of the
 * service) to replay one after another. Each run's own timing, not the medians over them: the service's loop has
 * jitter (a slower commit, a collection), and a baseline replaying medians would have none, so its p99 would lack
 * what the service's includes at every audience size.
 */
function planFrom(records: readonly RunRecord[], steps: Record<string, unknown>[], replaySequence: number, delayMs: number): RunPlan {
  const timings = records.map((record): RunTiming => ({
    offsets: record.published.filter(([sequence]) => sequence > replaySequence).map(([, publishedAt, answer]): [number, number] => [answer, publishedAt - record.calls[answer]!.dueAt]),
    callStarts: record.calls.slice(1).map((call, index) => call.startedAt - record.calls[index]!.dueAt),
  }));
  return { steps, replaySequence, timings, delayMs };
}

/**
 * The client processes of one measurement, answering as one: 'ready' and 'done' once every process sent
 * its own, with their counts summed and every receipt time on this process's clock (each process's
 * offset, from syncClock, taken off).
 */
class ClientProcesses {
  constructor(private readonly links: Link<ClientMessage>[]) {}

  async next(type: 'ready' | 'done'): Promise<ClientMessage> {
    const messages = await Promise.all(this.links.map((link) => link.next(type)));
    const errors = messages.flatMap((message) => message.errors ?? []);
    if (type === 'ready') {
      const total = (key: 'ready' | 'failed') => messages.reduce((sum, message) => sum + (message[key] ?? 0), 0);
      return { type, ready: total('ready'), failed: total('failed'), errors };
    }
    const received = messages.flatMap((message, index) => {
      const offset = this.links[index]!.offset;
      return (message.received ?? []).map((watcher) => watcher.map((value, i) => (i % 2 === 1 ? value - offset : value)));
    });
    return { type, received, errors, clientCpuMs: messages.reduce((sum, message) => sum + (message.clientCpuMs ?? 0), 0) };
  }

  async syncClock(): Promise<void> {
    for (const link of this.links) await link.syncClock();
  }

  send(message: unknown): void {
    for (const link of this.links) link.send(message);
  }

  async exit(): Promise<void> {
    await Promise.all(this.links.map((link) => link.exit()));
  }
}

/** How many of `size` subscribers client process `index` of `processes` holds. */
function shareOf(size: number, processes: number, index: number): number {
  return Math.floor(size / processes) + (index < size % processes ? 1 : 0);
}

/** The recorded timing the baseline replays for the next watched run (see measure). */
let watchedTiming = 0;

/**
 * `unwatchedPool`: the service's unwatched runs so far, most recent last; a service measurement adds the unwatched
 * run paired with each watched one.
 */
async function measure(kind: Kind, server: { link: ServerLink; wsUrl: string; token: string }, size: number, client: string, clientProcesses: number, unwatchedPool: RunRecord[], liveSteps: number): Promise<Measurement> {
  const { link } = server;
  const count = runsAt(size, liveSteps);
  const prepared = await request(link, { type: 'prepare', count: count + warmupRuns }, 'prepared');
  /** One unwatched run beside each measured one, for its CPU. */
  const pairs = await request(link, { type: 'prepare', count }, 'prepared');
  const before = (await request(link, { type: 'memory' }, 'memory')).bytes;
  // The subscribers in CLIENT_PROCESSES processes (default one per CPU; never more than there are
  // subscribers), each with its own share of the sockets. One process reads every socket in turn, so a
  // step's spread was that process's reading of all its sockets, whichever server wrote them: at 1,000
  // watchers some 30 ms for both, a server that writes a step to every socket in 10 ms no better off than
  // one that takes 40. Subscribers are separate clients; one process per CPU lets the reading go on in
  // parallel as theirs does, without more processes than the machine can run (eight on this 2-core machine
  // made both servers' spreads larger and noisier, 2026-12-01).
  const processes = Math.max(1, Math.min(size, clientProcesses));
  const clients = new ClientProcesses(
    Array.from({ length: processes }, (_, index) => {
      const share = shareOf(size, processes, index);
      const child = fork(path.join(__dirname, 'runs-fanout-clients.js'), [], {
        env: {
          ...process.env,
          WS_URL: server.wsUrl,
          TOKEN: server.token,
          RUN_IDS: prepared.runIds.join(','),
          FANOUT_CLIENT: client,
          CLIENTS: String(share),
          BATCH: '50',
          READY_SEQUENCE: String(prepared.replaySequence),
        },
        stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
        execArgv: [...process.execArgv, ...(process.env.FANOUT_CLIENT_NODE_ARGS ?? '').split(' ').filter(Boolean)],
      });
      pin(child.pid, clientCpus);
      if (clientNice !== 0 && child.pid !== undefined) os.setPriority(child.pid, clientNice);
      return new Link<ClientMessage>(`client process ${index + 1}`, child);
    }),
  );
  try {
    const records: RunRecord[] = [];
    const received: number[][][] = [];
    const cpuPerRun: number[] = [];
    const gcPerRun: number[] = [];
    let clientCpuTotal = 0;
    /** FANOUT_TAIL: every run's server CPU and client CPU (ms), warm-up runs included. */
    const runCosts: string[] = [];
    const unwatchedRecords: RunRecord[] = [];
    let memoryKbPerSubscriber: number | null = null;
    let subscribed = 0;
    const errors = new Set<string>();
    for (const [index, runId] of prepared.runIds.entries()) {
      const ready = await clients.next('ready');
      if ((ready.failed ?? 0) > 0) errors.add(`${ready.failed} clients did not subscribe: ${(ready.errors ?? []).join('; ')}`);
      if (index === settleBeforeRun) {
        await sleep(500);
        if (size >= 100) memoryKbPerSubscriber = round(((await request(link, { type: 'memory' }, 'memory')).bytes - before) / size / 1024, 1);
        await clients.syncClock();
      }
      if (index === warmupRuns) subscribed = ready.ready ?? 0;
      const atOpen = await request(link, { type: 'cpu', label: 'watched-open' }, 'cpu');
      // The baseline replays every recorded timing in turn for the watched runs, and the same one for the unwatched
      // run paired with each. (Left to take the next in turn, watched and unwatched runs alternated, so the watched
      // runs of a measurement replayed only every other timing: half of them, never the other half.)
      const timing = (watchedTiming += 1);
      const ended = await request(link, { type: 'open', runId, timing }, 'ended');
      const done = await clients.next('done');
      const atDone = await request(link, { type: 'cpu', label: 'watched-done' }, 'cpu');
      if (index >= warmupRuns) {
        await sleep(20);
        const unwatchedRun = await runUnwatched(link, pairs.runIds[index - warmupRuns]!, timing);
        cpuPerRun.push(atDone.us - atOpen.us - unwatchedRun.cpuUs);
        unwatchedRecords.push(unwatchedRun.record);
        if (kind === 'service') unwatchedPool.push(unwatchedRun.record);
        gcPerRun.push(atDone.gcUs - atOpen.gcUs - unwatchedRun.gcUs);
      }
      // Only now the clients subscribe to the next run: its start (token check, replay read) is in neither reading.
      clients.send({ type: 'go' });
      for (const error of done.errors ?? []) if (error) errors.add(error);
      if (process.env.FANOUT_TAIL) runCosts.push(`${index < warmupRuns ? 'w' : 'r'}${index} ${round((atDone.us - atOpen.us) / 1000, 1)}/${round(done.clientCpuMs ?? 0, 1)}`);
      if (index < warmupRuns) continue;
      records.push(ended.record);
      received.push(done.received ?? []);
      clientCpuTotal += done.clientCpuMs ?? 0;
      await sleep(20);
    }
    // Relate every clock to this process's.
    const latencies: number[] = [];
    /** Published on the server → received: the delivery path alone, without the loop's timing. */
    const handOvers: number[] = [];
    const spreads: number[] = [];
    const tailDiag: [number, number, number, number][] = [];
    /** FANOUT_TAIL: [spread, sequence, run, first watcher, last watcher, published → first receipt]. */
    const spreadDiag: [number, number, number, number, number, number][] = [];
    /** FANOUT_TAIL: [spread, text] with every client process's reading window of the step. */
    const readingDiag: [number, string][] = [];
    /** FANOUT_TAIL: spreads by the step's place after its answer (0: the first step that follows it). */
    const spreadsByPosition = new Map<number, number[]>();
    /** FANOUT_TAIL: every run's spread p50 and max. */
    const spreadsByRun: string[] = [];
    let deliveries = 0;
    let expected = 0;
    records.forEach((record, r) => {
      const dueOf = new Map<number, number>();
      const publishedOf = new Map<number, number>();
      for (const [sequence, publishedAt, answer] of record.published) {
        if (answer < 0) continue;
        dueOf.set(sequence, record.calls[answer]!.dueAt - link.offset);
        publishedOf.set(sequence, publishedAt - link.offset);
      }
      expected += dueOf.size * subscribed;
      const firstLast = new Map<number, [number, number]>();
      /** FANOUT_TAIL: which watcher (index in the order the clients reported) was first and last per sequence. */
      const whoFirstLast = new Map<number, [number, number]>();
      for (const [w, watcher] of received[r]!.entries()) {
        for (let i = 0; i < watcher.length; i += 2) {
          const due = dueOf.get(watcher[i]!);
          if (due === undefined) continue;
          const at = watcher[i + 1]!;
          latencies.push(at - due);
          handOvers.push(at - publishedOf.get(watcher[i]!)!);
          if (process.env.FANOUT_TAIL) tailDiag.push([at - publishedOf.get(watcher[i]!)!, watcher[i]!, at - due, r]);
          deliveries += 1;
          const span = firstLast.get(watcher[i]!);
          if (span) {
            if (process.env.FANOUT_TAIL) {
              const who = whoFirstLast.get(watcher[i]!)!;
              whoFirstLast.set(watcher[i]!, [at < span[0] ? w : who[0], at > span[1] ? w : who[1]]);
            }
            firstLast.set(watcher[i]!, [Math.min(span[0], at), Math.max(span[1], at)]);
          } else {
            firstLast.set(watcher[i]!, [at, at]);
            whoFirstLast.set(watcher[i]!, [w, w]);
          }
        }
      }
      if (process.env.FANOUT_TAIL && processes > 1) {
        // Each client process's first and last receipt of every step, after it was published.
        // Watchers are numbered in the order the processes hold them, each process its share.
        const processOf: number[] = [];
        for (let index = 0; index < processes; index += 1) for (let k = 0; k < shareOf(size, processes, index); k += 1) processOf.push(index);
        const windows = new Map<number, [number, number][]>();
        for (const [w, watcher] of received[r]!.entries()) {
          for (let i = 0; i < watcher.length; i += 2) {
            const published = publishedOf.get(watcher[i]!);
            if (published === undefined) continue;
            let perProcess = windows.get(watcher[i]!);
            if (!perProcess) windows.set(watcher[i]!, (perProcess = Array.from({ length: processes }, () => [Infinity, -Infinity])));
            const window = perProcess[processOf[w]!]!;
            window[0] = Math.min(window[0], watcher[i + 1]! - published);
            window[1] = Math.max(window[1], watcher[i + 1]! - published);
          }
        }
        for (const [sequence, perProcess] of windows) {
          const spread = Math.max(...perProcess.map(([, last]) => last)) - Math.min(...perProcess.map(([first]) => first));
          readingDiag.push([spread, `${round(spread, 2)}@${sequence}r${r} ${perProcess.map(([first, last]) => `[${round(first, 1)}, ${round(last, 1)}]`).join(' ')}`]);
        }
      }
      /** FANOUT_TAIL: each live step's place after the answer it follows (0: the first step after it). */
      const positionOf = new Map<number, number>();
      if (process.env.FANOUT_TAIL) {
        const seen = new Map<number, number>();
        for (const [sequence, , answer] of record.published) {
          if (answer < 0) continue;
          const position = seen.get(answer) ?? 0;
          seen.set(answer, position + 1);
          positionOf.set(sequence, position);
        }
        const own = [...firstLast.values()].map(([first, last]) => last - first).sort((a, b) => a - b);
        spreadsByRun.push(`r${r} ${round(percentile(own, 50), 1)}/${round(own[own.length - 1] ?? 0, 1)}`);
      }
      for (const [sequence, [first, last]] of firstLast) {
        spreads.push(last - first);
        if (process.env.FANOUT_TAIL) {
          const position = positionOf.get(sequence) ?? -1;
          let list = spreadsByPosition.get(position);
          if (!list) spreadsByPosition.set(position, (list = []));
          list.push(last - first);
          const [firstWatcher, lastWatcher] = whoFirstLast.get(sequence)!;
          spreadDiag.push([last - first, sequence, r, firstWatcher, lastWatcher, first - publishedOf.get(sequence)!]);
        }
      }
    });
    if (process.env.FANOUT_TAIL) {
      tailDiag.sort((a, b) => b[0] - a[0]);
      const late = publishedDelays(records).sort((a, b) => b[0] - a[0]);
      console.log(`LATE ${kind} ${size}: ` + late.slice(0, Math.ceil(late.length / 100)).map(([ms, seq, run]) => `${round(ms, 2)}@${seq}r${run}`).join(' '));
      spreadDiag.sort((a, b) => b[0] - a[0]);
      if (size > 1) console.log(`SPREAD ${kind} ${size}: ` + spreadDiag.slice(0, Math.ceil(spreadDiag.length / 100)).map(([ms, seq, run, first, last, lead]) => `${round(ms, 2)}@${seq}r${run} w${first}→w${last} (+${round(lead, 2)})`).join(' '));
      if (size > 1)
        console.log(
          `BYPOS ${kind} ${size}: ` +
            [...spreadsByPosition]
              .sort((a, b) => a[0] - b[0])
              .map(([position, list]) => {
                list.sort((a, b) => a - b);
                return `#${position} ${round(percentile(list, 50), 2)}/${round(percentile(list, 99), 2)} (${list.length})`;
              })
              .join(' '),
        );
      if (size > 1) console.log(`BYRUN ${kind} ${size}: ${spreadsByRun.join(' ')}`);
      console.log(`RUNCPU ${kind} ${size} (server/clients ms): ${runCosts.join(' ')}`);
      readingDiag.sort((a, b) => b[0] - a[0]);
      if (readingDiag.length > 0) console.log(`READING ${kind} ${size}: ` + readingDiag.slice(0, Math.ceil(readingDiag.length / 100)).map(([, text]) => text).join(' '));
      const bySequence = new Map<number, number[]>();
      for (const [handOver, sequence] of tailDiag) {
        const list = bySequence.get(sequence);
        if (list) list.push(handOver);
        else bySequence.set(sequence, [handOver]);
      }
      console.log(
        `BYSEQ ${kind} ${size} (published → received p50/p90/max ms): ` +
          [...bySequence]
            .sort((a, b) => a[0] - b[0])
            .map(([sequence, list]) => {
              list.sort((a, b) => a - b);
              return `${sequence} ${round(percentile(list, 50), 2)}/${round(percentile(list, 90), 2)}/${round(list[list.length - 1]!, 2)}`;
            })
            .join(' '),
      );
      console.log(`TAIL ${kind} ${size}: ` + tailDiag.slice(0, Math.ceil(tailDiag.length / 100)).map(([h, seq, lat, run]) => `${round(h, 2)}@${seq}r${run}(${round(lat, 1)})`).join(' '));
      console.log(`BYCALL ${kind} ${size} (answer due → first step published p50/p90/max ms, watched | unwatched): ${byCall(records)} | ${byCall(unwatchedRecords)}`);
    }
    latencies.sort((a, b) => a - b);
    handOvers.sort((a, b) => a - b);
    spreads.sort((a, b) => a - b);
    const delays = storedDelays(records).sort((a, b) => a - b);
    const [publishedDelayP50, publishedDelayP99] = publishedDelayPercentiles(records);
    const [unwatchedPublishedDelayP50, unwatchedPublishedDelayP99] = publishedDelayPercentiles(unwatchedRecords);
    return {
      kind,
      size,
      runs: count,
      deliveriesExpected: expected,
      deliveriesReceived: deliveries,
      errors: [...errors].slice(0, 3),
      latencyP50: round(percentile(latencies, 50), 2),
      latencyP99: round(percentile(latencies, 99), 2),
      handOverP50: round(percentile(handOvers, 50), 2),
      handOverP99: round(percentile(handOvers, 99), 2),
      spreadP50: round(percentile(spreads, 50), 2),
      spreadP99: round(percentile(spreads, 99), 2),
      // The median of paired differences: one run's CPU moves by more than its deliveries cost at small sizes.
      cpuUsPerDelivery: round(median(cpuPerRun) / Math.max(1, deliveries / count), 1),
      gcUsPerDelivery: round(gcPerRun.reduce((sum, value) => sum + value, 0) / Math.max(1, deliveries), 1),
      clientCpuUsPerDelivery: round((clientCpuTotal * 1000) / Math.max(1, deliveries), 1),
      memoryKbPerSubscriber,
      storedDelayP50: round(percentile(delays, 50), 2),
      storedDelayP99: round(percentile(delays, 99), 2),
      publishedDelayP50,
      publishedDelayP99,
      unwatchedPublishedDelayP50,
      unwatchedPublishedDelayP99,
    };
  } finally {
    await clients.exit();
  }
}

export interface FanoutRow {
  size: number;
  turns: number;
  service: Measurement;
  baseline: Measurement;
  /** Median over turns of service ÷ baseline. */
  ratio: { latencyP50: number; latencyP99: number; spreadP99: number | null; cpu: number | null; memory: number | null };
  /** Median over turns of the unwatched runs' answer → stored step (service), ms. */
  unwatchedStoredDelayP50: number;
  unwatchedStoredDelayP99: number;
  targets: { latency: boolean; spread: boolean; cpu: boolean | null };
}

function medianMeasurement(turns: readonly Measurement[]): Measurement {
  const pick = (key: keyof Measurement) => round(median(turns.map((m) => m[key] as number)), 2);
  const memory = turns.map((m) => m.memoryKbPerSubscriber).filter((v): v is number => v !== null);
  return {
    ...turns[0]!,
    deliveriesExpected: turns.reduce((sum, m) => sum + m.deliveriesExpected, 0),
    deliveriesReceived: turns.reduce((sum, m) => sum + m.deliveriesReceived, 0),
    errors: [...new Set(turns.flatMap((m) => m.errors))].slice(0, 3),
    latencyP50: pick('latencyP50'),
    latencyP99: pick('latencyP99'),
    handOverP50: pick('handOverP50'),
    handOverP99: pick('handOverP99'),
    spreadP50: pick('spreadP50'),
    spreadP99: pick('spreadP99'),
    cpuUsPerDelivery: pick('cpuUsPerDelivery'),
    clientCpuUsPerDelivery: pick('clientCpuUsPerDelivery'),
    memoryKbPerSubscriber: memory.length > 0 ? round(median(memory), 1) : null,
    storedDelayP50: pick('storedDelayP50'),
    storedDelayP99: pick('storedDelayP99'),
    publishedDelayP50: pick('publishedDelayP50'),
    publishedDelayP99: pick('publishedDelayP99'),
    unwatchedPublishedDelayP50: pick('unwatchedPublishedDelayP50'),
    unwatchedPublishedDelayP99: pick('unwatchedPublishedDelayP99'),
  };
}

export async function runRunsFanout(): Promise<{ rows: FanoutRow[]; perTurn: Measurement[][] }> {
  const sizes = (process.env.SIZES ?? '1,10,100,1000').split(',').map(Number);
  const turns = Number(process.env.TURNS ?? 3);
  const rounds = Number(process.env.ROUNDS ?? 10);
  const delayMs = Number(process.env.DELAY_MS ?? 5);
  const client = process.env.FANOUT_CLIENT === 'library' ? 'library' : 'lean';
  const warmupSizes = (process.env.WARMUP_SIZES ?? '100,1,1').split(',').map(Number);
  const clientProcesses = Number(process.env.CLIENT_PROCESSES ?? os.availableParallelism());
  if (!Number.isInteger(clientProcesses) || clientProcesses < 1) throw new Error('CLIENT_PROCESSES must be a positive integer');
  if (sizes.some((size) => !Number.isInteger(size) || size < 1 || size > 5000)) throw new Error('SIZES must be integers 1..5000');
  if (!Number.isInteger(warmupRuns) || warmupRuns < 1) throw new Error('FANOUT_WARMUP_RUNS must be a positive integer (fresh client processes are slow for their first runs)');
  for (const [size, runs] of runsOverride) {
    if (!Number.isInteger(size) || !Number.isInteger(runs) || runs < 1) throw new Error('FANOUT_RUNS must be <size>:<runs> pairs of positive integers (e.g. 100:40,1000:12)');
  }
  const env = { ROUNDS: String(rounds), DELAY_MS: String(delayMs) };
  pin(process.pid, clientCpus);
  const service = await startServer('runs-fanout-service.js', env);
  const baseline = await startServer('runs-fanout-baseline.js', env);
  try {
    // The baseline serves the service's own steps with the timings of its unwatched runs (see planBaseline).
    // Ten runs warm the service's code up; the next 20, as a warm service runs them, are the first timings.
    await unwatched(service.link, 10);
    const warm = await unwatched(service.link, 20);
    const steps = (await request(service.link, { type: 'steps', runId: warm.records[0]!.runId }, 'steps')).steps;
    const replaySequence = Math.min(...warm.records.map((r) => r.published.filter(([, , answer]) => answer < 0).length));
    const unwatchedPool: RunRecord[] = [...warm.records];
    /**
     * Before every baseline measurement, the timings it replays: the service's REPLAYED_TIMINGS most recent unwatched
     * runs (the pairs of its last measurements, its reference runs), so that the loop's jitter the baseline is
     * given is the service's own in the same stretch of the benchmark, stalls included at the rate they happen.
     * (A fixed set of 20 runs recorded at the start made the baseline's p99 hang on whether one of those 20 had
     * stalled: one run is 5 % of every measurement's runs.)
     */
    const planBaseline = () => request(baseline.link, { type: 'plan', plan: planFrom(unwatchedPool.slice(-REPLAYED_TIMINGS), steps, replaySequence, delayMs) }, 'planned');
    const servers = { service, baseline };
    const measureOn = async (kind: Kind, size: number) => {
      if (kind === 'baseline') await planBaseline();
      return measure(kind, servers[kind], size, client, clientProcesses, unwatchedPool, steps.length - replaySequence);
    };
    // Not counted: both servers warmed up alike, so that what is measured is their steady state (see WARMUP_SIZES).
    for (const size of warmupSizes) for (const kind of ['service', 'baseline'] as const) await measureOn(kind, size);

    const perTurn: Measurement[][] = [];
    const unwatchedDelays: number[][] = [];
    for (let turn = 0; turn < turns; turn += 1) {
      const references = { service: await unwatched(service.link, 9), baseline: await planBaseline().then(() => unwatched(baseline.link, 9)) };
      unwatchedPool.push(...references.service.records);
      unwatchedDelays.push([references.service.storedDelayP50, references.service.storedDelayP99]);
      const results: Measurement[] = [];
      for (const [index, size] of sizes.entries()) {
        const order: Kind[] = (turn + index) % 2 === 0 ? ['service', 'baseline'] : ['baseline', 'service'];
        for (const kind of order) {
          const result = await measureOn(kind, size);
          console.log(`turn ${turn + 1} ${kind} ${size}: p50 ${result.latencyP50} p99 ${result.latencyP99} (published → received ${result.handOverP50} / ${result.handOverP99}) spread p50 / p99 ${result.spreadP50} / ${result.spreadP99} cpu ${result.cpuUsPerDelivery} µs (gc ${result.gcUsPerDelivery}; clients ${result.clientCpuUsPerDelivery}) stored p50 ${result.storedDelayP50} p99 ${result.storedDelayP99} published p50 / p99 ${result.publishedDelayP50} / ${result.publishedDelayP99} (unwatched ${result.unwatchedPublishedDelayP50} / ${result.unwatchedPublishedDelayP99}) (${result.deliveriesReceived}/${result.deliveriesExpected})`);
          results.push(result);
        }
      }
      perTurn.push(results);
    }
    const rows = sizes.map((size): FanoutRow => {
      const of = (kind: Kind) => perTurn.map((results) => results.find((m) => m.kind === kind && m.size === size)!);
      const s = of('service');
      const b = of('baseline');
      const ratios = (key: 'latencyP50' | 'latencyP99' | 'spreadP99' | 'cpuUsPerDelivery') => round(median(s.map((m, i) => m[key] / Math.max(b[i]![key], 1e-9))), 2);
      // CPU per delivery is a difference (watched − unwatched run): with few deliveries the baseline's can fall
      // within the noise, even below zero, and a ratio to it means nothing. Those turns are left out; none left: null.
      const cpuRatios = s.map((m, i) => (b[i]!.cpuUsPerDelivery > 0 ? m.cpuUsPerDelivery / b[i]!.cpuUsPerDelivery : null)).filter((v): v is number => v !== null);
      const memory = s.map((m, i) => (m.memoryKbPerSubscriber !== null && b[i]!.memoryKbPerSubscriber ? m.memoryKbPerSubscriber / b[i]!.memoryKbPerSubscriber! : null)).filter((v): v is number => v !== null);
      const service = medianMeasurement(s);
      const ratio = {
        latencyP50: ratios('latencyP50'),
        latencyP99: ratios('latencyP99'),
        spreadP99: size > 1 ? ratios('spreadP99') : null,
        cpu: cpuRatios.length > 0 ? round(median(cpuRatios), 2) : null,
        memory: memory.length > 0 ? round(median(memory), 2) : null,
      };
      return {
        size,
        turns,
        service,
        baseline: medianMeasurement(b),
        ratio,
        unwatchedStoredDelayP50: round(median(unwatchedDelays.map((d) => d[0]!)), 2),
        unwatchedStoredDelayP99: round(median(unwatchedDelays.map((d) => d[1]!)), 2),
        targets: {
          latency: size >= 1000 ? ratio.latencyP99 <= 0.5 && service.latencyP99 < P99_ABSOLUTE_TARGET_MS : ratio.latencyP99 <= 1,
          spread: ratio.spreadP99 === null || ratio.spreadP99 <= 1,
          cpu: ratio.cpu === null ? null : ratio.cpu <= 1,
        },
      };
    });
    writeResult('runs-fanout', {
      measuredAt: new Date().toISOString(),
      node: process.version,
      client,
      clientProcesses,
      rounds,
      delayMs,
      definition:
        'latency = t(client received a live step) − t(the provider answer it follows was due); spread = last − first subscriber per step; CPU per delivery = median over runs of (server CPU from gate to last delivery − the CPU of an unwatched run right after it) / deliveries per run; figures are medians over turns, ratios medians of per-turn service ÷ baseline',
      rows,
      perTurn,
    });
    return { rows, perTurn };
  } finally {
    await service.link.exit();
    await baseline.link.exit();
  }
}

const ok = (met: boolean) => (met ? 'ok' : 'MISSED');

export function formatRunsFanout(rows: readonly FanoutRow[]): string {
  return markdownTable(
    [
      'subscribers',
      'answer → receipt p50 / p99 ms: service · baseline',
      'p99 ratio (target)',
      'spread p99 ms: service · baseline (ratio, target ≤ 1×)',
      'CPU µs per delivery: service · baseline (ratio, target ≤ 1×)',
      'memory kB per subscriber: service · baseline',
      'answer → stored step p50 / p99 ms: service (unwatched) · baseline',
      'deliveries received / expected (errors)',
    ],
    rows.map((row) => [
      String(row.size),
      `${row.service.latencyP50} / ${row.service.latencyP99} · ${row.baseline.latencyP50} / ${row.baseline.latencyP99}`,
      `${row.ratio.latencyP99}× (${row.size >= 1000 ? `≤ 0.5× and < ${P99_ABSOLUTE_TARGET_MS} ms` : '≤ 1×'}) ${ok(row.targets.latency)}`,
      row.ratio.spreadP99 === null ? 'one subscriber: none' : `${row.service.spreadP99} · ${row.baseline.spreadP99} (${row.ratio.spreadP99}×) ${ok(row.targets.spread)}`,
      row.ratio.cpu === null
        ? `${row.service.cpuUsPerDelivery} · ${row.baseline.cpuUsPerDelivery} (no ratio: the baseline's figure is within the noise) not measured`
        : `${row.service.cpuUsPerDelivery} · ${row.baseline.cpuUsPerDelivery} (${row.ratio.cpu}×) ${ok(row.targets.cpu === true)}`,
      row.service.memoryKbPerSubscriber === null ? '—' : `${row.service.memoryKbPerSubscriber} · ${row.baseline.memoryKbPerSubscriber} (${row.ratio.memory}×)`,
      `${row.service.storedDelayP50} / ${row.service.storedDelayP99} (${row.unwatchedStoredDelayP50} / ${row.unwatchedStoredDelayP99}) · ${row.baseline.storedDelayP50} / ${row.baseline.storedDelayP99}`,
      `${row.service.deliveriesReceived} / ${row.service.deliveriesExpected} · ${row.baseline.deliveriesReceived} / ${row.baseline.deliveriesExpected} (${[...row.service.errors, ...row.baseline.errors].length === 0 ? '0' : [...row.service.errors, ...row.baseline.errors].join('; ')})`,
    ]),
  );
}

if (require.main === module) {
  runRunsFanout()
    .then(({ rows }) => console.log(formatRunsFanout(rows)))
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
