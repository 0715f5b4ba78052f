/**
 * Cancellation and timing, shared by the loop's driver (agent-loop.ts) and
 * its tool dispatch (tool-dispatch.ts).
 */
import { performance } from 'node:perf_hooks';

/** The signal fired: stop at once. */
export class RunCancelled extends Error {
  constructor() {
    super('The run was cancelled.');
    this.name = 'RunCancelled';
  }
}

/** Milliseconds since `start` on the monotonic clock, two decimals. */
export function elapsedMs(start: number): number {
  return Math.round((performance.now() - start) * 100) / 100;
}

/**
 * Rejects with `RunCancelled` as soon as the signal fires, even if `promise`
 * never settles (a tool or adapter that ignores the signal). A late rejection
 * of `promise` is absorbed.
 */
export function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) {
      promise.catch(() => undefined);
      reject(new RunCancelled());
      return;
    }
    const onAbort = (): void => reject(new RunCancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

/** The class name of a failure, for logs and the END step (never its message). */
export function className(error: unknown): string {
  if (error instanceof Error) {
    return error.constructor.name !== '' ? error.constructor.name : error.name;
  }
  return typeof error;
}

export function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
