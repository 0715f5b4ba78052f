/**
 * What metrics and tracing see of a run: the steps the loop records, each
 * handed over once it is stored, with the moment the loop produced it. An
 * observer only reads; whatever it does, a run never waits for it and never
 * fails because of it (`combineRunObservers` swallows and logs its errors).
 */
import type { Logger } from '../logger';
import type { LoopStep } from '../runs';

export interface ObservedRun {
  /** The run's public id (its uuid). */
  runId: string;
  /** The configuration's identifier. */
  configuration: string;
  /** The provider's adapter type (`openai`, `anthropic`, `demo` …); null when the run has no provider (a dry run). */
  providerType: string | null;
  /** The model id sent to the provider; null when there is none. */
  model: string | null;
  dryRun: boolean;
  /** The trace span of the request that started the run, as the tracing module made it (opaque to everyone else); null when none. */
  requestTrace: unknown;
}

export interface RunObservation {
  /** A step that is stored; `at` is when the loop handed it over, in epoch milliseconds (fractional). */
  step(step: LoopStep, at: number): void;
  /** The run is over: its END is stored, or it was closed outside the loop. Called once. */
  finish(): void;
}

export interface RunObserver {
  /** Called while `startRun` is handled. */
  runStarted(run: ObservedRun): RunObservation;
  /** A run closed without its loop (interrupted by a stopped process, or an orphan cancelled). */
  runClosed(status: string): void;
}

/** Epoch milliseconds with sub-millisecond precision, from the monotonic clock. */
export function preciseNow(): number {
  return performance.timeOrigin + performance.now();
}

/** One observer over several; an exception in one is logged and changes nothing else. */
export function combineRunObservers(observers: readonly RunObserver[], logger: Logger): RunObserver | null {
  if (observers.length === 0) return null;
  const guard = (what: string, action: () => void): void => {
    try {
      action();
    } catch (error) {
      logger.warn({ err: error }, `run telemetry failed to ${what}; the run is not affected`);
    }
  };
  return {
    runStarted(run) {
      const observations: RunObservation[] = [];
      for (const observer of observers) guard('start', () => observations.push(observer.runStarted(run)));
      let finished = false;
      return {
        step(step, at) {
          for (const observation of observations) guard('record a step', () => observation.step(step, at));
        },
        finish() {
          if (finished) return;
          finished = true;
          for (const observation of observations) guard('finish', () => observation.finish());
        },
      };
    },
    runClosed(status) {
      for (const observer of observers) guard('count a closed run', () => observer.runClosed(status));
    },
  };
}
