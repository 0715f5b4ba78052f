/**
 * A turn's run streamed as the UI message stream (`ui-message-stream.ts`):
 * its stored steps from the first (the run trace: the table, then live,
 * without gap or duplicate) and its live deltas, fed to the translation in
 * the order they arrive. The whole answer is there whenever the stream is
 * opened: a client that reconnects mid-turn gets it all again (`useChat`'s
 * resume replaces the message with the replay).
 *
 * The stream ends with the run's END, or when the run waits for a person's
 * decision on a tool call (after `tool-approval-request`): the turn goes on
 * once decided, and a new stream replays it to its end.
 */
import type { RunReader, StoredStep } from '../runs';
import { SubscriberLaggedError } from '../shared/errors';
import { TurnStreamTranslator, type TurnDelta, type UIMessageChunk } from './ui-message-stream';

/** The turn a chat client streams: its run and the id its reply will be stored under (`<uuid>:<sequence>`). */
export interface ChatTurn {
  runId: string;
  messageId: string;
  /**
   * A continuation (after the client's tool decisions): the steps up to and
   * including this sequence are the client's already; they are translated
   * but not sent, and live pieces wait until they are passed.
   */
  after?: number;
}

type Next = { from: 'step'; result: IteratorResult<StoredStep | SubscriberLaggedError> } | { from: 'delta'; result: IteratorResult<TurnDelta | SubscriberLaggedError> };

export async function* streamTurn(reader: Pick<RunReader, 'openTrace' | 'openDeltas' | 'get'>, turn: ChatTurn): AsyncGenerator<UIMessageChunk, void, undefined> {
  const translator = new TurnStreamTranslator(turn.messageId);
  /** Whether the client has this step already (a continuation's steps up to `after`). */
  const shown = (sequence: number) => turn.after !== undefined && sequence <= turn.after;
  yield* translator.start();
  // Deltas first: what they miss before the trace is read, the stored steps bring.
  const deltas = await reader.openDeltas(turn.runId);
  let trace = await reader.openTrace(turn.runId, -1);
  let lastSequence = -1;
  const readStep = (): Promise<Next> => trace.next().then((result) => ({ from: 'step' as const, result }));
  const readDelta = (): Promise<Next> => deltas.next().then((result) => ({ from: 'delta' as const, result }));
  let nextStep = readStep();
  let nextDelta: Promise<Next> | null = readDelta();
  try {
    for (;;) {
      const next = await (nextDelta ? Promise.race([nextStep, nextDelta]) : nextStep);
      if (next.from === 'delta') {
        if (next.result.done) {
          nextDelta = null;
          continue;
        }
        nextDelta = readDelta();
        // A watcher that fell behind the deltas, or still replays what the client has, takes the rest from the stored steps.
        if (!(next.result.value instanceof SubscriberLaggedError) && !shown(lastSequence)) yield* translator.delta(next.result.value);
        continue;
      }
      if (next.result.done) break;
      const step = next.result.value;
      if (step instanceof SubscriberLaggedError) {
        // Behind the trace: read on from the last step sent.
        await trace.return?.();
        trace = await reader.openTrace(turn.runId, lastSequence);
        nextStep = readStep();
        continue;
      }
      lastSequence = step.sequence;
      const chunks = translator.step(step);
      if (shown(step.sequence)) {
        nextStep = readStep();
        continue;
      }
      yield* chunks;
      if (translator.state === 'finished') return;
      if (translator.state === 'awaiting-approval' && (await waitsOn(reader, turn.runId, step))) {
        yield* translator.pause();
        return;
      }
      nextStep = readStep();
    }
    // The trace ended without END (the run was deleted): the stream still ends well-formed.
    yield* translator.pause();
  } finally {
    await deltas.return?.();
    await trace.return?.();
  }
}

/** Whether the run waits now for a decision on exactly the calls this approval step asked about. */
async function waitsOn(reader: Pick<RunReader, 'get'>, runId: string, step: StoredStep): Promise<boolean> {
  const run = await reader.get(runId);
  if (run?.row.status !== 'WAITING_FOR_APPROVAL') return false;
  const asked = new Set(((step.pendingToolCalls as { id: string }[] | undefined) ?? []).map((call) => call.id));
  return run.pendingToolCalls.length > 0 && run.pendingToolCalls.every((call) => asked.has(call.id));
}
