/**
 * Conversation turn overhead against a plain run, with a zero-latency provider.
 *
 * The real server runs in this process with the scripted adapter swapped in.
 * One conversation is filled with N stored turns (1, 50, 500: each a user
 * message and an answer, through `sendMessage` itself), then TURNS more turns
 * are measured, each followed by one `startRun` of the same configuration
 * with the same message (interleaved, so both see the same machine load):
 *
 *     turn time     = t(END published) − t(before ConversationService.send) − provider time
 *     baseline time = t(END published) − t(before RunService.start)          − provider time
 *
 * A turn's time covers what a turn adds: the ownership and busy checks, the
 * configuration check, the history read (one indexed query), the context fit
 * over the whole history, the user message and the run stored in one
 * transaction, the history sent, and the reply stored in the END's
 * transaction. The ratio is turn ÷ baseline at p50 (target ≤ 1.1×);
 * `send` is the time `sendMessage` takes to answer (p95).
 *
 * Run: `npx tsc -p tsconfig.build.json && NODE_ENV=production node dist/bench/conversations.js`
 * (BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306/test adds MySQL; BENCH_TURNS overrides 60.)
 */
import { performance } from 'node:perf_hooks';
import { createScriptedAdapter } from '../test/support/scripted-adapter';
import type { BusListener } from '../src/runs/trace-bus';
import { round, writeResult } from './bench-support';
import {
  BENCH_CALLER,
  benchDialects,
  createScratchDatabase,
  markdownTable,
  seedRunConfiguration,
  startRunsServer,
  stats,
  timedAdapter,
  traceBusOf,
  withDeadline,
  type BenchDialect,
  type ProviderTime,
  type Stats,
} from './runs-support';

const STORED_TURNS = [1, 50, 500];
const TARGET_RATIO = 1.1;

export interface ConversationRow {
  dialect: BenchDialect;
  storedTurns: number;
  turns: number;
  turn: Stats;
  baseline: Stats;
  send: Stats & { p95: number };
  ratioP50: number;
}

export async function runConversations(turns = Number(process.env.BENCH_TURNS ?? 60)): Promise<ConversationRow[]> {
  const rows: ConversationRow[] = [];
  for (const dialect of benchDialects()) {
    const database = await createScratchDatabase(dialect);
    const sink: { current: ProviderTime } = { current: { ms: 0, each: [] } };
    // An answer of a realistic chat length, each call.
    // A zero-latency provider keeps nothing: recording each request would copy the whole history on every call.
    const answer = () => createScriptedAdapter([() => ({ content: 'A short answer of about one sentence, as a chat model gives it.', usage: [40, 12] })], { recordRequests: false });
    const server = await startRunsServer(database, {
      runs: {
        adapterFactory: () => {
          const target = sink.current;
          return timedAdapter(answer(), () => target);
        },
      },
    });
    try {
      const { services } = server;
      const configuration = await seedRunConfiguration(services);
      const bus = traceBusOf(services.runs);
      const untilEnd = async (runId: string): Promise<number> => {
        let resolve!: (t: number) => void;
        const ended = new Promise<number>((r) => (resolve = r));
        const listener: BusListener = (message) => {
          if (message.type === 'step' && message.step.kind === 'end') resolve(performance.now());
        };
        const unsubscribe = bus.subscribe(runId, listener);
        try {
          return await withDeadline(ended, 10_000, `END of run ${runId}`);
        } finally {
          unsubscribe();
        }
      };
      const message = 'What should I pack for a weekend in the mountains?';
      const turn = async (conversationId: string): Promise<{ total: number; send: number }> => {
        const provider: ProviderTime = { ms: 0, each: [] };
        sink.current = provider;
        const t0 = performance.now();
        const sent = await services.conversations.send(BENCH_CALLER, { conversationId, content: message });
        const t1 = performance.now();
        // The END cannot be published before start() resolved: the driver waits a turn of the event loop first.
        const tEnd = await untilEnd(sent.run.row.uuid);
        return { total: tEnd - t0 - provider.ms, send: t1 - t0 };
      };
      const plainRun = async (): Promise<number> => {
        const provider: ProviderTime = { ms: 0, each: [] };
        sink.current = provider;
        const t0 = performance.now();
        const view = await services.runs.start({ configuration, prompt: message, tools: [] }, BENCH_CALLER);
        const tEnd = await untilEnd(view.row.uuid);
        return tEnd - t0 - provider.ms;
      };

      for (const stored of STORED_TURNS) {
        const conversation = await services.conversations.start(BENCH_CALLER, { configuration, title: `bench ${stored}` });
        for (let i = 0; i < stored; i += 1) await turn(conversation.uuid);
        // Warm-up of both paths.
        for (let i = 0; i < 5; i += 1) {
          await turn(conversation.uuid);
          await plainRun();
        }
        const turnMs: number[] = [];
        const sendMs: number[] = [];
        const baselineMs: number[] = [];
        for (let i = 0; i < turns; i += 1) {
          const measured = await turn(conversation.uuid);
          turnMs.push(measured.total);
          sendMs.push(measured.send);
          baselineMs.push(await plainRun());
        }
        const turnStats = stats(turnMs);
        const baselineStats = stats(baselineMs);
        const sorted = [...sendMs].sort((a, b) => a - b);
        const p95 = round(sorted[Math.min(sorted.length - 1, Math.ceil(0.95 * sorted.length) - 1)] ?? Number.NaN, 3);
        rows.push({ dialect, storedTurns: stored, turns, turn: turnStats, baseline: baselineStats, send: { ...stats(sendMs), p95 }, ratioP50: round(turnStats.p50 / baselineStats.p50, 2) });
        console.log(`${dialect} ${stored} stored turns: turn p50 ${turnStats.p50} ms, startRun p50 ${baselineStats.p50} ms, ratio ${round(turnStats.p50 / baselineStats.p50, 2)}, sendMessage p95 ${p95} ms`);
      }
    } finally {
      await server.stop();
      await database.cleanup();
    }
  }
  writeResult('conversations', { measuredAt: new Date().toISOString(), node: process.version, nodeEnv: process.env.NODE_ENV ?? '', targetRatio: TARGET_RATIO, rows });
  return rows;
}

export function formatConversations(rows: readonly ConversationRow[]): string {
  return markdownTable(
    ['database', 'stored turns', 'turn p50 (ms)', 'startRun p50 (ms)', 'turn ÷ startRun (p50)', `target ≤ ${TARGET_RATIO}×`, 'turn p99 (ms)', 'sendMessage p95 (ms)'],
    rows.map((row) => [row.dialect, row.storedTurns, row.turn.p50, row.baseline.p50, `${row.ratioP50.toFixed(2)}×`, row.ratioP50 <= TARGET_RATIO ? 'met' : 'missed', row.turn.p99, row.send.p95]),
  );
}

if (require.main === module) {
  runConversations()
    .then((rows) => console.log(formatConversations(rows)))
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
