/** Shared plumbing for the benchmarks: child servers, autocannon runs, result files. */
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import autocannon from 'autocannon';

/** The Node flags the service is deployed with (package.json's config.nodeFlags, as `npm start` and the Docker image pass them); benches run from dist/bench. */
export function productionNodeFlags(): string {
  const manifest = JSON.parse(fs.readFileSync(path.resolve(__dirname, '..', '..', 'package.json'), 'utf8')) as { config?: { nodeFlags?: string } };
  return manifest.config?.nodeFlags ?? '';
}

export interface LoadResult {
  requestsPerSecond: number;
  p50: number;
  p99: number;
  errors: number;
  non2xx: number;
}

export interface ChildServer {
  port: number;
  token: string;
  process: ChildProcess;
  stop(): Promise<void>;
}

/** Starts a compiled bench server script in its own process and waits for its READY line. */
export function startChild(script: string, env: Record<string, string>): Promise<ChildServer> {
  return new Promise((resolve, reject) => {
    // BENCH_CHILD_NODE_ARGS passes node options to the child, e.g. "--cpu-prof --cpu-prof-dir=/tmp/prof".
    const nodeArgs = (process.env.BENCH_CHILD_NODE_ARGS ?? '').split(' ').filter(Boolean);
    const child = spawn(process.execPath, [...nodeArgs, path.join(__dirname, script)], {
      env: { ...process.env, NODE_ENV: 'production', LOG_LEVEL: 'silent', ...env },
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let buffer = '';
    const timer = setTimeout(() => reject(new Error(`${script} did not become ready`)), 120_000);
    child.stdout?.on('data', (chunk: Buffer) => {
      buffer += chunk.toString();
      const match = /READY (\d+) (\S+)/.exec(buffer);
      if (match) {
        clearTimeout(timer);
        resolve({
          port: Number(match[1]),
          token: match[2] ?? '',
          process: child,
          stop: () =>
            new Promise((done) => {
              child.once('exit', () => done());
              child.kill('SIGTERM');
            }),
        });
      }
    });
    child.once('exit', (code) => reject(new Error(`${script} exited with ${code} before READY`)));
  });
}

export async function load(url: string, body: string, headers: Record<string, string>, seconds: number, connections = 50): Promise<LoadResult> {
  const result = await autocannon({
    url,
    method: 'POST',
    body,
    headers: { 'content-type': 'application/json', ...headers },
    connections,
    duration: seconds,
  });
  return {
    requestsPerSecond: result.requests.average,
    p50: result.latency.p50,
    p99: result.latency.p99,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
  };
}

export function writeResult(name: string, data: unknown): void {
  const directory = path.resolve(__dirname, '..', '..', 'bench', 'results');
  fs.mkdirSync(directory, { recursive: true });
  fs.writeFileSync(path.join(directory, `${name}.json`), `${JSON.stringify(data, null, 2)}\n`);
}

export const round = (value: number, digits = 2) => Math.round(value * 10 ** digits) / 10 ** digits;

/** mulberry32: a small generator with a fixed seed, so a run of a benchmark makes the same choices every time. */
export function seededRandom(seed: number): () => number {
  let state = seed >>> 0;
  return () => {
    state = (state + 0x6d2b79f5) >>> 0;
    let t = state;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}
