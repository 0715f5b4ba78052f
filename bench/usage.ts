/**
 * The usage ledger's cost, on SQLite and MySQL.
 *
 * 1. Per provider call: the budget check and the booking, as the agent loop
 *    asks for them (`ledger.forRun(account).check(call)`, then
 *    `permit.book(usage, cost)`), for a token with a backend user whose budget
 *    has daily and monthly limits, on a configuration with daily caps: every
 *    part of the check (the scopes' lock, the one-statement read, the hold)
 *    and the booking (ledger raised and hold dropped in one transaction).
 *    Baseline, in the same run, on the same database: the same call path with
 *    the ledger off for budgets (a token without a backend user on a
 *    configuration without caps: no check, the booking only). Targets: check +
 *    booking < 1 ms p50 on SQLite, < 3 ms on MySQL.
 *
 * 2. `usage` over one year × 50 models (365 days × 50 models × 2 sources ×
 *    2 configurations: 73,000 ledger rows, TYPO3's shape), through GraphQL
 *    over HTTP as the console asks: by DAY (365 rows, zero-filled), by MODEL,
 *    and the console's whole dashboard (totals + DAY + MODEL + CONFIGURATION +
 *    SOURCE in one request). Baseline: the raw `SELECT … GROUP BY` of the same
 *    sums on the same connection type. Target: < 100 ms.
 *
 * Run: `npm run build && NODE_ENV=production node dist/bench/usage.js`
 * (BENCH_MYSQL_URL or TEST_MYSQL_URL adds MySQL; BENCH_USAGE_CALLS overrides 2000.)
 */
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { createDataSource } from '../src/db/data-source';
import { createUsageFeature } from '../src/usage';
import type { LedgerAccount } from '../src/runs';
import { round, writeResult } from './bench-support';
import { benchDialects, createScratchDatabase, markdownTable, postGraphQL, startRunsServer, stats, type BenchDialect, type ScratchDatabase, type Stats } from './runs-support';

const CALL_TARGET_MS: Record<BenchDialect, number> = { sqlite: 1, mysql: 3 };
const QUERY_TARGET_MS = 100;
const DAYS = 365;
const MODELS = 50;
const QUERY_REPEATS = 20;

export interface UsageCallRow {
  dialect: BenchDialect;
  calls: number;
  ledger: Stats;
  baseline: Stats;
  overheadP50: number;
  targetMs: number;
}

export interface UsageQueryRow {
  dialect: BenchDialect;
  query: string;
  rows: number;
  service: Stats;
  raw: Stats;
}

export interface UsageBenchResult {
  calls: UsageCallRow[];
  queries: UsageQueryRow[];
}

function databaseConfigOf(database: ScratchDatabase) {
  return database.dialect === 'sqlite' ? { kind: 'sqlite' as const, file: database.file!, dataDirectory: database.file!.replace(/\/[^/]+$/, '') } : { kind: 'mysql' as const, url: database.url };
}

const USAGE = { promptTokens: 400, completionTokens: 60, totalTokens: 460 };

async function measureCalls(database: ScratchDatabase, calls: number): Promise<UsageCallRow> {
  const logger = pino({ level: 'silent' });
  const { dataSource, dialect, checkpointer } = await createDataSource({ database: databaseConfigOf(database), schemaMode: 'own', sqliteCheckpoints: { logger } });
  try {
    await dataSource.runMigrations({ transaction: 'each' });
    const configurations = { findByUids: async () => [], findByIdentifier: async () => null };
    const usage = createUsageFeature({ dataSource, dialect, config: { usageTimeZone: 'UTC' }, logger, configurations });
    // A budget far from its limits: every check reads, compares and holds, none refuses.
    await dataSource.query(
      'INSERT INTO tx_nrllm_user_budget (pid, be_user, max_requests_per_day, max_tokens_per_day, max_cost_per_day, max_requests_per_month, max_tokens_per_month, max_cost_per_month, is_active, tstamp, crdate) VALUES (0, 7, 1000000, 1000000000, 100000, 10000000, 1000000000, 100000, 1, 1, 1)',
    );
    const account = (limited: boolean): LedgerAccount => ({
      beUser: limited ? 7 : 0,
      source: 'bench',
      taskUid: 0,
      configurationUid: limited ? 11 : 12,
      configurationIdentifier: limited ? 'bench_capped' : 'bench_open',
      configurationCaps: limited ? { requests: 1_000_000, tokens: 1_000_000_000, cost: 100_000 } : { requests: 0, tokens: 0, cost: 0 },
      modelUid: 3,
      modelId: 'bench-model',
      providerType: 'openai',
    });
    const ledger = usage.ledger.forRun(account(true), 'bench-run');
    const baseline = usage.ledger.forRun(account(false), 'bench-run');
    const once = async (run: typeof ledger): Promise<number> => {
      const started = performance.now();
      const permit = await run.check({ serviceType: 'chat' });
      if (!permit.allowed) throw new Error(`refused: ${permit.message}`);
      await permit.book(USAGE, 0.0012, { latencyMs: 1, responseModel: 'bench-model' });
      return performance.now() - started;
    };
    for (let i = 0; i < 200; i += 1) {
      await once(ledger);
      await once(baseline);
    }
    const withLedger: number[] = [];
    const without: number[] = [];
    // Interleaved, so both see the same machine load.
    for (let i = 0; i < calls; i += 1) {
      withLedger.push(await once(ledger));
      without.push(await once(baseline));
    }
    const [held] = (await dataSource.query('SELECT COUNT(*) AS n FROM promptwire_usage_hold')) as { n: unknown }[];
    if (Number(held?.n) !== 0) throw new Error(`holds left behind: ${String(held?.n)}`);
    const ledgerStats = stats(withLedger);
    const baselineStats = stats(without);
    return { dialect: database.dialect, calls, ledger: ledgerStats, baseline: baselineStats, overheadP50: round(ledgerStats.p50 - baselineStats.p50, 3), targetMs: CALL_TARGET_MS[database.dialect] };
  } finally {
    await checkpointer?.stop();
    await dataSource.destroy();
  }
}

const DASHBOARD = `query($from: DateTime!, $to: DateTime!) {
  usageTotals(from: $from, to: $to) { days requests tokens cost }
  daily: usage(from: $from, to: $to, groupBy: [DAY]) { date requests tokens promptTokens completionTokens cost }
  byModel: usage(from: $from, to: $to, groupBy: [MODEL], limit: 20) { modelId requests tokens cost }
  byConfiguration: usage(from: $from, to: $to, groupBy: [CONFIGURATION], limit: 20) { configurationUid configuration requests tokens cost }
  bySource: usage(from: $from, to: $to, groupBy: [SOURCE], limit: 20) { source requests tokens cost }
}`;

async function measureQueries(database: ScratchDatabase): Promise<UsageQueryRow[]> {
  const server = await startRunsServer(database, {}, { USAGE_TIMEZONE: 'UTC' });
  const { dataSource } = await createDataSource({ database: databaseConfigOf(database), schemaMode: 'own' });
  try {
    const today = Math.floor(Date.now() / 86_400_000) * 86_400;
    const firstDay = today - (DAYS - 1) * 86_400;
    // One row per day, model, source and configuration, inserted in batches.
    const values: unknown[][] = [];
    for (let day = 0; day < DAYS; day += 1) {
      for (let model = 0; model < MODELS; model += 1) {
        for (const source of ['headless_cms', 'nr_llm']) {
          for (const configuration of [1, 2]) {
            const tokens = 100 + ((day * 31 + model * 7) % 900);
            values.push(['chat', 'openai', 1 + (model % 5), configuration, model + 1, `model-${model}`, 0, source, firstDay + day * 86_400, 3, tokens, tokens - 20, 20, (tokens * 0.000002).toFixed(6), 1, 1]);
          }
        }
      }
    }
    for (let i = 0; i < values.length; i += 500) {
      const batch = values.slice(i, i + 500);
      await dataSource.query(
        `INSERT INTO tx_nrllm_service_usage (service_type, service_provider, be_user, configuration_uid, model_uid, model_id, task_uid, source_extension, request_date, request_count, tokens_used, prompt_tokens, completion_tokens, estimated_cost, tstamp, crdate) VALUES ${batch.map(() => '(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').join(', ')}`,
        batch.flat(),
      );
    }
    const variables = { from: new Date(firstDay * 1000 + 43_200_000).toISOString(), to: new Date(today * 1000 + 43_200_000).toISOString() };
    const sums = 'SUM(request_count), SUM(tokens_used), SUM(prompt_tokens), SUM(completion_tokens), SUM(estimated_cost)';
    const range = 'FROM tx_nrllm_service_usage WHERE request_date >= ? AND request_date <= ?';
    const rangeParams = [firstDay, today];
    const cases: { query: string; graphql: string; raw: string[] }[] = [
      { query: 'usage(groupBy: [DAY])', graphql: 'query($from: DateTime!, $to: DateTime!) { usage(from: $from, to: $to, groupBy: [DAY]) { date requests tokens promptTokens completionTokens cost } }', raw: [`SELECT request_date, ${sums} ${range} GROUP BY request_date`] },
      { query: 'usage(groupBy: [MODEL])', graphql: 'query($from: DateTime!, $to: DateTime!) { usage(from: $from, to: $to, groupBy: [MODEL]) { modelId requests tokens cost } }', raw: [`SELECT model_id, ${sums} ${range} GROUP BY model_id`] },
      {
        query: 'the console dashboard (totals + DAY + MODEL + CONFIGURATION + SOURCE)',
        graphql: DASHBOARD,
        raw: [`SELECT ${sums} ${range}`, ...['request_date', 'model_id', 'configuration_uid', 'source_extension'].map((column) => `SELECT ${column}, ${sums} ${range} GROUP BY ${column}`)],
      },
    ];
    const rows: UsageQueryRow[] = [];
    for (const entry of cases) {
      const service: number[] = [];
      const raw: number[] = [];
      let answerRows = 0;
      for (let i = 0; i < QUERY_REPEATS + 3; i += 1) {
        let started = performance.now();
        const answer = await postGraphQL<Record<string, unknown>>(server.url, entry.graphql, variables);
        const serviceMs = performance.now() - started;
        if (answer.errors) throw new Error(JSON.stringify(answer.errors));
        answerRows = Object.values(answer.data ?? {}).reduce<number>((count, value) => count + (Array.isArray(value) ? value.length : 1), 0);
        started = performance.now();
        for (const sql of entry.raw) await dataSource.query(sql, rangeParams);
        const rawMs = performance.now() - started;
        // The first turns warm caches and JIT.
        if (i >= 3) {
          service.push(serviceMs);
          raw.push(rawMs);
        }
      }
      rows.push({ dialect: database.dialect, query: entry.query, rows: answerRows, service: stats(service, 1), raw: stats(raw, 1) });
    }
    return rows;
  } finally {
    await dataSource.destroy();
    await server.stop();
  }
}

export async function runUsageBench(calls = Number(process.env.BENCH_USAGE_CALLS ?? 2000)): Promise<UsageBenchResult> {
  const result: UsageBenchResult = { calls: [], queries: [] };
  for (const dialect of benchDialects()) {
    const database = await createScratchDatabase(dialect);
    try {
      result.calls.push(await measureCalls(database, calls));
      result.queries.push(...(await measureQueries(database)));
    } finally {
      await database.cleanup();
    }
  }
  writeResult('usage', result);
  return result;
}

export function formatUsageBench(result: UsageBenchResult): string {
  const calls = markdownTable(
    ['database', 'calls', 'check + booking p50 (p99)', 'baseline: booking only p50 (p99)', 'overhead of the check p50', 'target p50'],
    result.calls.map((row) => [
      row.dialect,
      row.calls,
      `${row.ledger.p50} ms (${row.ledger.p99})`,
      `${row.baseline.p50} ms (${row.baseline.p99})`,
      `${row.overheadP50} ms`,
      `< ${row.targetMs} ms ${row.ledger.p50 < row.targetMs ? 'met' : 'missed'}`,
    ]),
  );
  const queries = markdownTable(
    ['database', `over ${DAYS} days × ${MODELS} models`, 'answer rows', 'GraphQL over HTTP p50 (max)', 'raw SQL p50', 'ratio p50', 'target'],
    result.queries.map((row) => [
      row.dialect,
      row.query,
      row.rows,
      `${row.service.p50} ms (${row.service.max})`,
      `${row.raw.p50} ms`,
      `${round(row.service.p50 / Math.max(0.1, row.raw.p50), 1)}×`,
      `< ${QUERY_TARGET_MS} ms ${row.service.p50 < QUERY_TARGET_MS ? 'met' : 'missed'}`,
    ]),
  );
  return `${calls}\n\n${queries}`;
}

if (require.main === module) {
  runUsageBench()
    .then((result) => console.log(formatUsageBench(result)))
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
