/**
 * A remote MCP tool call through the agent loop against the same call made
 * directly with the SDK client.
 *
 * One MCP server built with the SDK (streamable HTTP, stateless, on
 * 127.0.0.1) serves an `echo` tool. The service runs in this process with a
 * scripted model that asks for CALLS `mcp_bench_echo` calls in one turn (the
 * per-run budget is 20), then answers. Its MCP server is registered with a
 * stored (encrypted) credential, imported and enabled, as an administrator
 * would.
 *
 *     loop per call = t(TOOL step published) − t(previous step published)
 *
 * i.e. everything the loop does for one call: argument parsing and schema
 * check, the budget, the credential, the SDK call over the kept connection,
 * the result cap, the TOOL step stored and published.
 *
 *     direct per call = one `client.callTool` of an SDK client that stays
 *     connected to the same server (the same request and answer bytes)
 *
 * Runs and direct batches of the same number of calls alternate, so both see
 * the same machine. Target: loop p50 < 1.2 × direct p50 + 1 ms.
 *
 * Run: `npm run build && NODE_ENV=production node dist/bench/mcp-call.js`
 * (BENCH_MCP_RUNS overrides 100; BENCH_MYSQL_URL / TEST_MYSQL_URL adds MySQL).
 */
import { createServer, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { performance } from 'node:perf_hooks';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';
import { createScriptedAdapter, type ScriptedReply } from '../test/support/scripted-adapter';
import type { BusListener, StoredStep } from '../src/runs/trace-bus';
import { round, writeResult } from './bench-support';
import { BENCH_CALLER, benchDialects, createScratchDatabase, markdownTable, seedRunConfiguration, startRunsServer, stats, traceBusOf, withDeadline, type BenchDialect, type Stats } from './runs-support';

const CALLS = 10;
const WARMUP_RUNS = 10;
const TOOL = 'mcp_bench_echo';
const TEXT = 'The catalogue entry for article 4711: blue, cotton, 42 EUR, in stock.';

export interface McpCallRow {
  dialect: BenchDialect;
  runs: number;
  calls: number;
  loop: Stats;
  /** The TOOL step's own duration: the call inside the loop, without storing and publishing the step. */
  toolStep: Stats;
  direct: Stats;
  ratioP50: number;
  /** 1.2 × direct p50 + 1 ms. */
  allowedP50: number;
  met: boolean;
  failures: number;
}

interface EchoServer {
  url: string;
  close(): Promise<void>;
}

async function startEchoServer(): Promise<EchoServer> {
  const http: HttpServer = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (chunk: Buffer) => chunks.push(chunk));
    req.on('end', () => {
      void (async () => {
        const text = Buffer.concat(chunks).toString('utf8');
        const server = new Server({ name: 'bench-echo', version: '1.0.0' }, { capabilities: { tools: {} } });
        server.setRequestHandler(ListToolsRequestSchema, () => ({
          tools: [{ name: 'echo', description: 'Answers its text.', inputSchema: { type: 'object' as const, properties: { text: { type: 'string' } }, required: ['text'] } }],
        }));
        server.setRequestHandler(CallToolRequestSchema, (request) => ({ content: [{ type: 'text' as const, text: String(request.params.arguments?.text) }] }));
        const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
        res.on('close', () => {
          void transport.close();
          void server.close();
        });
        await server.connect(transport);
        await transport.handleRequest(req, res, text === '' ? undefined : JSON.parse(text));
      })();
    });
  });
  await new Promise<void>((resolve) => http.listen(0, '127.0.0.1', () => resolve()));
  return {
    url: `http://127.0.0.1:${(http.address() as AddressInfo).port}/mcp`,
    close: () =>
      new Promise<void>((resolve) => {
        http.closeAllConnections();
        http.close(() => resolve());
      }),
  };
}

function script(): ScriptedReply[] {
  return [
    { toolCalls: Array.from({ length: CALLS }, (_, index) => ({ name: TOOL, arguments: { text: `${TEXT} #${index}` } })), usage: [200, 40] },
    { content: 'Article 4711 is in stock.', usage: [400, 10] },
  ];
}

export async function runMcpCall(runs = Number(process.env.BENCH_MCP_RUNS ?? 100)): Promise<McpCallRow[]> {
  const rows: McpCallRow[] = [];
  const echo = await startEchoServer();
  try {
    for (const dialect of benchDialects()) {
      const database = await createScratchDatabase(dialect);
      try {
        rows.push(await measure(dialect, database, echo, runs));
      } finally {
        await database.cleanup();
      }
    }
  } finally {
    await echo.close();
  }
  writeResult('mcp-call', {
    measuredAt: new Date().toISOString(),
    node: process.version,
    definition: 'loop per call = t(TOOL step published) − t(previous step published), CALLS calls per run; direct per call = one callTool of a kept SDK client on the same server; runs and direct batches alternate',
    rows,
  });
  return rows;
}

async function measure(dialect: BenchDialect, database: Awaited<ReturnType<typeof createScratchDatabase>>, echo: EchoServer, runs: number): Promise<McpCallRow> {
  // The MCP server is on loopback: WEBHOOK_ALLOWED_HOSTS allows it.
  const server = await startRunsServer(database, { runs: { adapterFactory: () => createScriptedAdapter(script()) } }, { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1' });
  const direct = new Client({ name: 'bench-direct', version: '1' });
  try {
    const { services } = server;
    const configuration = await seedRunConfiguration(services);
    const created = await services.mcp.create({ identifier: 'bench', name: 'Bench', url: echo.url, credential: 'bench-credential-0123456789', enabled: true, requiresApproval: false });
    const { server: imported } = await services.mcp.importTools(created.uid);
    if (imported.importStatus !== 'ok') throw new Error(`import: ${imported.importStatus} ${imported.importError ?? ''}`);
    await direct.connect(new StreamableHTTPClientTransport(new URL(echo.url), { requestInit: { headers: { authorization: 'Bearer bench-credential-0123456789' } } }));
    const bus = traceBusOf(services.runs);

    const toolStepTimes: number[] = [];
    const oneRun = async (): Promise<number[] | null> => {
      const view = await services.runs.start({ configuration, prompt: 'Look the article up.', tools: [TOOL], maxRounds: 2, stream: false }, BENCH_CALLER);
      const published: { step: StoredStep; t: number }[] = [];
      let resolveEnd!: () => void;
      const ended = new Promise<void>((resolve) => (resolveEnd = resolve));
      const listener: BusListener = (message) => {
        if (message.type !== 'step') return;
        published.push({ step: message.step, t: performance.now() });
        if (message.step.kind === 'end') resolveEnd();
      };
      const unsubscribe = bus.subscribe(view.row.uuid, listener);
      try {
        await withDeadline(ended, 30_000, `END of run ${view.row.uuid}`);
      } finally {
        unsubscribe();
      }
      const perCall: number[] = [];
      for (let i = 1; i < published.length; i += 1) {
        const step = published[i]!.step;
        if (step.kind !== 'tool') continue;
        if (step.toolIsError || !String(step.toolResult).startsWith(TEXT)) return null;
        perCall.push(published[i]!.t - published[i - 1]!.t);
        toolStepTimes.push(step.durationMs);
      }
      return perCall.length === CALLS ? perCall : null;
    };
    const directBatch = async (): Promise<number[]> => {
      const times: number[] = [];
      for (let index = 0; index < CALLS; index += 1) {
        const t0 = performance.now();
        const result = await direct.callTool({ name: 'echo', arguments: { text: `${TEXT} #${index}` } });
        times.push(performance.now() - t0);
        if (result.isError) throw new Error('direct call failed');
      }
      return times;
    };

    for (let i = 0; i < WARMUP_RUNS; i += 1) {
      await oneRun();
      await directBatch();
    }
    toolStepTimes.length = 0;
    const loopTimes: number[] = [];
    const directTimes: number[] = [];
    let failures = 0;
    for (let i = 0; i < runs; i += 1) {
      const perCall = await oneRun();
      if (perCall === null) failures += 1;
      else loopTimes.push(...perCall);
      directTimes.push(...(await directBatch()));
    }
    const loop = stats(loopTimes);
    const directStats = stats(directTimes);
    const allowed = round(1.2 * directStats.p50 + 1, 3);
    return { dialect, runs, calls: CALLS, loop, toolStep: stats(toolStepTimes), direct: directStats, ratioP50: round(loop.p50 / directStats.p50), allowedP50: allowed, met: loop.p50 < allowed && failures === 0, failures };
  } finally {
    await direct.close().catch(() => undefined);
    await server.stop();
  }
}

export function formatMcpCall(rows: readonly McpCallRow[]): string {
  return markdownTable(
    ['database', 'runs × calls', 'loop per call p50 / p99 ms', 'of which the call (TOOL step duration) p50 / p99 ms', 'direct SDK call p50 / p99 ms', 'ratio p50', 'target (< 1.2× direct + 1 ms)', 'failed runs'],
    rows.map((row) => [
      row.dialect,
      `${row.runs} × ${row.calls}`,
      `${row.loop.p50} / ${row.loop.p99}`,
      `${row.toolStep.p50} / ${row.toolStep.p99}`,
      `${row.direct.p50} / ${row.direct.p99}`,
      `${row.ratioP50}×`,
      `< ${row.allowedP50} ms ${row.met ? 'met' : 'NOT met'}`,
      row.failures,
    ]),
  );
}

if (require.main === module) {
  runMcpCall()
    .then((rows) => console.log(formatMcpCall(rows)))
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
