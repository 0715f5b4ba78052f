/**
 * What the largest answers the limits admit do to everyone else.
 *
 * The library of the hardening report: 100 snippets of 500 bytes under one
 * tag and 500 configurations selecting it, so that every effective prompt
 * composes 100 snippets (50 kB). A heavy client asks, four requests at a time
 * for `HEAVY_SECONDS`, for the most a single document may cost:
 * `a: configurations(limit: 50) { effectiveSystemPrompt }` plus a second page
 * of 48 (cost 9,898 of MAX_QUERY_COST 10,000; answers of some 5 MB). A
 * bystander (its own process) sends `{ __typename }` meanwhile.
 *
 * Reported: the heavy answers' size and rate, and the bystander's latency
 * before and during the heavy load.
 */
import { performance } from 'node:perf_hooks';
import { round, writeResult } from './bench-support';
import { bystanderLatency, gql, type LatencyStats, startProber, startServiceProcess } from './bystander';
import { createScratchDatabase, type BenchDialect } from './runs-support';

const HEAVY_SECONDS = Number(process.env.HEAVY_SECONDS ?? 5);
const HEAVY = '{ a: configurations(limit: 50) { effectiveSystemPrompt } b: configurations(limit: 48, offset: 50) { effectiveSystemPrompt } }';

export interface BigAnswerResult {
  dialect: BenchDialect;
  answerBytes: number;
  answers: number;
  answerP50: number;
  baseline: LatencyStats;
  during: LatencyStats;
}

export async function runBigAnswer(dialect: BenchDialect): Promise<BigAnswerResult> {
  const database = await createScratchDatabase(dialect);
  const service = await startServiceProcess(database.url);
  try {
    for (let i = 0; i < 100; i += 1) {
      await gql(service, 'mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }', {
        input: { identifier: `big_${i}`, name: `Big ${i}`, snippet: `${i} ${'x'.repeat(495)}`, tags: ['everything'], sorting: i },
      });
    }
    for (let i = 0; i < 500; i += 1) {
      await gql(service, 'mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', {
        input: { identifier: `big_${i}`, name: `Big ${i}`, model: 'demo', systemPrompt: 'Base.', snippetTags: ['everything'] },
      });
    }
    const prober = startProber(service.url);
    await prober.ready;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const from = performance.now();
    const latencies: number[] = [];
    let answerBytes = 0;
    const heavyClient = async () => {
      while (performance.now() - from < HEAVY_SECONDS * 1000) {
        const sent = performance.now();
        const response = await fetch(service.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${service.token}` },
          body: JSON.stringify({ query: HEAVY }),
        });
        const text = await response.text();
        if (!text.startsWith('{"data":{"a":[')) throw new Error(`unexpected answer: ${text.slice(0, 300)}`);
        answerBytes = text.length;
        latencies.push(performance.now() - sent);
      }
    };
    await Promise.all([heavyClient(), heavyClient(), heavyClient(), heavyClient()]);
    const to = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const samples = await prober.stop();
    const { before, during } = bystanderLatency(prober, samples, from, to);
    latencies.sort((a, b) => a - b);
    return { dialect, answerBytes, answers: latencies.length, answerP50: round(latencies[Math.floor(latencies.length / 2)] ?? 0), baseline: before, during };
  } finally {
    await service.stop();
    await database.cleanup();
  }
}

export function formatBigAnswer(results: BigAnswerResult[]): string {
  return [
    '| database | heavy answers (4 at a time) | bystander before: p50 / p99 / max | during: p50 / p99 / max |',
    '|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.dialect} | ${r.answers} × ${round(r.answerBytes / 1e6, 1)} MB, p50 ${r.answerP50} ms | ${r.baseline.p50} / ${r.baseline.p99} / ${r.baseline.max} ms | ${r.during.p50} / ${r.during.p99} / ${r.during.max} ms |`,
    ),
  ].join('\n');
}

if (require.main === module) {
  const dialects = (process.env.BENCH_DIALECT ?? 'sqlite').split(',') as BenchDialect[];
  (async () => {
    const results: BigAnswerResult[] = [];
    for (const dialect of dialects) results.push(await runBigAnswer(dialect));
    console.log(formatBigAnswer(results));
    writeResult('big-answer', results);
  })().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
