/**
 * The prompt library at scale: 10,000 snippets and 1,000 configurations.
 *
 *  - `previewSnippetChange` of one snippet (a text edit) over HTTP: every
 *    configuration whose prompt the edit alters, before / after / diff.
 *  - `composition` of one configuration over HTTP (parts and dropped).
 *  - baseline, measured in the same run on the same server and data:
 *    `snippet(uid) { uid name }` over HTTP, the cheapest read there is.
 *  - the external-change detector: one poll with nothing changed, and one
 *    poll after 10 rows were changed in the table (as TYPO3 writes them),
 *    plus the first poll after start, which reads every row once.
 *
 * Rows are inserted directly (as TYPO3 would write them): 200 tags, each
 * snippet carries 1–3, each configuration selects 2–4, so one snippet's tags
 * are selected by about 25 configurations. Target: preview p99 < 50 ms.
 *
 * Run: `npm run build && NODE_ENV=production node dist/bench/prompt-library.js`
 * (BENCH_MYSQL_URL / TEST_MYSQL_URL adds MySQL; BENCH_SAMPLES overrides 200).
 */
import { performance } from 'node:perf_hooks';
import pino from 'pino';
import { ConfigurationEntity } from '../src/configurations/configuration.entity';
import { PromptChangeDetector } from '../src/prompt-history/change-detector';
import type { RunningServer } from '../src/server';
import { PromptSnippetEntity } from '../src/snippets/snippet.entity';
import { round, writeResult } from './bench-support';
import { benchDialects, createScratchDatabase, markdownTable, RUNS_BENCH_TOKEN, startRunsServer, stats, type BenchDialect, type Stats } from './runs-support';

const SNIPPETS = 10_000;
const CONFIGURATIONS = 1_000;
const TAGS = 200;
const SAMPLES = Number(process.env.BENCH_SAMPLES ?? 200);

/** A small deterministic generator, so every run builds the same library. */
function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

async function seed(server: RunningServer): Promise<void> {
  const dataSource = server.services.dataSource;
  const next = random(42);
  const now = Math.floor(Date.now() / 1000) - 3600;
  const tag = () => `tag_${Math.floor(next() * TAGS)}`;
  const record = { pid: 0, crdate: now, tstamp: now, deleted: false, hidden: false };
  for (let start = 0; start < SNIPPETS; start += 500) {
    const rows = Array.from({ length: Math.min(500, SNIPPETS - start) }, (_, offset) => {
      const index = start + offset;
      return dataSource.manager.create(PromptSnippetEntity, {
        ...record,
        identifier: `snippet_${index}`,
        name: `Snippet ${index}`,
        description: null,
        snippet: `Fragment ${index}: ${'Write plainly and keep to the point. '.repeat(1 + (index % 4))}`,
        tags: [...new Set(Array.from({ length: 1 + Math.floor(next() * 3) }, tag))].join(','),
        metadata: null,
        isActive: index % 20 !== 0,
        hidden: index % 50 === 0,
        sorting: index % 10,
      });
    });
    await dataSource.createQueryBuilder().insert().into(PromptSnippetEntity).values(rows).updateEntity(false).execute();
  }
  for (let start = 0; start < CONFIGURATIONS; start += 250) {
    const rows = Array.from({ length: Math.min(250, CONFIGURATIONS - start) }, (_, offset) => {
      const index = start + offset;
      return dataSource.manager.create(ConfigurationEntity, {
        ...record,
        identifier: `configuration_${index}`,
        name: `Configuration ${index}`,
        description: null,
        modelUid: 0,
        systemPrompt: `You are assistant ${index}.`,
        temperature: 0.7,
        maxTokens: 1000,
        topP: 1,
        frequencyPenalty: 0,
        presencePenalty: 0,
        timeout: 0,
        options: null,
        snippetTags: [...new Set(Array.from({ length: 2 + Math.floor(next() * 3) }, tag))].join(','),
        skills: 0,
        isActive: true,
        isDefault: false,
        sorting: 0,
      });
    });
    await dataSource.createQueryBuilder().insert().into(ConfigurationEntity).values(rows).updateEntity(false).execute();
  }
}

async function timed(url: string, query: string, variables: Record<string, unknown>): Promise<{ ms: number; data: Record<string, unknown> }> {
  const started = performance.now();
  const response = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${RUNS_BENCH_TOKEN}` },
    body: JSON.stringify({ query, variables }),
  });
  const body = (await response.json()) as { data?: Record<string, unknown>; errors?: unknown[] };
  const ms = performance.now() - started;
  if (body.errors?.length) throw new Error(JSON.stringify(body.errors).slice(0, 500));
  return { ms, data: body.data ?? {} };
}

export interface PromptLibraryRow {
  dialect: BenchDialect;
  snippets: number;
  configurations: number;
  /** Configurations a preview answered, mean. */
  affectedMean: number;
  baseline: Stats;
  preview: Stats;
  composition: Stats;
  previewOverBaselineP99: number;
  /** The first request after a change loads the library: milliseconds. */
  libraryLoadMs: number;
  detectorFirstPollMs: number;
  detectorFirstPollRows: number;
  detectorIdlePoll: Stats;
  detectorIdleRows: number;
  detectorPollAfterTenChanges: Stats;
  met: boolean;
}

async function measure(dialect: BenchDialect): Promise<PromptLibraryRow> {
  const database = await createScratchDatabase(dialect);
  const server = await startRunsServer(database, {}, { PROMPT_CHANGE_POLL_MS: '8000', MAX_QUERY_COST: '1000000' });
  try {
    await seed(server);
    const next = random(7);
    const pick = (count: number) => 1 + Math.floor(next() * count);
    const uids = (await server.services.dataSource.query('SELECT uid FROM tx_nrllm_promptsnippet ORDER BY uid')) as { uid: number }[];
    const configurationUids = (await server.services.dataSource.query('SELECT uid FROM tx_nrllm_configuration ORDER BY uid')) as { uid: number }[];

    const loadStarted = performance.now();
    await timed(server.url, 'mutation($uid: Int!) { previewSnippetChange(uid: $uid, input: { snippet: "warm" }) { before } }', { uid: uids[0]!.uid });
    const libraryLoadMs = performance.now() - loadStarted;

    const baseline: number[] = [];
    const preview: number[] = [];
    const composition: number[] = [];
    let affected = 0;
    for (let sample = 0; sample < SAMPLES; sample += 1) {
      const uid = uids[pick(uids.length) - 1]!.uid;
      // Interleaved, so all three see the same machine.
      baseline.push((await timed(server.url, 'query($uid: Int) { snippet(uid: $uid) { uid name } }', { uid })).ms);
      const answer = await timed(server.url, 'mutation($uid: Int!, $text: String!) { previewSnippetChange(uid: $uid, input: { snippet: $text }) { configuration { identifier } before after diff } }', {
        uid,
        text: `Edited text ${sample}.`,
      });
      preview.push(answer.ms);
      affected += (answer.data.previewSnippetChange as unknown[]).length;
      const configurationUid = configurationUids[pick(configurationUids.length) - 1]!.uid;
      composition.push((await timed(server.url, 'query($uid: Int) { configuration(uid: $uid) { composition { parts { snippet { identifier } matchedTags text } dropped { reason } } } }', { uid: configurationUid })).ms);
    }

    // A detector of its own on the service's database (the service's own polls every 8 s and never saw these rows).
    const detector = new PromptChangeDetector(server.services.dataSource, server.services.history, server.services.identifiers, pino({ level: 'silent' }), 60_000, null);
    let started = performance.now();
    const first = await detector.poll();
    const detectorFirstPollMs = performance.now() - started;
    const idle: number[] = [];
    let idleRows = 0;
    for (let poll = 0; poll < 20; poll += 1) {
      started = performance.now();
      idleRows = (await detector.poll()).scanned;
      idle.push(performance.now() - started);
    }
    const changed: number[] = [];
    for (let round_ = 0; round_ < 10; round_ += 1) {
      const stamp = Math.floor(Date.now() / 1000) + 1 + round_;
      for (let change = 0; change < 10; change += 1) {
        await server.services.dataSource.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', [`Changed ${round_}.${change}`, stamp, uids[pick(uids.length) - 1]!.uid]);
      }
      started = performance.now();
      await detector.poll();
      changed.push(performance.now() - started);
    }

    const previewStats = stats(preview);
    const baselineStats = stats(baseline);
    return {
      dialect,
      snippets: SNIPPETS,
      configurations: CONFIGURATIONS,
      affectedMean: round(affected / SAMPLES, 1),
      baseline: baselineStats,
      preview: previewStats,
      composition: stats(composition),
      previewOverBaselineP99: round(previewStats.p99 / baselineStats.p99),
      libraryLoadMs: round(libraryLoadMs),
      detectorFirstPollMs: round(detectorFirstPollMs),
      detectorFirstPollRows: first.scanned,
      detectorIdlePoll: stats(idle),
      detectorIdleRows: idleRows,
      detectorPollAfterTenChanges: stats(changed),
      met: previewStats.p99 < 50,
    };
  } finally {
    await server.stop();
    await database.cleanup();
  }
}

async function main(): Promise<void> {
  const rows: PromptLibraryRow[] = [];
  for (const dialect of benchDialects()) rows.push(await measure(dialect));
  writeResult('prompt-library', { measuredAt: new Date().toISOString(), samples: SAMPLES, rows });
  console.log(
    markdownTable(
      ['database', 'baseline p50 / p99', 'preview p50 / p99', 'composition p50 / p99', 'affected', 'library load', 'detector: first / idle p50 / 10 changes p50'],
      rows.map((row) => [
        row.dialect,
        `${row.baseline.p50} / ${row.baseline.p99} ms`,
        `${row.preview.p50} / ${row.preview.p99} ms`,
        `${row.composition.p50} / ${row.composition.p99} ms`,
        row.affectedMean,
        `${row.libraryLoadMs} ms`,
        `${row.detectorFirstPollMs} ms (${row.detectorFirstPollRows} rows) / ${row.detectorIdlePoll.p50} ms (${row.detectorIdleRows} rows) / ${row.detectorPollAfterTenChanges.p50} ms`,
      ]),
    ),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
