/**
 * The prompt library at scale: 10,000 snippets and 1,000 configurations.
 *
 * The service runs in its own process (as in production: its clients'
 * parsing is not its cost), on a database that already holds the library
 * (rows written directly, as TYPO3 writes them, while no service ran).
 *
 *  - First sight: a change detector reading the 11,000 rows for the first
 *    time, in this process (time, rows, the longest event-loop stall), then
 *    (the versions removed again) the service's own: how long after its start
 *    the baseline (version 1 of each row) is recorded, and what a bystander
 *    (`{ __typename }` from its own process) saw meanwhile.
 *  - `previewSnippetChange` of one snippet (a text edit) over HTTP: every
 *    configuration whose prompt the edit alters, before / after / diff (an
 *    answer of about 2 MB); the same asking for the diffs only.
 *  - `composition` of one configuration over HTTP (parts and dropped).
 *  - baseline, measured in the same run on the same server and data:
 *    `snippet(uid) { uid name }` over HTTP, the cheapest read there is.
 *  - the preview's own work in process (this process's library, no GraphQL,
 *    no HTTP): bring the library up to date, compose, diff.
 *  - the external-change detector, one of its own on the same database:
 *    its first poll (every row compared with its version, as after a
 *    restart), idle polls, and a poll after 10 rows were changed.
 *
 * Rows are inserted directly: 200 tags, each snippet carries 1–3, each
 * configuration selects 2–4, so one snippet's tags are selected by about 28
 * configurations. Target: preview p99 < 50 ms.
 *
 * Run: `npm run build && NODE_ENV=production node dist/bench/prompt-library.js`
 * (BENCH_MYSQL_URL / TEST_MYSQL_URL adds MySQL; BENCH_SAMPLES overrides 200).
 */
import { monitorEventLoopDelay, performance } from 'node:perf_hooks';
import pino from 'pino';
import type { DataSource } from 'typeorm';
import { loadConfig } from '../src/config';
import { ConfigurationEntity } from '../src/configurations/configuration.entity';
import { createDataSource, type Dialect } from '../src/db/data-source';
import { IdentifierLock } from '../src/db/identifier-lock';
import { PromptChangeDetector } from '../src/prompt-history/change-detector';
import { previewSnippetImpact } from '../src/prompt-history/impact-preview';
import { InProcessPromptEventBus } from '../src/prompt-history/prompt-event-bus';
import { PromptHistoryService } from '../src/prompt-history/prompt-history.service';
import { PromptLibraryCache } from '../src/prompt-history/prompt-library';
import { PromptSnippetEntity } from '../src/snippets/snippet.entity';
import { round, writeResult } from './bench-support';
import { bystanderLatency, type LatencyStats, startProber, startServiceProcess, type ServiceProcess } from './bystander';
import { benchDialects, createScratchDatabase, markdownTable, sleep, stats, type BenchDialect, type Stats } from './runs-support';

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

async function seed(dataSource: DataSource): Promise<void> {
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

/** A request's time, and its parts as the client sees them: until the headers came, reading the body after them, parsing it. */
interface Timed {
  ms: number;
  untilHeadersMs: number;
  readingMs: number;
  parsingMs: number;
  data: Record<string, unknown>;
  bytes: number;
}

async function timed(service: ServiceProcess, query: string, variables: Record<string, unknown>): Promise<Timed> {
  const started = performance.now();
  const response = await fetch(service.url, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${service.token}` },
    body: JSON.stringify({ query, variables }),
  });
  const headersAt = performance.now();
  const text = await response.text();
  const readAt = performance.now();
  const body = JSON.parse(text) as { data?: Record<string, unknown>; errors?: unknown[] };
  const ms = performance.now() - started;
  if (body.errors?.length) throw new Error(JSON.stringify(body.errors).slice(0, 500));
  return { ms, untilHeadersMs: headersAt - started, readingMs: readAt - headersAt, parsingMs: ms - (readAt - started), data: body.data ?? {}, bytes: Buffer.byteLength(text) };
}

export interface PromptLibraryRow {
  dialect: BenchDialect;
  snippets: number;
  configurations: number;
  /** A detector's first sight of the tables in this process: milliseconds, rows read, versions stored, the longest event-loop stall. */
  firstSightMs: number;
  firstSightRows: number;
  firstSightBaselined: number;
  firstSightLongestStallMs: number;
  /** From the service's start until version 1 of every row was stored (its detector's first sight). */
  baselineMs: number;
  baselineRows: number;
  /** A bystander's `{ __typename }` before the service was ready is not measured; this is from ready until the baseline was stored. */
  bystanderDuringFirstSight: LatencyStats;
  /** The first request loads the library: milliseconds. */
  libraryLoadMs: number;
  /** Configurations a preview answered, mean. */
  affectedMean: number;
  baseline: Stats;
  /** The whole answer: before, after and diff of each affected configuration. */
  preview: Stats;
  /** Mean size of that answer, bytes. */
  previewAnswerBytes: number;
  /** Its size at the 50th and 99th percentile, bytes (the answers differ: an edit changes 1 to 60 prompts). */
  previewAnswerBytesP50: number;
  previewAnswerBytesP99: number;
  /**
   * The whole answer's time in parts, as the client sees them: until the headers came (the server's
   * work: library up to date, compose, diff, GraphQL, JSON text), reading the body after them
   * (written in slices by the server while the client reads), parsing it.
   */
  previewUntilHeaders: Stats;
  previewReading: Stats;
  previewParsing: Stats;
  /** The same request asking for the diffs only (the prompts are composed all the same, not sent). */
  previewDiffOnly: Stats;
  /** The preview's work in process: library up to date, compose, diff (no GraphQL, no HTTP). */
  previewInProcess: Stats;
  composition: Stats;
  previewOverBaselineP99: number;
  /** A detector's first poll on tables whose rows all have a version (a restart): every row read and compared. */
  detectorFirstPollMs: number;
  detectorFirstPollRows: number;
  detectorIdlePoll: Stats;
  detectorIdleRows: number;
  detectorPollAfterTenChanges: Stats;
  met: boolean;
}

/** The scratch database as the service's configuration reads it. */
function databaseConfigOf(database: { url: string }) {
  return loadConfig({ DATABASE_URL: database.url, SECRET_KEY: 'bench-runs-secret-key-0123456789' }).database;
}

async function measure(dialect: BenchDialect): Promise<PromptLibraryRow> {
  const database = await createScratchDatabase(dialect);
  // The schema, then the library written while no service runs (as TYPO3 fills its tables).
  const { dataSource } = await createDataSource({ database: databaseConfigOf(database), schemaMode: 'own' });
  await dataSource.runMigrations({ transaction: 'each' });
  await seed(dataSource);
  const history = new PromptHistoryService(dataSource, new InProcessPromptEventBus(), null);
  const identifiers = new IdentifierLock(dataSource, dialect as Dialect);

  const stalls = monitorEventLoopDelay({ resolution: 1 });
  stalls.enable();
  let pollStarted = performance.now();
  const sight = await new PromptChangeDetector(dataSource, history, identifiers, pino({ level: 'silent' }), 60_000, null).poll();
  const firstSightMs = performance.now() - pollStarted;
  stalls.disable();
  // Unseen again, for the service's own first sight.
  await dataSource.query('DELETE FROM promptwire_prompt_version');
  const versionCount = async () => Number(((await dataSource.query('SELECT COUNT(*) AS n FROM promptwire_prompt_version')) as { n: unknown }[])[0]!.n);

  const started = performance.now();
  const service = await startServiceProcess(database.url, { SEED_EXAMPLES: 'false', PROMPT_CHANGE_POLL_MS: '8000', MAX_QUERY_COST: '1000000' });
  try {
    const prober = startProber(service.url);
    await prober.ready;
    const proberFrom = performance.now();
    let baselineRows = 0;
    while ((baselineRows = await versionCount()) < SNIPPETS + CONFIGURATIONS) await sleep(20);
    const baselineMs = performance.now() - started;
    const proberTo = performance.now();
    const { during: bystanderDuringFirstSight } = bystanderLatency(prober, await prober.stop(), proberFrom, proberTo);

    const next = random(7);
    const pick = (count: number) => 1 + Math.floor(next() * count);
    const uids = (await dataSource.query('SELECT uid FROM tx_nrllm_promptsnippet ORDER BY uid')) as { uid: number }[];
    const configurationUids = (await dataSource.query('SELECT uid FROM tx_nrllm_configuration ORDER BY uid')) as { uid: number }[];

    const loadStarted = performance.now();
    await timed(service, 'mutation($uid: Int!) { previewSnippetChange(uid: $uid, input: { snippet: "warm" }) { before } }', { uid: uids[0]!.uid });
    const libraryLoadMs = performance.now() - loadStarted;

    // This process's own library on the same database, for the preview's work without GraphQL and HTTP.
    const library = new PromptLibraryCache(dataSource, history);
    await library.get();
    // Its prompts composed ahead (as the service's, which began earlier, are by then): else that
    // work runs in this process, the client's, during the first samples.
    await library.prepared();

    const baseline: number[] = [];
    const preview: number[] = [];
    const previewDiffOnly: number[] = [];
    const previewInProcess: number[] = [];
    const composition: number[] = [];
    let affected = 0;
    let answerBytes = 0;
    const answerSizes: number[] = [];
    const untilHeaders: number[] = [];
    const reading: number[] = [];
    const parsing: number[] = [];
    for (let sample = 0; sample < SAMPLES; sample += 1) {
      const uid = uids[pick(uids.length) - 1]!.uid;
      // Interleaved, so all see the same machine.
      baseline.push((await timed(service, 'query($uid: Int) { snippet(uid: $uid) { uid name } }', { uid })).ms);
      const answer = await timed(service, 'mutation($uid: Int!, $text: String!) { previewSnippetChange(uid: $uid, input: { snippet: $text }) { configuration { identifier } before after diff } }', {
        uid,
        text: `Edited text ${sample}.`,
      });
      preview.push(answer.ms);
      affected += (answer.data.previewSnippetChange as unknown[]).length;
      answerBytes += answer.bytes;
      answerSizes.push(answer.bytes);
      untilHeaders.push(answer.untilHeadersMs);
      reading.push(answer.readingMs);
      parsing.push(answer.parsingMs);
      previewDiffOnly.push(
        (await timed(service, 'mutation($uid: Int!, $text: String!) { previewSnippetChange(uid: $uid, input: { snippet: $text }) { configuration { identifier } diff } }', { uid, text: `Edited again ${sample}.` })).ms,
      );
      const computeStarted = performance.now();
      const current = await library.get();
      const stored = current.snippet(uid)!;
      previewSnippetImpact(current, stored, Object.assign(Object.create(Object.getPrototypeOf(stored) as object) as PromptSnippetEntity, stored, { snippet: `Edited once more ${sample}.` }));
      previewInProcess.push(performance.now() - computeStarted);
      const configurationUid = configurationUids[pick(configurationUids.length) - 1]!.uid;
      composition.push((await timed(service, 'query($uid: Int) { configuration(uid: $uid) { composition { parts { snippet { identifier } matchedTags text } dropped { reason } } } }', { uid: configurationUid })).ms);
    }

    // A detector of its own on the same database, as after a restart: every row already has its version.
    const detector = new PromptChangeDetector(dataSource, history, identifiers, pino({ level: 'silent' }), 60_000, null);
    pollStarted = performance.now();
    const first = await detector.poll();
    const detectorFirstPollMs = performance.now() - pollStarted;
    const idle: number[] = [];
    let idleRows = 0;
    for (let poll = 0; poll < 20; poll += 1) {
      pollStarted = performance.now();
      idleRows = Math.max(idleRows, (await detector.poll()).scanned);
      idle.push(performance.now() - pollStarted);
    }
    const changed: number[] = [];
    for (let round_ = 0; round_ < 10; round_ += 1) {
      const stamp = Math.floor(Date.now() / 1000) + 1 + round_;
      for (let change = 0; change < 10; change += 1) {
        await dataSource.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', [`Changed ${round_}.${change}`, stamp, uids[pick(uids.length) - 1]!.uid]);
      }
      pollStarted = performance.now();
      await detector.poll();
      changed.push(performance.now() - pollStarted);
    }

    const previewStats = stats(preview);
    const baselineStats = stats(baseline);
    return {
      dialect,
      snippets: SNIPPETS,
      configurations: CONFIGURATIONS,
      firstSightMs: round(firstSightMs),
      firstSightRows: sight.scanned,
      firstSightBaselined: sight.baselined,
      firstSightLongestStallMs: round(stalls.max / 1e6),
      baselineMs: round(baselineMs),
      baselineRows,
      bystanderDuringFirstSight,
      libraryLoadMs: round(libraryLoadMs),
      affectedMean: round(affected / SAMPLES, 1),
      baseline: baselineStats,
      preview: previewStats,
      previewAnswerBytes: Math.round(answerBytes / SAMPLES),
      previewAnswerBytesP50: Math.round(stats(answerSizes, 0).p50),
      previewAnswerBytesP99: Math.round(stats(answerSizes, 0).p99),
      previewUntilHeaders: stats(untilHeaders),
      previewReading: stats(reading),
      previewParsing: stats(parsing),
      previewDiffOnly: stats(previewDiffOnly),
      previewInProcess: stats(previewInProcess),
      composition: stats(composition),
      previewOverBaselineP99: round(previewStats.p99 / baselineStats.p99),
      detectorFirstPollMs: round(detectorFirstPollMs),
      detectorFirstPollRows: first.scanned,
      detectorIdlePoll: stats(idle),
      detectorIdleRows: idleRows,
      detectorPollAfterTenChanges: stats(changed),
      met: previewStats.p99 < 50,
    };
  } finally {
    await service.stop();
    await dataSource.destroy();
    await database.cleanup();
  }
}

async function main(): Promise<void> {
  const rows: PromptLibraryRow[] = [];
  for (const dialect of benchDialects()) rows.push(await measure(dialect));
  writeResult('prompt-library', { measuredAt: new Date().toISOString(), samples: SAMPLES, rows });
  console.log(
    markdownTable(
      ['database', 'first sight in process (longest stall)', 'service start to baseline (bystander p50 / max)', 'baseline p50 / p99', 'preview p50 / p99 (p99 × baseline p99; answer mean, p50, p99)', 'preview parts p50 / p99: until headers, reading, parsing', 'diffs only p50 / p99', 'in process p50 / p99', 'composition p50 / p99', 'affected', 'library load', 'detector: first / idle p50 (rows) / 10 changes p50'],
      rows.map((row) => [
        row.dialect,
        `${row.firstSightMs} ms, ${row.firstSightRows} rows, ${row.firstSightBaselined} versions (${row.firstSightLongestStallMs} ms)`,
        `${row.baselineMs} ms for ${row.baselineRows} rows (${row.bystanderDuringFirstSight.p50} / ${row.bystanderDuringFirstSight.max} ms)`,
        `${row.baseline.p50} / ${row.baseline.p99} ms`,
        `${row.preview.p50} / ${row.preview.p99} ms (${row.previewOverBaselineP99}; ${Math.round(row.previewAnswerBytes / 1000)}, ${Math.round(row.previewAnswerBytesP50 / 1000)}, ${Math.round(row.previewAnswerBytesP99 / 1000)} kB)`,
        `${row.previewUntilHeaders.p50} / ${row.previewUntilHeaders.p99}, ${row.previewReading.p50} / ${row.previewReading.p99}, ${row.previewParsing.p50} / ${row.previewParsing.p99} ms`,
        `${row.previewDiffOnly.p50} / ${row.previewDiffOnly.p99} ms`,
        `${row.previewInProcess.p50} / ${row.previewInProcess.p99} ms`,
        `${row.composition.p50} / ${row.composition.p99} ms`,
        row.affectedMean,
        `${row.libraryLoadMs} ms`,
        `${row.detectorFirstPollMs} ms (${row.detectorFirstPollRows} rows) / ${row.detectorIdlePoll.p50} ms (${row.detectorIdleRows}) / ${row.detectorPollAfterTenChanges.p50} ms`,
      ]),
    ),
  );
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
