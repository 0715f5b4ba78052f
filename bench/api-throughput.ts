/**
 * Throughput of the two list queries of issue 2, beside a lean baseline
 * measured in the same run on the same database:
 *   (a) snippets(limit: 50)
 *   (b) configurations(limit: 50) { model { provider { identifier } } selectedSnippets { identifier } }
 * Targets: (a) ≥ 0.8× baseline, (b) ≥ 0.5×, p99 < 250 ms at 50 connections.
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
};

export interface ThroughputRow {
  dialect: string;
  query: keyof typeof QUERIES;
  service: LoadResult;
  baseline: LoadResult;
  ratio: number;
  target: number;
}

export async function runApiThroughput(seconds = Number(process.env.BENCH_SECONDS ?? 10)): Promise<ThroughputRow[]> {
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
      console.log(`[${database.dialect}] starting the service and seeding 50 snippets and 50 configurations…`);
      const app = await startChild('serve-app.js', { DATABASE_URL: database.url, BENCH_SEED: '1' });
      const measured: Record<string, LoadResult> = {};
      for (const [name, query] of Object.entries(QUERIES)) {
        const body = JSON.stringify({ query });
        console.log(`[${database.dialect}] service: ${name} (${seconds} s)…`);
        await load(`http://127.0.0.1:${app.port}/graphql`, body, { authorization: `Bearer ${app.token}` }, 2);
        measured[name] = await load(`http://127.0.0.1:${app.port}/graphql`, body, { authorization: `Bearer ${app.token}` }, seconds);
      }
      await app.stop();
      const baseline = await startChild('serve-baseline.js', { DATABASE_URL: database.url });
      for (const [name, query] of Object.entries(QUERIES) as [keyof typeof QUERIES, string][]) {
        const body = JSON.stringify({ query });
        console.log(`[${database.dialect}] baseline: ${name} (${seconds} s)…`);
        await load(`http://127.0.0.1:${baseline.port}/graphql`, body, {}, 2);
        const base = await load(`http://127.0.0.1:${baseline.port}/graphql`, body, {}, seconds);
        const service = measured[name] as LoadResult;
        rows.push({ dialect: database.dialect, query: name, service, baseline: base, ratio: round(service.requestsPerSecond / base.requestsPerSecond), target: name === 'snippets' ? 0.8 : 0.5 });
      }
      await baseline.stop();
    } finally {
      await database.cleanup();
    }
  }
  writeResult('api-throughput', { measuredAt: new Date().toISOString(), seconds, connections: 50, rows });
  return rows;
}

export function formatThroughput(rows: ThroughputRow[]): string {
  const lines = ['| database | query | service req/s | baseline req/s | ratio (target) | service p50 / p99 ms | baseline p50 / p99 ms | errors |', '|---|---|---|---|---|---|---|---|'];
  for (const row of rows) {
    lines.push(
      `| ${row.dialect} | ${row.query} | ${round(row.service.requestsPerSecond, 0)} | ${round(row.baseline.requestsPerSecond, 0)} | ${row.ratio}× (≥ ${row.target}×) | ${row.service.p50} / ${row.service.p99} | ${row.baseline.p50} / ${row.baseline.p99} | ${row.service.errors + row.service.non2xx} |`,
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
