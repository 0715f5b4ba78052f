/**
 * Durable runs: how fast a surviving instance takes over the run of one that
 * died, and what a run waiting for approval costs in process memory.
 *
 * 1. Takeover (real processes, `node dist/src/main.js`): a survivor runs all
 *    along; in each trial a fresh owner process starts a run whose provider
 *    call the scripted provider (in this process) never answers, and is
 *    killed with SIGKILL once the call arrived. Measured: from the kill to
 *    the moment the survivor's call arrives at the provider again (it claimed
 *    the run, rebuilt it from its steps, and made the call in flight again).
 *    The baseline is the lease itself (RUN_LEASE_SECONDS): the owner renews
 *    every third of it, so a run cannot be taken over safely before its lease
 *    has gone stale. Target: takeover < lease + 1 s. Trials start at random
 *    phases of the owner's heartbeat. SQLite (one file, two processes) and,
 *    with BENCH_MYSQL_URL / TEST_MYSQL_URL, MySQL (+ Redis with
 *    TEST_REDIS_URL / BENCH_REDIS_URL).
 *
 * 2. Memory of runs waiting for approval (the real server in this process,
 *    `--expose-gc` needed): 200 runs whose model asks for a calculator call
 *    that needs approval, all WAITING_FOR_APPROVAL at once. Measured: the
 *    process's heap (used + external, after full GCs) and RSS with the 200
 *    waiting, minus the same before they started, per run; after a warm-up
 *    of 20 runs, batches of 200 one after another: waiting (then decided),
 *    finished, waiting again — the figure is the last batch's, the first
 *    shown beside it (it also pays for the process growing to its working
 *    size). Baseline: 200 runs of the same shape that finished (approved at
 *    once) in the same process. Target: ≤ 10 kB per waiting run.
 *
 * Run: `npm run build && NODE_ENV=production node --expose-gc dist/bench/runs-durable.js`
 * (TAKEOVER_TRIALS, default 6 with a 3 s lease and 3 with the default 15 s lease; WAITING_RUNS, default 200;
 * DURABLE_PARTS=memory or =takeover for one part).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import type { ChatAdapter, ChatRequest, ChatResult } from '../src/providers/adapters/types';
import { round, writeResult } from './bench-support';
import {
  BENCH_CALLER,
  RUNS_BENCH_TOKEN,
  benchDialects,
  createScratchDatabase,
  markdownTable,
  postGraphQL,
  seedRunConfiguration,
  sleep,
  startRunsServer,
  stats,
  withDeadline,
  type BenchDialect,
  type ScratchDatabase,
  type Stats,
} from './runs-support';

const root = path.resolve(__dirname, '..', '..');

// ---------------------------------------------------------------------------
// 1. Takeover
// ---------------------------------------------------------------------------

/** An OpenAI-compatible provider that holds the calls it is told to hold and answers the rest at once. */
class HoldingProvider {
  /** Arrival time (epoch ms) of each call, by the run's prompt. */
  readonly arrivals = new Map<string, number[]>();
  private readonly held = new Set<string>();
  private readonly waiters: { prompt: string; count: number; resolve: (at: number) => void }[] = [];

  private constructor(
    private readonly server: http.Server,
    readonly url: string,
  ) {}

  static async start(): Promise<HoldingProvider> {
    let provider: HoldingProvider | null = null;
    const server = http.createServer((request, response) => provider!.handle(request, response));
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    provider = new HoldingProvider(server, `http://127.0.0.1:${(server.address() as AddressInfo).port}/v1`);
    return provider;
  }

  hold(prompt: string): void {
    this.held.add(prompt);
  }

  release(prompt: string): void {
    this.held.delete(prompt);
  }

  /** Resolves with the arrival time of the prompt's `count`-th call. */
  arrival(prompt: string, count: number): Promise<number> {
    const seen = this.arrivals.get(prompt) ?? [];
    if (seen.length >= count) return Promise.resolve(seen[count - 1]!);
    return new Promise((resolve) => this.waiters.push({ prompt, count, resolve }));
  }

  private handle(request: http.IncomingMessage, response: http.ServerResponse): void {
    const at = Date.now();
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { messages: { role: string; content: string }[] };
      const prompt = body.messages.find((message) => message.role === 'user')?.content ?? '';
      const list = this.arrivals.get(prompt) ?? [];
      list.push(at);
      this.arrivals.set(prompt, list);
      for (const waiter of [...this.waiters]) {
        if (waiter.prompt === prompt && list.length >= waiter.count) {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          waiter.resolve(list[waiter.count - 1]!);
        }
      }
      if (this.held.has(prompt)) return; // never answered; the caller dies or gives up
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(
        JSON.stringify({
          id: 'chatcmpl-bench',
          object: 'chat.completion',
          model: 'bench',
          choices: [{ index: 0, message: { role: 'assistant', content: 'Finished after the takeover.' }, finish_reason: 'stop' }],
          usage: { prompt_tokens: 3, completion_tokens: 4, total_tokens: 7 },
        }),
      );
    });
  }

  close(): Promise<void> {
    this.server.closeAllConnections();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }
}

interface ServiceProcess {
  url: string;
  kill(): Promise<void>;
  stop(): Promise<void>;
}

async function startService(databaseUrl: string, env: Record<string, string>): Promise<ServiceProcess> {
  const child: ChildProcess = spawn(process.execPath, [path.join(root, 'dist/src/main.js')], {
    cwd: root,
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl,
      ADMIN_TOKEN: RUNS_BENCH_TOKEN,
      SECRET_KEY: 'bench-runs-secret-key-0123456789',
      SEED_EXAMPLES: 'false',
      LOG_LEVEL: 'silent',
      NODE_ENV: 'production',
      RATE_LIMIT_START_RUN: '0',
      RATE_LIMIT_WRITES: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  const url = await withDeadline(
    new Promise<string>((resolve, reject) => {
      const onData = (chunk: Buffer) => {
        output += chunk.toString();
        const match = /promptwire ready: (\S+)/.exec(output);
        if (match?.[1]) resolve(match[1]);
      };
      child.stdout?.on('data', onData);
      child.stderr?.on('data', onData);
      child.once('exit', (code) => reject(new Error(`the service exited with ${code}:\n${output}`)));
    }),
    120_000,
    'the service process start',
  );
  const exited = new Promise((resolve) => child.once('exit', resolve));
  return {
    url,
    async kill() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await withDeadline(exited, 15_000, 'the service process stop').catch(() => child.kill('SIGKILL'));
    },
  };
}

async function gqlOk<T>(url: string, query: string, variables?: Record<string, unknown>): Promise<T> {
  const result = await postGraphQL<T>(url, query, variables);
  if (result.errors?.length || !result.data) throw new Error(`GraphQL errors: ${JSON.stringify(result.errors)}`);
  return result.data;
}

export interface TakeoverRow {
  dialect: BenchDialect;
  redis: boolean;
  leaseSeconds: number;
  trials: number;
  /** Kill → the survivor's call arrives (ms). */
  takeover: Stats;
  each: number[];
  targetMs: number;
  met: boolean;
  /** Runs that ended COMPLETED on the survivor, with one LLM step marked resentAfterTakeover. */
  completed: number;
}

async function takeoverTrials(dialect: BenchDialect, leaseSeconds: number, trials: number): Promise<TakeoverRow> {
  const database: ScratchDatabase = await createScratchDatabase(dialect);
  const provider = await HoldingProvider.start();
  const redisUrl = dialect === 'mysql' ? (process.env.BENCH_REDIS_URL ?? process.env.TEST_REDIS_URL ?? null) : null;
  const env: Record<string, string> = { RUN_LEASE_SECONDS: String(leaseSeconds), ...(redisUrl ? { REDIS_URL: redisUrl } : {}) };
  const processes: ServiceProcess[] = [];
  const each: number[] = [];
  let completed = 0;
  try {
    const first = await startService(database.url, env);
    processes.push(first);
    await gqlOk(first.url, 'mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: 'bench_takeover', name: 'Holding', adapterType: 'custom', endpointUrl: provider.url, apiKey: 'sk-bench', maxRetries: 0, apiTimeout: 600 },
    });
    await gqlOk(first.url, 'mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', { input: { identifier: 'bench_takeover_model', name: 'M', provider: 'bench_takeover', modelId: 'bench' } });
    await gqlOk(first.url, 'mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: 'bench_takeover_conf', name: 'C', model: 'bench_takeover_model' } });
    const survivor = await startService(database.url, { ...env, RUN_MIGRATIONS: 'false' });
    processes.push(survivor);
    let owner: ServiceProcess = first;
    for (let trial = 0; trial < trials; trial += 1) {
      if (trial > 0) {
        owner = await startService(database.url, { ...env, RUN_MIGRATIONS: 'false' });
        processes.push(owner);
      }
      const prompt = `takeover ${dialect} ${leaseSeconds} ${trial}`;
      provider.hold(prompt);
      const started = await gqlOk<{ startRun: { id: string } }>(owner.url, 'mutation($input: StartRunInput!) { startRun(input: $input) { id } }', {
        input: { configuration: 'bench_takeover_conf', prompt, tools: [], stream: false },
      });
      await withDeadline(provider.arrival(prompt, 1), 30_000, 'the owner\'s call');
      // A random phase of the owner's heartbeat.
      await sleep(Math.random() * (leaseSeconds * 1000) / 3);
      provider.release(prompt);
      const killedAt = Date.now();
      await owner.kill();
      const arrivedAt = await withDeadline(provider.arrival(prompt, 2), (leaseSeconds + 30) * 1000, 'the survivor\'s call');
      each.push(arrivedAt - killedAt);
      const deadline = Date.now() + 30_000;
      for (;;) {
        const run = await gqlOk<{ run: { status: string; steps: { kind: string; resentAfterTakeover: boolean | null }[] } }>(
          survivor.url,
          'query($id: ID!) { run(id: $id) { status steps { kind resentAfterTakeover } } }',
          { id: started.startRun.id },
        );
        if (run.run.status === 'COMPLETED') {
          if (run.run.steps.filter((step) => step.resentAfterTakeover).length === 1) completed += 1;
          break;
        }
        if (run.run.status !== 'RUNNING' && run.run.status !== 'QUEUED') break;
        if (Date.now() > deadline) break;
        await sleep(50);
      }
    }
  } finally {
    await Promise.all(processes.map((service) => service.stop()));
    await provider.close();
    await database.cleanup();
  }
  const takeover = stats(each, 0);
  const targetMs = leaseSeconds * 1000 + 1000;
  return { dialect, redis: redisUrl !== null, leaseSeconds, trials, takeover, each, targetMs, met: takeover.max < targetMs, completed };
}

export async function runTakeover(): Promise<TakeoverRow[]> {
  const rows: TakeoverRow[] = [];
  const trials = process.env.TAKEOVER_TRIALS ? Number(process.env.TAKEOVER_TRIALS) : null;
  for (const dialect of benchDialects()) {
    rows.push(await takeoverTrials(dialect, 3, trials ?? 6));
    rows.push(await takeoverTrials(dialect, 15, trials ?? 3));
  }
  return rows;
}

export function formatTakeover(rows: readonly TakeoverRow[]): string {
  return markdownTable(
    ['database', 'lease', 'trials', 'kill → call made again by the survivor, p50 / max ms', 'each trial ms', 'target (< lease + 1 s)', 'runs finished on the survivor'],
    rows.map((row) => [
      `${row.dialect}${row.redis ? ' + Redis' : ''}`,
      `${row.leaseSeconds} s`,
      row.trials,
      `${row.takeover.p50} / ${row.takeover.max}`,
      row.each.join(', '),
      `< ${row.targetMs} ${row.met ? 'met' : 'NOT met'}`,
      `${row.completed} / ${row.trials}`,
    ]),
  );
}

// ---------------------------------------------------------------------------
// 2. Memory of runs waiting for approval
// ---------------------------------------------------------------------------

interface MemorySample {
  heap: number;
  rss: number;
}

async function settledMemory(): Promise<MemorySample> {
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with node --expose-gc');
  for (let i = 0; i < 4; i += 1) {
    gc();
    await sleep(50);
  }
  const usage = process.memoryUsage();
  return { heap: usage.heapUsed + usage.external, rss: usage.rss };
}

export interface WaitingMemoryRow {
  dialect: BenchDialect;
  runs: number;
  /** Bytes per run, waiting (the third batch). */
  waitingHeap: number;
  waitingRss: number;
  /** The same for the first batch (which also pays for the process growing to its working size). */
  firstWaitingHeap: number;
  firstWaitingRss: number;
  /** Bytes per run, the same runs finished. */
  finishedHeap: number;
  finishedRss: number;
  targetBytes: number;
  met: boolean;
}

async function waitingMemory(dialect: BenchDialect, count: number): Promise<WaitingMemoryRow> {
  const database = await createScratchDatabase(dialect);
  // The fake model asks for one calculator call, and answers once the transcript holds its result.
  const answer = (request: ChatRequest): ChatResult =>
    request.messages.some((message) => message.role === 'tool')
      ? { content: 'It is 42.', thinking: null, toolCalls: [], finishReason: 'stop', rawFinishReason: 'stop', usage: { promptTokens: 50, completionTokens: 6, totalTokens: 56 }, warnings: [] }
      : {
          content: '',
          thinking: null,
          toolCalls: [{ id: `call_${++calls}`, type: 'function', function: { name: 'calculator', arguments: '{"expression":"6 * 7"}' } }],
          finishReason: 'tool_calls',
          rawFinishReason: 'tool_calls',
          usage: { promptTokens: 40, completionTokens: 8, totalTokens: 48 },
          warnings: [],
        };
  let calls = 0;
  const model: ChatAdapter = {
    adapterType: 'custom',
    chat: (request) => Promise.resolve(answer(request)),
    stream: async function* (request) {
      yield { type: 'done', result: answer(request) };
    },
  };
  const adapterFactory = () => model;
  const server = await startRunsServer(database, { runs: { adapterFactory, watcherQueueSize: 256 } });
  try {
    const runs = server.services.runs;
    const configuration = await seedRunConfiguration(server.services);
    const input = { configuration, prompt: 'What is 6 * 7?', tools: ['calculator'], approvalRequired: ['calculator'], stream: false };
    const statusOf = async (id: string) => (await server.services.runReader.get(id))?.row.status ?? 'missing';
    const waitAll = async (ids: string[], wanted: string) => {
      const deadline = performance.now() + 120_000;
      for (const id of ids) {
        while ((await statusOf(id)) !== wanted) {
          if (performance.now() > deadline) throw new Error(`run ${id} is ${await statusOf(id)}, not ${wanted}`);
          await sleep(5);
        }
      }
    };
    const approve = async (ids: string[]) => {
      for (const id of ids) {
        const view = await server.services.runReader.get(id);
        await runs.approvals.resolve(id, (view?.pendingToolCalls ?? []).map((call) => ({ toolCallId: call.id, approve: true })), BENCH_CALLER);
      }
      await waitAll(ids, 'COMPLETED');
    };
    const startMany = async (n: number) => {
      const ids: string[] = [];
      for (let i = 0; i < n; i += 1) ids.push((await runs.start({ ...input }, BENCH_CALLER)).row.uuid);
      await waitAll(ids, 'WAITING_FOR_APPROVAL');
      return ids;
    };
    // Warm-up: the code paths, statement caches and pools of a waiting, decided and finished run.
    await approve(await startMany(20));

    // Batches one after another: 200 waiting (then decided), 200 finished, 200 waiting again. The first
    // batch also pays for the process growing into its working size (RSS), so the figures are the later
    // batches', the first shown beside them.
    const perRun = (a: number, b: number) => Math.round((a - b) / count);
    const before1 = await settledMemory();
    const first = await startMany(count);
    const withFirst = await settledMemory();
    await approve(first);
    const beforeFinished = await settledMemory();
    await approve(await startMany(count));
    const withFinished = await settledMemory();
    const before2 = await settledMemory();
    const second = await startMany(count);
    const withSecond = await settledMemory();
    await approve(second);

    const waitingHeap = perRun(withSecond.heap, before2.heap);
    return {
      dialect,
      runs: count,
      waitingHeap,
      waitingRss: perRun(withSecond.rss, before2.rss),
      firstWaitingHeap: perRun(withFirst.heap, before1.heap),
      firstWaitingRss: perRun(withFirst.rss, before1.rss),
      finishedHeap: perRun(withFinished.heap, beforeFinished.heap),
      finishedRss: perRun(withFinished.rss, beforeFinished.rss),
      targetBytes: 10_240,
      met: waitingHeap <= 10_240,
    };
  } finally {
    await server.stop();
    await database.cleanup();
  }
}

export async function runWaitingMemory(): Promise<WaitingMemoryRow[]> {
  const count = Number(process.env.WAITING_RUNS ?? 200);
  const rows: WaitingMemoryRow[] = [];
  for (const dialect of benchDialects()) rows.push(await waitingMemory(dialect, count));
  return rows;
}

export function formatWaitingMemory(rows: readonly WaitingMemoryRow[]): string {
  const kb = (bytes: number) => `${round(bytes / 1024, 1)} kB`;
  return markdownTable(
    ['database', 'runs waiting at once', 'heap (used + external) / RSS per waiting run', 'first batch: heap / RSS per waiting run', 'baseline: heap / RSS per finished run', 'target (≤ 10 kB per waiting run)'],
    rows.map((row) => [
      row.dialect,
      row.runs,
      `${kb(row.waitingHeap)} / ${kb(row.waitingRss)}`,
      `${kb(row.firstWaitingHeap)} / ${kb(row.firstWaitingRss)}`,
      `${kb(row.finishedHeap)} / ${kb(row.finishedRss)}`,
      row.met ? 'met (heap)' : 'NOT met',
    ]),
  );
}

async function main(): Promise<void> {
  const parts = (process.env.DURABLE_PARTS ?? 'memory,takeover').split(',');
  let memory: WaitingMemoryRow[] = [];
  let takeover: TakeoverRow[] = [];
  if (parts.includes('memory')) {
    console.log('== Memory of runs waiting for approval');
    memory = await runWaitingMemory();
    console.log(formatWaitingMemory(memory));
  }
  if (parts.includes('takeover')) {
    console.log('== Takeover of a killed instance\'s run');
    takeover = await runTakeover();
    console.log(formatTakeover(takeover));
  }
  writeResult('runs-durable', { measuredAt: new Date().toISOString(), memory, takeover });
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
