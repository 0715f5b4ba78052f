/**
 * One server of bench/tracing-overhead.ts in its own process: its own SQLite
 * database, the scripted provider, and the OTEL_* variables it is given as a
 * JSON argument (handed to loadConfig, as the service reads them at start).
 *
 * Speaks IPC with the bench: answers `{ type: 'ready', url }` once seeded; on
 * `{ type: 'run' }` starts one run, waits for its END on the trace bus and
 * answers `{ type: 'run', ms }` (timed here, from the start to END's publishing,
 * so IPC is not in the figure);
 * on `{ type: 'cpu' }` answers `{ type: 'cpu', micros }`, the process's CPU
 * time (user + system) so far; on `{ type: 'stop' }` stops and exits.
 */
import { performance } from 'node:perf_hooks';
import { createScriptedAdapter, type ScriptedReply } from '../test/support/scripted-adapter';
import type { BusListener } from '../src/runs/trace-bus';
import { BENCH_CALLER, createScratchDatabase, seedRunConfiguration, startRunsServer, traceBusOf, withDeadline } from './runs-support';

export const ROUNDS = 5;

function script(): ScriptedReply[] {
  const replies: ScriptedReply[] = [];
  for (let r = 1; r < ROUNDS; r += 1) replies.push({ toolCalls: [{ name: 'calculator', arguments: { expression: `${r} * 21 + 7` } }], usage: [120 + 30 * r, 14] });
  replies.push({ content: 'All the intermediate results are computed; the final value is 112.', usage: [120 + 30 * ROUNDS, 18] });
  return replies;
}

type Message = { type: 'run' } | { type: 'cpu' } | { type: 'stop' };

async function main(): Promise<void> {
  const env = JSON.parse(process.argv[2] ?? '{}') as Record<string, string>;
  const database = await createScratchDatabase('sqlite');
  const server = await startRunsServer(database, { runs: { adapterFactory: () => createScriptedAdapter(script()) } }, env);
  const configuration = await seedRunConfiguration(server.services);
  const bus = traceBusOf(server.services.runs);

  const oneRun = async (): Promise<number> => {
    const started = performance.now();
    const view = await server.services.runs.start({ configuration, prompt: 'Compute the values step by step with the calculator.', tools: ['calculator'], maxRounds: ROUNDS, stream: false }, BENCH_CALLER);
    let resolveEnd!: (at: number) => void;
    const ended = new Promise<number>((resolve) => (resolveEnd = resolve));
    const listener: BusListener = (message) => {
      // Timed when END is published, the moment its watchers get it; what the process does after that
      // (its telemetry, the promise's continuation) is in the CPU figure, not in the run's time.
      if (message.type === 'step' && message.step.kind === 'end') resolveEnd(performance.now());
    };
    const unsubscribe = bus.subscribe(view.row.uuid, listener);
    try {
      return (await withDeadline(ended, 30_000, `END of run ${view.row.uuid}`)) - started;
    } finally {
      unsubscribe();
    }
  };

  process.on('message', (message: Message) => {
    if (message.type === 'run') {
      oneRun().then(
        (ms) => process.send?.({ type: 'run', ms }),
        (error: unknown) => process.send?.({ type: 'error', message: String(error) }),
      );
    } else if (message.type === 'cpu') {
      const usage = process.cpuUsage();
      process.send?.({ type: 'cpu', micros: usage.user + usage.system });
    } else if (message.type === 'stop') {
      void (async () => {
        await server.stop();
        await database.cleanup();
        process.exit(0);
      })();
    }
  });
  process.send?.({ type: 'ready', url: server.url });
}

if (require.main === module) {
  main().catch((error: unknown) => {
    console.error(error);
    process.exit(1);
  });
}
