/**
 * The service side of the fan-out benchmark (runs-fanout.ts), in its own
 * process: the real server (SQLite scratch database) whose runs ask a
 * scripted provider that answers each call DELAY_MS after it was made, in
 * ROUNDS rounds (a calculator call in each but the last). Each prepared run
 * is held at its first provider call until the orchestrator opens it, so
 * its first steps are stored before any client subscribes (they reach the
 * clients as replay). Not meant to be started by hand.
 */
import 'reflect-metadata';
import { createScriptedAdapter, type ScriptedAnswer, type ScriptedReply } from '../test/support/scripted-adapter';
import { BENCH_CALLER, RUNS_BENCH_TOKEN, createScratchDatabase, seedRunConfiguration, sleep, startRunsServer, traceBusOf } from './runs-support';
import { TRACE_FIELDS, epochMs, reply, serveRequests, type RunRecord } from './runs-fanout-protocol';

const rounds = Number(process.env.ROUNDS ?? 10);
const delayMs = Number(process.env.DELAY_MS ?? 5);

interface Prepared {
  record: RunRecord;
  /** Index of the call whose answer the next published step follows. */
  answered: number;
  open(): void;
  opened: Promise<void>;
  reached: Promise<void>;
  ended: () => void;
}

function answerOf(round: number): ScriptedAnswer {
  return round < rounds
    ? { toolCalls: [{ name: 'calculator', arguments: { expression: `${round} * 21` } }], usage: [100 + 20 * round, 12] }
    : { content: 'Every intermediate value is computed.', usage: [100 + 20 * round, 12] };
}

async function main(): Promise<void> {
  const database = await createScratchDatabase('sqlite');
  const scripts: ScriptedReply[][] = [];
  const server = await startRunsServer(database, { runs: { adapterFactory: () => createScriptedAdapter(scripts.shift() ?? [], { recordRequests: false }) } });
  const { services } = server;
  const configuration = await seedRunConfiguration(services);
  const bus = traceBusOf(services.runs);
  const runs = new Map<string, Prepared>();
  process.once('exit', () => void database.cleanup());

  async function prepareOne(): Promise<{ runId: string; replaySequence: number }> {
    let open!: () => void;
    let reachedGate!: () => void;
    const opened = new Promise<void>((resolve) => (open = resolve));
    const reached = new Promise<void>((resolve) => (reachedGate = resolve));
    const run: Prepared = { record: { runId: '', calls: [], published: [] }, answered: -1, open, opened, reached, ended: () => undefined };
    scripts.push(
      Array.from({ length: rounds }, (_, index) => async (): Promise<ScriptedAnswer> => {
        if (index === 0) {
          reachedGate();
          await opened;
        }
        const startedAt = epochMs();
        run.record.calls.push({ startedAt, dueAt: startedAt + delayMs });
        await sleep(delayMs);
        run.answered = index;
        return answerOf(index + 1);
      }),
    );
    const view = await services.runs.start({ configuration, prompt: 'Work it out with the calculator.', tools: ['calculator'], maxRounds: rounds, stream: false }, BENCH_CALLER);
    const runId = view.row.uuid;
    run.record.runId = runId;
    // Attached before the run stores its first step (the run starts on a later turn).
    bus.subscribe(runId, (message) => {
      if (message.type !== 'step') return;
      run.record.published.push([message.step.sequence, epochMs(), run.answered]);
      if (message.step.kind === 'end') {
        run.ended();
      }
    });
    runs.set(runId, run);
    await reached;
    return { runId, replaySequence: run.record.published.length };
  }

  serveRequests(async (request) => {
    switch (request.type) {
      case 'prepare': {
        const prepared = [];
        for (let i = 0; i < request.count; i += 1) prepared.push(await prepareOne());
        const replaySequence = Math.min(...prepared.map((p) => p.replaySequence));
        return reply({ type: 'prepared', runIds: prepared.map((p) => p.runId), replaySequence });
      }
      case 'open': {
        const run = runs.get(request.runId);
        if (!run) throw new Error(`no prepared run ${request.runId}`);
        const ended = new Promise<void>((resolve) => (run.ended = resolve));
        run.open();
        await ended;
        runs.delete(request.runId);
        return reply({ type: 'ended', record: run.record });
      }
      case 'steps': {
        const response = await fetch(server.url, {
          method: 'POST',
          headers: { 'content-type': 'application/json', authorization: `Bearer ${RUNS_BENCH_TOKEN}` },
          body: JSON.stringify({ query: `query($id: ID!) { run(id: $id) { steps { ${TRACE_FIELDS} } } }`, variables: { id: request.runId } }),
        });
        const body = (await response.json()) as { data: { run: { steps: Record<string, unknown>[] } } };
        return reply({ type: 'steps', steps: body.data.run.steps });
      }
      default:
        throw new Error(`the service does not answer ${request.type}`);
    }
  });
  reply({ type: 'ready', wsUrl: server.wsUrl, token: RUNS_BENCH_TOKEN });
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
