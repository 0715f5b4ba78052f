/**
 * Plumbing for the benchmarks that ask what one heavy client does to everyone
 * else: the real server (`dist/src/main.js`) in its own process, a GraphQL
 * call, and a bystander (bench/latency-prober) in its own process whose
 * latency is read before and during the heavy work.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { round } from './bench-support';

export interface ServiceProcess {
  url: string;
  token: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** The real server on `databaseUrl`, port 0, logging nothing, with the admin token returned. */
export function startServiceProcess(databaseUrl: string, env: Record<string, string> = {}): Promise<ServiceProcess> {
  const root = path.resolve(__dirname, '..', '..');
  const token = 'bench-bystander-admin-token-0123456789';
  // BENCH_CHILD_NODE_ARGS passes node options to the server, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
  const nodeArgs = (process.env.BENCH_CHILD_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, path.join(root, 'dist/src/main.js')], {
    env: {
      PATH: process.env.PATH ?? '',
      PORT: '0',
      HOST: '127.0.0.1',
      DATABASE_URL: databaseUrl,
      ADMIN_TOKEN: token,
      SECRET_KEY: 'bench-secret-key-0123456789',
      SEED_EXAMPLES: 'true',
      UI: 'false',
      LOG_LEVEL: 'silent',
      NODE_ENV: 'production',
      RATE_LIMIT_WRITES: '0',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const stop = () =>
    new Promise<void>((resolve) => {
      if (child.exitCode !== null || child.signalCode !== null) return resolve();
      child.once('exit', () => resolve());
      child.kill('SIGTERM');
      setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
    });
  return new Promise((resolve, reject) => {
    let output = '';
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      const match = /promptwire ready: (\S+)/.exec(output);
      if (match?.[1]) resolve({ url: match[1], token, child, stop });
    });
    child.once('exit', (code) => reject(new Error(`the server exited with ${code}: ${output}`)));
  });
}

export async function gql<T>(service: Pick<ServiceProcess, 'url' | 'token'>, query: string, variables: Record<string, unknown> = {}): Promise<T> {
  const response = await fetch(service.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${service.token}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: T; errors?: unknown };
  if (!body.data || body.errors) throw new Error(`GraphQL failed: ${JSON.stringify(body.errors)}`);
  return body.data;
}

export interface Prober {
  ready: Promise<void>;
  /** `performance.now()` of this process when the prober started its clock. */
  startedAt: number;
  /** Stops the prober; resolves with its samples: [sent at (ms since its start), latency ms]. */
  stop(): Promise<[number, number][]>;
}

export function startProber(url: string): Prober {
  const child = spawn(process.execPath, [path.join(__dirname, 'latency-prober.js'), url], { stdio: ['pipe', 'pipe', 'inherit'] });
  let output = '';
  let markReady: () => void = () => undefined;
  const prober: Prober = {
    ready: new Promise<void>((resolve) => (markReady = resolve)),
    startedAt: 0,
    stop: () => {
      child.stdin?.end();
      return samples;
    },
  };
  const samples = new Promise<[number, number][]>((resolve, reject) => {
    child.stdout?.on('data', (chunk: Buffer) => {
      output += chunk.toString();
      if (!prober.startedAt && output.includes('PROBING\n')) {
        prober.startedAt = performance.now();
        markReady();
      }
      const match = /SAMPLES (.*)\n/.exec(output);
      if (match?.[1]) resolve(JSON.parse(match[1]) as [number, number][]);
    });
    child.once('exit', (code) => (code === 0 ? undefined : reject(new Error(`prober exited with ${code}`))));
  });
  return prober;
}

export interface LatencyStats {
  p50: number;
  p99: number;
  max: number;
  samples: number;
}

export function percentile(values: number[], p: number): number {
  if (values.length === 0) return 0;
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? 0;
}

function stats(values: number[]): LatencyStats {
  return { p50: round(percentile(values, 50)), p99: round(percentile(values, 99)), max: round(Math.max(0, ...values)), samples: values.length };
}

/** The bystander's latency before `from` and between `from` and `to` (this process's `performance.now()`). */
export function bystanderLatency(prober: Prober, samples: [number, number][], from: number, to: number): { before: LatencyStats; during: LatencyStats } {
  const relativeFrom = from - prober.startedAt;
  const relativeTo = to - prober.startedAt;
  const before = samples.filter(([sentAt]) => sentAt < relativeFrom - 50).map(([, latency]) => latency);
  const during = samples.filter(([sentAt, latency]) => sentAt + latency >= relativeFrom && sentAt <= relativeTo).map(([, latency]) => latency);
  return { before: stats(before), during: stats(during) };
}
