/**
 * The run feed: which runs changed, for lists that update live (`runUpdated`,
 * the console's runs page) instead of asking again every second.
 *
 * A run's row changes when it starts (its first step, whatever its kind,
 * follows `markRunning`), when it starts or stops waiting for a person (an APPROVAL
 * step, stored with the status), and when it ends (END, stored with the
 * final figures). `RunFeedBus` wraps the trace bus the runs publish their
 * steps on: after every such step it also publishes the run's id on one
 * feed channel of the same bus — in this process, or through Redis to every
 * instance. The step is stored (with the row) before it is published, so a
 * reader that loads the run on a feed message sees the change.
 */
import type { BusListener, BusMessage, TraceBus } from './trace-bus';

export type RunChanged = Extract<BusMessage, { type: 'run-changed' }>;

/** The bus channel of the feed; run ids are UUIDs, so none can take it. */
export const RUN_FEED_CHANNEL = 'feed';

/** The step kinds stored together with a change of the run's row. */
const ROW_CHANGING_KINDS: ReadonlySet<string> = new Set(['approval', 'end']);

/** Whether publishing `message` for a run means its row changed: its first step (it runs), an APPROVAL or its END. */
export function changesRunRow(message: BusMessage): boolean {
  return message.type === 'step' && (message.step.sequence === 1 || ROW_CHANGING_KINDS.has(message.step.kind));
}

export class RunFeedBus implements TraceBus {
  constructor(private readonly inner: TraceBus) {}

  publish(runId: string, message: BusMessage): void {
    this.inner.publish(runId, message);
    if (changesRunRow(message)) this.inner.publish(RUN_FEED_CHANNEL, { type: 'run-changed', runId });
  }

  subscribe(runId: string, listener: BusListener): () => void {
    return this.inner.subscribe(runId, listener);
  }

  listenerCount(runId: string): number {
    return this.inner.listenerCount(runId);
  }

  requestCancel(runId: string): Promise<number | null> {
    return this.inner.requestCancel(runId);
  }

  onCancelRequest(runId: string, listener: () => void): () => void {
    return this.inner.onCancelRequest(runId, listener);
  }

  /** Calls `listener` for every run whose row changed, on any instance; returns the unsubscribe. */
  onRunChanged(listener: (changed: RunChanged) => void): () => void {
    return this.inner.subscribe(RUN_FEED_CHANNEL, (message) => {
      if (message.type === 'run-changed') listener(message);
    });
  }

  close(): Promise<void> {
    return this.inner.close();
  }
}
