/**
 * One model call of a run: a plain call, or a streamed one whose pieces go
 * to `onDelta` as they arrive. Either stops at once when the run's signal
 * fires.
 */
import type { ChatAdapter, ChatRequest, ChatResult } from '../../providers/adapters/types';
import { raceAbort } from './loop-support';
import type { LoopDelta } from './loop-step';

/** A provider call failed; `cause` is the adapter's error. */
export class ProviderFailure extends Error {
  constructor(readonly failure: unknown) {
    super('The provider call failed.');
    this.name = 'ProviderFailure';
  }
}

/** A stream that ended without its `done` event. */
export class ProviderStreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProviderStreamError';
  }
}

/**
 * Calls the model; with `stream`, hands each piece of streamed output to
 * `onDelta` and resolves with the stream's result.
 */
export async function invokeProvider(
  adapter: ChatAdapter,
  stream: boolean,
  request: ChatRequest,
  signal: AbortSignal,
  onDelta: (kind: LoopDelta['kind'], text: string) => void,
): Promise<ChatResult> {
  if (!stream) {
    return adapter.chat(request);
  }
  const iterator = adapter.stream(request)[Symbol.asyncIterator]();
  let exhausted = false;
  try {
    for (;;) {
      const next = await raceAbort(iterator.next(), signal);
      if (next.done === true) {
        exhausted = true;
        throw new ProviderStreamError('The provider stream ended without a result.');
      }
      const event = next.value;
      if (event.type === 'done') {
        return event.result;
      }
      onDelta(event.type, event.text);
    }
  } finally {
    if (!exhausted) {
      // Let the adapter close its connection; its outcome no longer matters.
      try {
        void Promise.resolve(iterator.return?.()).catch(() => undefined);
      } catch {
        // A synchronous failure to close changes nothing either.
      }
    }
  }
}
