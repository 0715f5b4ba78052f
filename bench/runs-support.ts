/**
 * Shared plumbing for the run benchmarks (runs-loop, runs-fanout,
 * runs-concurrency): scratch databases, an in-process server with a swapped-in
 * provider adapter, the one configuration a run needs, statistics and tables.
 *
 * Everything connects to 127.0.0.1 only: a MySQL URL naming another host is refused.
 */
import 'reflect-metadata';
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import mysql from 'mysql2/promise';
import pino from 'pino';
import { Role, type Caller } from '../src/auth/roles';
import { loadConfig } from '../src/config';
import type { ChatAdapter, ChatRequest, ChatResult, StreamEvent } from '../src/providers/adapters/types';
import type { RunService } from '../src/runs/run.service';
import type { TraceBus } from '../src/runs/trace-bus';
import { createServer, type RunningServer, type ServerOptions } from '../src/server';
import type { Services } from '../src/services';

export const RUNS_BENCH_TOKEN = 'bench-runs-admin-token-0123456789';
export const RUNS_BENCH_CONFIGURATION = 'bench_runs';
/** In-process calls to RunService.start need a caller; the token uid is not looked up there. */
export const BENCH_CALLER: Caller = { tokenUid: 0, role: Role.ADMIN, name: 'bench', beUser: 0, source: '' };

export type BenchDialect = 'sqlite' | 'mysql';

export interface ScratchDatabase {
  dialect: BenchDialect;
  /** DATABASE_URL for the server. */
  url: string;
  /** The SQLite file (sqlite only). */
  file?: string;
  cleanup(): Promise<void>;
}

const LOCAL_HOSTS = new Set(['127.0.0.1', 'localhost', '[::1]', '::1']);

/** BENCH_MYSQL_URL, else TEST_MYSQL_URL, else null. Refuses anything but a local server. */
export function mysqlUrlFromEnv(): string | null {
  const raw = process.env.BENCH_MYSQL_URL ?? process.env.TEST_MYSQL_URL;
  if (!raw) return null;
  const host = new URL(raw).hostname;
  if (!LOCAL_HOSTS.has(host)) throw new Error(`The run benchmarks only connect to 127.0.0.1; the MySQL URL names "${host}"`);
  return raw;
}

export async function createScratchDatabase(dialect: BenchDialect): Promise<ScratchDatabase> {
  if (dialect === 'sqlite') {
    const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'promptwire-runs-bench-'));
    const file = path.join(directory, 'bench.sqlite');
    return { dialect, url: `sqlite:${file}`, file, cleanup: async () => fs.rmSync(directory, { recursive: true, force: true }) };
  }
  const mysqlUrl = mysqlUrlFromEnv();
  if (!mysqlUrl) throw new Error('BENCH_MYSQL_URL / TEST_MYSQL_URL not set');
  const name = `promptwire_runs_bench_${crypto.randomBytes(3).toString('hex')}`;
  const admin = await mysql.createConnection(mysqlUrl);
  await admin.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
  await admin.end();
  const url = new URL(mysqlUrl);
  url.pathname = `/${name}`;
  return {
    dialect,
    url: url.toString(),
    cleanup: async () => {
      const connection = await mysql.createConnection(mysqlUrl);
      await connection.query(`DROP DATABASE IF EXISTS ${name}`);
      await connection.end();
    },
  };
}

/** SQLite always; MySQL when BENCH_MYSQL_URL or TEST_MYSQL_URL is set (a note is printed otherwise). */
export function benchDialects(): BenchDialect[] {
  if (mysqlUrlFromEnv()) return ['sqlite', 'mysql'];
  console.log('BENCH_MYSQL_URL / TEST_MYSQL_URL not set: MySQL skipped');
  return ['sqlite'];
}

/** The real server, in this process, on 127.0.0.1, port 0, logging nothing. */
export async function startRunsServer(database: ScratchDatabase, options: ServerOptions = {}, env: Record<string, string> = {}): Promise<RunningServer> {
  const config = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: database.url,
    ADMIN_TOKEN: RUNS_BENCH_TOKEN,
    SECRET_KEY: 'bench-runs-secret-key-0123456789',
    SEED_EXAMPLES: 'false',
    LOG_LEVEL: 'silent',
    // The benchmarks start hundreds of runs a minute with one token: they measure the service, not its rate limits.
    RATE_LIMIT_START_RUN: '0',
    RATE_LIMIT_WRITES: '0',
    ...env,
  });
  return createServer(config, { logger: pino({ level: 'silent' }), ...options });
}

/**
 * The provider, model and configuration a run needs (the adapter itself is
 * replaced through options.runs.adapterFactory, so nothing is called), with
 * what makes assembly realistic: 20 active snippets, two of whose tags the
 * configuration selects (8 snippets land in the system prompt), and one skill
 * injected into the first user message.
 */
export async function seedRunConfiguration(services: Services): Promise<string> {
  const tags = ['persona', 'tone_of_voice', 'audience', 'style', 'layout'];
  for (let i = 0; i < 20; i += 1) {
    await services.snippets.create({
      identifier: `bench_runs_snippet_${i}`,
      name: `Bench snippet ${i}`,
      snippet: `Guideline ${i}: ${'keep the answer short, cite the tool result, and avoid speculation. '.repeat(2)}`,
      tags: [tags[i % tags.length] ?? 'style'],
      sorting: i,
    });
  }
  await services.skills.create({ identifier: 'bench_runs_skill', name: 'Arithmetic checks', body: 'When a calculation matters, compute it with the calculator and restate the expression you used.\n'.repeat(4), enabled: true });
  await services.providers.create({ identifier: 'bench_runs_provider', name: 'Bench runs provider', adapterType: 'openai', apiKey: 'sk-bench' });
  await services.models.create({
    identifier: 'bench_runs_model',
    name: 'Bench runs model',
    provider: 'bench_runs_provider',
    modelId: 'gpt-4o-mini',
    contextLength: 128_000,
    maxOutputTokens: 4096,
    costInput: 15,
    costOutput: 60,
  });
  await services.configurations.create({
    identifier: RUNS_BENCH_CONFIGURATION,
    name: 'Bench runs configuration',
    model: 'bench_runs_model',
    systemPrompt: 'You are a careful assistant. Use the calculator for every arithmetic step and explain the result in one sentence.',
    snippetTags: ['persona', 'tone_of_voice'],
    skills: ['bench_runs_skill'],
  });
  return RUNS_BENCH_CONFIGURATION;
}

/**
 * The server's trace bus. RunService keeps it private; the benchmarks only
 * subscribe to it (the same call a watcher makes), to timestamp publishes.
 */
export function traceBusOf(runs: RunService): TraceBus {
  const bus = (runs as unknown as { bus?: TraceBus }).bus;
  if (!bus || typeof bus.subscribe !== 'function') throw new Error('RunService no longer holds its bus in `bus`; update runs-support.ts');
  return bus;
}

/** Milliseconds since the Unix epoch with sub-millisecond resolution (comparable across processes to ~0.1 ms). */
export function epochMs(): number {
  return performance.timeOrigin + performance.now();
}

export interface ProviderTime {
  /** Total time inside the adapter (ms). */
  ms: number;
  /** One entry per call (ms), in call order. */
  each: number[];
}

/**
 * Wraps an adapter so the time spent inside `chat`, or between the start and
 * the end of a `stream`, is recorded in `sink` (for a stream this includes
 * the consumer's handling of each event, which is negligible here).
 */
export function timedAdapter(inner: ChatAdapter, sink: () => ProviderTime): ChatAdapter {
  const record = (started: number) => {
    const target = sink();
    const ms = performance.now() - started;
    target.ms += ms;
    target.each.push(ms);
  };
  return {
    adapterType: inner.adapterType,
    async chat(request: ChatRequest): Promise<ChatResult> {
      const started = performance.now();
      try {
        return await inner.chat(request);
      } finally {
        record(started);
      }
    },
    async *stream(request: ChatRequest): AsyncIterable<StreamEvent> {
      const started = performance.now();
      try {
        yield* inner.stream(request);
      } finally {
        record(started);
      }
    },
  };
}

export interface Stats {
  n: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile of an ascending array. */
export function percentile(sorted: readonly number[], p: number): number {
  if (sorted.length === 0) return Number.NaN;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank - 1))] ?? Number.NaN;
}

export function stats(values: readonly number[], digits = 3): Stats {
  const sorted = [...values].sort((a, b) => a - b);
  const r = (v: number) => Math.round(v * 10 ** digits) / 10 ** digits;
  const mean = sorted.reduce((sum, v) => sum + v, 0) / Math.max(1, sorted.length);
  return { n: sorted.length, p50: r(percentile(sorted, 50)), p99: r(percentile(sorted, 99)), max: r(sorted[sorted.length - 1] ?? Number.NaN), mean: r(mean) };
}

export function markdownTable(headers: readonly string[], rows: readonly (readonly (string | number)[])[]): string {
  return [`| ${headers.join(' | ')} |`, `|${headers.map(() => '---').join('|')}|`, ...rows.map((row) => `| ${row.join(' | ')} |`)].join('\n');
}

export function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Rejects after `ms` with a message saying what did not happen in time. */
export function withDeadline<T>(promise: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  return Promise.race([
    promise,
    new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error(`${what} did not happen within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/** POST a GraphQL operation with the bench admin token. */
export async function postGraphQL<T>(url: string, query: string, variables?: Record<string, unknown>): Promise<{ data?: T; errors?: { message: string }[] }> {
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${RUNS_BENCH_TOKEN}` },
    body: JSON.stringify({ query, variables }),
  });
  return (await response.json()) as { data?: T; errors?: { message: string }[] };
}
