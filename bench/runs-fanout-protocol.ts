/**
 * What the fan-out benchmark's orchestrator (runs-fanout.ts) and its two
 * server processes (runs-fanout-service.ts, runs-fanout-baseline.ts) say to
 * each other over IPC. Both servers answer the same requests, so the
 * orchestrator treats them alike.
 */
import fs from 'node:fs';
import { PerformanceObserver, performance } from 'node:perf_hooks';

/** What a watcher selects; the baseline's schema has exactly these fields. */
export const TRACE_FIELDS = 'sequence kind round durationMs status terminationReason content finishReason totalTokens toolName toolResult toolIsError';

/** One provider call of a run: when it started and when its answer was due (epoch ms, the server's clock). */
export interface ProviderCall {
  startedAt: number;
  dueAt: number;
}

/** A run as its server saw it. */
export interface RunRecord {
  runId: string;
  calls: ProviderCall[];
  /** Per published step: [sequence, publishedAt, index of the call whose answer it follows (−1: none)]. */
  published: [number, number, number][];
}

/** One unwatched run of the service: when each live step appeared relative to its call's answer, and when the next call started. */
export interface RunTiming {
  /** Per step after the replay: [index of the call it follows, ms after that call's answer]. */
  offsets: [number, number][];
  /** Per call after the first: ms after the previous call's answer that it starts. */
  callStarts: number[];
}

/** What the baseline serves, and when (from the service's unwatched runs). */
export interface RunPlan {
  /** The steps to serve, as a watcher receives them (the service's own output). */
  steps: Record<string, unknown>[];
  /** Steps stored before the first provider call (sent as replay). */
  replaySequence: number;
  /**
   * The recorded runs' timings. A run opened with `timing` follows timings[timing mod length]; one opened
   * without follows the next in turn.
   */
  timings: RunTiming[];
  delayMs: number;
}

export type Request =
  | { type: 'clock'; id: number }
  | { type: 'plan'; plan: RunPlan }
  | { type: 'prepare'; count: number }
  /** `timing`: which recorded timing the baseline replays (the service ignores it: its timing is its own). */
  | { type: 'open'; runId: string; timing?: number }
  | { type: 'cpu'; label?: string }
  | { type: 'memory' }
  | { type: 'steps'; runId: string }
  | { type: 'exit' };

export type Reply =
  | { type: 'clock'; id: number; t: number }
  | { type: 'ready'; wsUrl: string; token: string }
  | { type: 'planned' }
  | { type: 'prepared'; runIds: string[]; replaySequence: number }
  | { type: 'ended'; record: RunRecord }
  | { type: 'cpu'; us: number; gcUs: number }
  | { type: 'memory'; bytes: number }
  | { type: 'steps'; steps: Record<string, unknown>[] };

export const epochMs = (): number => performance.timeOrigin + performance.now();

export function reply(message: Reply): void {
  process.send?.(message);
}

/** Time this process's main thread spent in garbage collection so far, µs (entries arrive shortly after each pause). */
let gcUs = 0;
new PerformanceObserver((list) => {
  for (const entry of list.getEntries()) gcUs += entry.duration * 1000;
}).observe({ entryTypes: ['gc'] });

export function cpuUs(): number {
  const usage = process.cpuUsage();
  return usage.user + usage.system;
}

/** heapUsed + external after two full collections (node --expose-gc). */
export function collectedMemory(): number {
  const collect = (globalThis as { gc?: () => void }).gc;
  if (!collect) throw new Error('global.gc is missing: run node with --expose-gc');
  collect();
  collect();
  const usage = process.memoryUsage();
  return usage.heapUsed + usage.external;
}

/**
 * With FANOUT_CPU_MARKS=<file>, a server writes the monotonic time (µs, the clock of a `--cpu-prof` profile's
 * samples) and label of every CPU reading to that file when it exits, so that a profile's samples can be split
 * into the windows CPU per delivery is measured over (watched and unwatched runs; see bench/fanout-profile.ts).
 */
const marksFile = process.env.FANOUT_CPU_MARKS;
const marks: { t: number; label: string }[] | null = marksFile ? [] : null;
if (marksFile && marks) process.once('exit', () => fs.writeFileSync(`${marksFile}.${process.pid}.json`, JSON.stringify(marks)));

/** Answers the requests every server answers alike; `handle` gets the rest. */
export function serveRequests(handle: (request: Request) => Promise<void> | void): void {
  process.on('message', (request: Request) => {
    if (request.type === 'clock') return reply({ type: 'clock', id: request.id, t: epochMs() });
    if (request.type === 'cpu') {
      marks?.push({ t: Number(process.hrtime.bigint() / 1000n), label: request.label ?? '' });
      return reply({ type: 'cpu', us: cpuUs(), gcUs });
    }
    if (request.type === 'memory') return reply({ type: 'memory', bytes: collectedMemory() });
    if (request.type === 'exit') return void setTimeout(() => process.exit(0), 50);
    Promise.resolve(handle(request)).catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
  });
  process.on('disconnect', () => process.exit(0));
}
