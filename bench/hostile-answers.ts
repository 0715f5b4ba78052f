/**
 * What queries built to stall the service do to everyone else while they are
 * refused.
 *
 * The real server in its own process (a scratch database) holds a 20-round
 * run whose REQUEST steps repeat an 8,000-character answer per round (about
 * 1.7 MB of stored transcripts) and a snippet with 401 versions of 60 kB. A
 * hostile client (a VIEWER token), four requests at a time for
 * `HEAVY_SECONDS`, sends in turn:
 *  - 30 aliases of the run's whole trace with its transcripts (refused by its cost);
 *  - 30 aliases of a 10-step page of the trace's last steps (stopped while read,
 *    at MAX_RESPONSE_BYTES, set to 1 MB here);
 *  - 30 aliases of the snippet's versions with their texts (stopped before written).
 * Every answer must be the refusal (BAD_USER_INPUT). A bystander (its own
 * process) sends `{ __typename }` meanwhile; its latency before the hostile
 * load is the baseline of the same run. Target: its p99 during stays under
 * 100 ms.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { round, writeResult } from './bench-support';
import { bystanderLatency, gql, type LatencyStats, startProber, startServiceProcess } from './bystander';
import { createScratchDatabase, type BenchDialect } from './runs-support';

const HEAVY_SECONDS = Number(process.env.HEAVY_SECONDS ?? 5);
const ROUNDS = 20;
const VERSIONS = 401;
const MAX_RESPONSE_BYTES = 1024 * 1024;

/** An OpenAI-compatible provider on loopback: a tool call with an 8,000-character answer each round until the last. */
function startProvider(): Promise<{ url: string; close(): void }> {
  const server = http.createServer((request, response) => {
    let body = '';
    request.on('data', (chunk: Buffer) => (body += chunk.toString()));
    request.on('end', () => {
      const messages = (JSON.parse(body) as { messages: { role: string }[] }).messages;
      const round = messages.filter((message) => message.role === 'assistant').length + 1;
      const message =
        round < ROUNDS
          ? { role: 'assistant', content: `${round}`.padEnd(8000, '.'), tool_calls: [{ id: `call_${round}`, type: 'function', function: { name: 'calculator', arguments: JSON.stringify({ expression: `${round} + 1` }) } }] }
          : { role: 'assistant', content: 'Done.' };
      response.writeHead(200, { 'content-type': 'application/json' });
      response.end(JSON.stringify({ id: 'x', object: 'chat.completion', created: 0, model: 'm', choices: [{ index: 0, message, finish_reason: round < ROUNDS ? 'tool_calls' : 'stop' }], usage: { prompt_tokens: 1, completion_tokens: 1, total_tokens: 2 } }));
    });
  });
  return new Promise((resolve) =>
    server.listen(0, '127.0.0.1', () => resolve({ url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, close: () => server.close() })),
  );
}

export interface HostileAnswersResult {
  dialect: BenchDialect;
  refusals: number;
  refusalP50: number;
  refusalP99: number;
  baseline: LatencyStats;
  during: LatencyStats;
}

export async function runHostileAnswers(dialect: BenchDialect): Promise<HostileAnswersResult> {
  const database = await createScratchDatabase(dialect);
  const provider = await startProvider();
  const service = await startServiceProcess(database.url, { MAX_RESPONSE_BYTES: String(MAX_RESPONSE_BYTES) });
  try {
    await gql(service, 'mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: 'hostile', name: 'Hostile bench', adapterType: 'custom', endpointUrl: provider.url, apiKey: 'bench-key', maxRetries: 0 },
    });
    await gql(service, 'mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', {
      input: { identifier: 'hostile', name: 'Hostile', provider: 'hostile', modelId: 'm', contextLength: 2_000_000 },
    });
    await gql(service, 'mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', {
      input: { identifier: 'hostile', name: 'Hostile', model: 'hostile' },
    });
    const { startRun } = await gql<{ startRun: { id: string } }>(service, 'mutation($input: StartRunInput!) { startRun(input: $input) { id } }', {
      input: { configuration: 'hostile', prompt: 'Count.', maxRounds: ROUNDS, stream: false },
    });
    let steps = 0;
    for (;;) {
      const { run } = await gql<{ run: { status: string; error: string | null; steps: unknown[] } }>(service, 'query($id: ID!) { run(id: $id) { status error steps { sequence } } }', { id: startRun.id });
      if (run.status !== 'QUEUED' && run.status !== 'RUNNING') {
        if (run.status !== 'COMPLETED') throw new Error(`the run ended ${run.status}: ${run.error}`);
        steps = run.steps.length;
        break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
    const { createSnippet } = await gql<{ createSnippet: { uid: number } }>(service, 'mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }', {
      input: { identifier: 'hostile_versions', name: 'Versions', snippet: '1'.padEnd(60_000, '.') },
    });
    for (let version = 2; version <= VERSIONS; version += 1) {
      await gql(service, 'mutation($uid: Int!, $input: UpdateSnippetInput!) { updateSnippet(uid: $uid, input: $input) { uid } }', {
        uid: createSnippet.uid,
        input: { snippet: `${version}`.padEnd(60_000, '.') },
      });
    }
    const { createApiToken } = await gql<{ createApiToken: { token: string } }>(service, 'mutation { createApiToken(name: "hostile", role: VIEWER) { token } }');
    const aliases = (make: (index: number) => string) => `query { ${Array.from({ length: 30 }, (_, index) => `a${index}: ${make(index)}`).join(' ')} }`;
    const only = process.env.HOSTILE_ONLY;
    const all = [
      aliases(() => `run(id: "${startRun.id}") { steps { messagesSent { role content toolCalls { id name arguments } toolCallId } } }`),
      aliases((index) => `run(id: "${startRun.id}") { steps(afterSequence: ${steps - 12 - (index % 10)}, limit: 10) { messagesSent { content } } }`),
      aliases(() => `snippet(uid: ${createSnippet.uid}) { versions { version snippet } }`),
    ];
    // HOSTILE_ONLY=0,1,2 sends only those kinds (to see what each costs).
    const hostile = only ? only.split(',').map((index) => all[Number(index)]) : all;

    const prober = startProber(service.url);
    await prober.ready;
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const from = performance.now();
    const latencies: number[] = [];
    let next = 0;
    const hostileClient = async () => {
      while (performance.now() - from < HEAVY_SECONDS * 1000) {
        const query = hostile[next++ % hostile.length];
        const sent = performance.now();
        const response = await fetch(service.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${createApiToken.token}` },
          body: JSON.stringify({ query }),
        });
        const answer = (await response.json()) as { data?: unknown; errors?: { extensions?: { code?: string } }[] };
        if (answer.data || answer.errors?.[0]?.extensions?.code !== 'BAD_USER_INPUT') throw new Error(`not refused: ${JSON.stringify(answer).slice(0, 300)}`);
        latencies.push(performance.now() - sent);
      }
    };
    await Promise.all([hostileClient(), hostileClient(), hostileClient(), hostileClient()]);
    const to = performance.now();
    await new Promise((resolve) => setTimeout(resolve, 500));
    const samples = await prober.stop();
    const { before, during } = bystanderLatency(prober, samples, from, to);
    latencies.sort((a, b) => a - b);
    const at = (p: number) => round(latencies[Math.min(latencies.length - 1, Math.ceil(p * latencies.length) - 1)] ?? 0);
    return { dialect, refusals: latencies.length, refusalP50: at(0.5), refusalP99: at(0.99), baseline: before, during };
  } finally {
    await service.stop();
    provider.close();
    await database.cleanup();
  }
}

export function formatHostileAnswers(results: HostileAnswersResult[]): string {
  return [
    '| database | hostile requests refused (4 at a time) | bystander before: p50 / p99 / max | during: p50 / p99 / max |',
    '|---|---|---|---|',
    ...results.map(
      (r) =>
        `| ${r.dialect} | ${r.refusals}, p50 ${r.refusalP50} ms, p99 ${r.refusalP99} ms | ${r.baseline.p50} / ${r.baseline.p99} / ${r.baseline.max} ms | ${r.during.p50} / ${r.during.p99} / ${r.during.max} ms |`,
    ),
  ].join('\n');
}

if (require.main === module) {
  const dialects = (process.env.BENCH_DIALECT ?? 'sqlite').split(',') as BenchDialect[];
  (async () => {
    const results: HostileAnswersResult[] = [];
    for (const dialect of dialects) results.push(await runHostileAnswers(dialect));
    console.log(formatHostileAnswers(results));
    writeResult('hostile-answers', results);
  })().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
