/**
 * `npm run bench`: every benchmark in sequence, each beside a baseline
 * measured in the same run. Writes bench/results/summary.md and the summary
 * section of BENCHMARKS.md. MySQL figures need BENCH_MYSQL_URL (or TEST_MYSQL_URL).
 */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { runAdapterBench } from './adapter-overhead';
import { formatMcpCall, runMcpCall } from './mcp-call';
import { formatThroughput, runApiThroughput } from './api-throughput';
import { formatRunsConcurrency, runRunsConcurrency } from './runs-concurrency';
import { formatRunsFanout, runRunsFanout } from './runs-fanout';
import { formatRunsLoop, runRunsLoop } from './runs-loop';
import { formatConversations, runConversations } from './conversations';
import { formatTakeover, formatWaitingMemory, runTakeover, runWaitingMemory } from './runs-durable';
import { formatUsageBench, runUsageBench } from './usage';
import { formatTasksBench, runTasksBench } from './tasks';

async function main(): Promise<void> {
  const sections: string[] = [];
  const stamp = `Measured ${new Date().toISOString().slice(0, 10)} on ${os.cpus().length} cores (${os.cpus()[0]?.model ?? 'unknown CPU'}), Node ${process.version}.`;
  sections.push(stamp);

  console.log('== API throughput (autocannon, 50 connections)');
  const throughput = formatThroughput(await runApiThroughput());
  console.log(throughput);
  sections.push(`### API throughput against a lean Apollo + raw SQL baseline\n\n${throughput}`);

  console.log('== Provider adapter overhead');
  const adapters = await runAdapterBench();
  const adapterTable = ['| case | adapter ÷ bare JSON.parse | detail |', '|---|---|---|', ...adapters.map((r) => `| ${r.name} | ${r.ratio.toFixed(2)}× | ${r.detail} |`)].join('\n');
  console.log(adapterTable);
  sections.push(`### Provider adapter overhead (decode + map) against a bare JSON.parse of the same bytes\n\n${adapterTable}`);

  console.log('== Agent loop overhead per round');
  const loop = formatRunsLoop(await runRunsLoop());
  console.log(loop);
  sections.push(`### Agent loop overhead per round (zero-latency provider)\n\n${loop}`);

  console.log('== Conversation turn overhead');
  const conversations = formatConversations(await runConversations());
  console.log(conversations);
  sections.push(`### A conversation turn against a plain startRun (zero-latency provider), by stored history\n\n${conversations}`);

  console.log('== Trace fan-out');
  const fanout = formatRunsFanout((await runRunsFanout()).rows);
  console.log(fanout);
  sections.push(`### runTrace fan-out to 1 – 1,000 graphql-ws clients against a bare graphql-ws useServer baseline\n\n${fanout}`);

  console.log('== Concurrent runs');
  const concurrency = formatRunsConcurrency(await runRunsConcurrency());
  console.log(concurrency);
  sections.push(`### Concurrent runs\n\n${concurrency}`);

  console.log('== Durable runs: memory of runs waiting for approval, takeover of a killed instance\'s run');
  const waiting = formatWaitingMemory(await runWaitingMemory());
  console.log(waiting);
  sections.push(`### 200 runs waiting for approval at once: process memory per run, against the same runs finished\n\n${waiting}`);
  const takeover = formatTakeover(await runTakeover());
  console.log(takeover);
  sections.push(`### Takeover: from SIGKILL of the owner to the call made again by a surviving instance, against the lease\n\n${takeover}`);

  console.log('== Usage ledger: budget check + booking per call, usage over a year × 50 models');
  const usage = formatUsageBench(await runUsageBench());
  console.log(usage);
  sections.push(`### Usage ledger: check + booking per call against the booking alone; usage over a year against raw SQL\n\n${usage}`);

  console.log('== Tasks: render function, schema validation overhead');
  const tasks = formatTasksBench(await runTasksBench());
  console.log(tasks);
  sections.push(`### Tasks: the render function against nr_llm's buildPrompt; runTask with a schema against without\n\n${tasks}`);

  console.log('== Remote MCP tool call');
  const mcpCall = formatMcpCall(await runMcpCall());
  console.log(mcpCall);
  sections.push(`### A remote MCP tool call through the loop against the same call with the SDK client\n\n${mcpCall}`);

  const summary = sections.join('\n\n');
  const root = path.resolve(__dirname, '..', '..');
  fs.mkdirSync(path.join(root, 'bench', 'results'), { recursive: true });
  fs.writeFileSync(path.join(root, 'bench', 'results', 'summary.md'), `${summary}\n`);
  const benchmarksPath = path.join(root, 'BENCHMARKS.md');
  const benchmarks = fs.readFileSync(benchmarksPath, 'utf8');
  const updated = benchmarks.replace(/<!-- bench:start -->[\s\S]*<!-- bench:end -->/, `<!-- bench:start -->\n${summary}\n<!-- bench:end -->`);
  fs.writeFileSync(benchmarksPath, updated);
  console.log('wrote bench/results/summary.md and the summary section of BENCHMARKS.md');
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
