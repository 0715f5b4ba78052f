/**
 * Throughput of the list queries, beside a lean baseline measured in the
 * same run on the same database:
 *   (a) snippets(limit: 50)
 *   (b) configurations(limit: 50) { model { provider { identifier } } selectedSnippets { identifier } }
 *   (c) snippetsConnection(first: 50) with totalCount and pageInfo: the first
 *       page of the cursor list (issue 10), the same rows as (a)
 * Targets: (a) and (c) ≥ 0.8× baseline, (b) ≥ 0.5×, p99 < 250 ms at 50 connections.
 *
 * autocannon, 50 connections, BENCH_SECONDS (10) per query after a 2 s warm-up.
 * Service and baseline take turns BENCH_REPEATS (3) times; each figure shown
 * is the median over the turns (the JSON keeps every turn).
 */
import crypto from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { load, round, startChild, writeResult, type LoadResult } from './bench-support';

const QUERIES = {
  snippets: '{ snippets(limit: 50) { uid identifier name tags snippet metadata isActive hidden sorting } }',
  configurations: '{ configurations(limit: 50) { identifier model { modelId provider { identifier } } selectedSnippets { identifier } } }',
  snippetsConnection: '{ snippetsConnection(first: 50) { totalCount pageInfo { hasNextPage endCursor } nodes { uid identifier name tags snippet metadata isActive hidden sorting } } }',
};

export interface ThroughputRow {
  dialect: string;
  query: keyof typeof QUERIES;
  service: LoadResult;
  baseline: LoadResult;
  ratio: number;
  target: number;
  /** Every turn's figures; service and baseline above are their medians. */
  turns: { service: LoadResult[]; baseline: LoadResult[] };
}

async function measureQueries(label: string, url: string, headers: Record<string, string>, seconds: number, into: Record<string, LoadResult[]>): Promise<void> {
  for (const [name, query] of Object.entries(QUERIES)) {
    const body = JSON.stringify({ query });
    console.log(`${label}: ${name} (${seconds} s)…`);
    await load(url, body, headers, 2);
    into[name]?.push(await load(url, body, headers, seconds));
  }
}

/** The median turn of each figure (req/s, p50, p99 taken apart; errors summed). */
function median(turns: LoadResult[]): LoadResult {
  const middle = (values: number[]) => [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? 0;
  return {
    requestsPerSecond: middle(turns.map((turn) => turn.requestsPerSecond)),
    p50: middle(turns.map((turn) => turn.p50)),
    p99: middle(turns.map((turn) => turn.p99)),
    errors: turns.reduce((sum, turn) => sum + turn.errors, 0),
    non2xx: turns.reduce((sum, turn) => sum + turn.non2xx, 0),
  };
}

export async function runApiThroughput(seconds = Number(process.env.BENCH_SECONDS ?? 10), repeats = Number(process.env.BENCH_REPEATS ?? 3)): Promise<ThroughputRow[]> {
  const rows: ThroughputRow[] = [];
  const databases: { dialect: string; url: string; cleanup: () => Promise<void> }[] = [];
  const sqliteDirectory = fs.mkdtempSync(path.join(os.tmpdir(), 'promptwire-bench-'));
  databases.push({ dialect: 'sqlite', url: `sqlite:${path.join(sqliteDirectory, 'bench.sqlite')}`, cleanup: async () => fs.rmSync(sqliteDirectory, { recursive: true, force: true }) });
  const mysqlUrl = process.env.BENCH_MYSQL_URL ?? process.env.TEST_MYSQL_URL;
  if (mysqlUrl) {
    const name = `promptwire_bench_${crypto.randomBytes(3).toString('hex')}`;
    const admin = await mysql.createConnection(mysqlUrl);
    await admin.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_unicode_ci`);
    await admin.end();
    const url = new URL(mysqlUrl);
    url.pathname = `/${name}`;
    databases.push({
      dialect: 'mysql',
      url: url.toString(),
      cleanup: async () => {
        const connection = await mysql.createConnection(mysqlUrl);
        await connection.query(`DROP DATABASE IF EXISTS ${name}`);
        await connection.end();
      },
    });
  } else {
    console.log('BENCH_MYSQL_URL / TEST_MYSQL_URL not set: MySQL skipped');
  }

  for (const database of databases) {
    try {
      const service: Record<string, LoadResult[]> = Object.fromEntries(Object.keys(QUERIES).map((name) => [name, []]));
      const baseline: Record<string, LoadResult[]> = Object.fromEntries(Object.keys(QUERIES).map((name) => [name, []]));
      // Service and baseline take turns, `repeats` times: a passing disturbance on the
      // shared machine lands in one turn, and the median turn is reported.
      for (let turn = 1; turn <= repeats; turn += 1) {
        console.log(`[${database.dialect}] turn ${turn}/${repeats}: starting the service${turn === 1 ? ' and seeding 50 snippets and 50 configurations' : ''}…`);
        const app = await startChild('serve-app.js', { DATABASE_URL: database.url, BENCH_SEED: '1' });
        await measureQueries(`[${database.dialect}] service`, `http://127.0.0.1:${app.port}/graphql`, { authorization: `Bearer ${app.token}` }, seconds, service);
        await app.stop();
        const base = await startChild('serve-baseline.js', { DATABASE_URL: database.url });
        await measureQueries(`[${database.dialect}] baseline`, `http://127.0.0.1:${base.port}/graphql`, {}, seconds, baseline);
        await base.stop();
      }
      for (const name of Object.keys(QUERIES) as (keyof typeof QUERIES)[]) {
        const ours = median(service[name] ?? []);
        const theirs = median(baseline[name] ?? []);
        rows.push({ dialect: database.dialect, query: name, service: ours, baseline: theirs, ratio: round(ours.requestsPerSecond / theirs.requestsPerSecond), target: name === 'configurations' ? 0.5 : 0.8, turns: { service: service[name] ?? [], baseline: baseline[name] ?? [] } });
      }
    } finally {
      await database.cleanup();
    }
  }
  writeResult('api-throughput', { measuredAt: new Date().toISOString(), seconds, repeats, connections: 50, rows });
  return rows;
}

export function formatThroughput(rows: ThroughputRow[]): string {
  const lines = [
    '| database | query | service req/s | baseline req/s | ratio (target) | service p50 / p99 ms (target p99) | service p99 per turn | baseline p50 / p99 ms | errors |',
    '|---|---|---|---|---|---|---|---|---|',
  ];
  for (const row of rows) {
    const p99Target = row.query === 'configurations' ? ` (< 250 ${row.service.p99 < 250 ? 'ok' : 'MISSED'})` : '';
    lines.push(
      `| ${row.dialect} | ${row.query} | ${round(row.service.requestsPerSecond, 0)} | ${round(row.baseline.requestsPerSecond, 0)} | ${row.ratio}× (≥ ${row.target}× ${row.ratio >= row.target ? 'ok' : 'MISSED'}) | ${row.service.p50} / ${row.service.p99}${p99Target} | ${row.turns.service.map((turn) => turn.p99).join(', ')} | ${row.baseline.p50} / ${row.baseline.p99} | ${row.service.errors + row.service.non2xx} |`,
    );
  }
  return lines.join('\n');
}

if (require.main === module) {
  runApiThroughput()
    .then((rows) => console.log(formatThroughput(rows)))
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
