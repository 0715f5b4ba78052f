/**
 * Reading runs: their rows as the API shows them, their stored steps, and
 * their traces for watchers — replay from the table, then live from the bus,
 * without gap or duplicate. Writes nothing; the driver (RunService) owns the
 * runs this process executes and tells the reader which those are.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { checkFirst, type KeysetPage, type PagingCursors } from '../db/keyset';
import { checkPage, MAX_PAGE_SIZE } from '../db/record-rules';
import type { LiveSource } from '../graphql/live';
import { type AnswerBudget, jsonSizeAtLeast } from '../shared/answer-budget';
import { checkLabel } from '../releases/release-rules';
import { BadUserInputError, NotFoundError, SubscriberLaggedError } from '../shared/errors';
import type { AgentRunEntity } from './agent-run.entity';
import { BoundedQueue } from './bounded-queue';
import { LiveTraceIterator, ReleasingIterator } from './live-trace';
import { isOpenRunState, type RunState } from './engine/run-machine';
import type { RequestedToolCall, LoopDelta } from './engine/loop-step';
import { RUN_KEY_KINDS, RUN_LIST, type RunListFilter, type RunProvenance, type RunStore } from './run-store';
import type { StoredStep, TraceBus } from './trace-bus';

/** One page of the run list as a client asks for it (`runsConnection`). */
export interface RunPageRequest {
  first: number;
  after?: string | null;
  status?: readonly RunState[] | null;
  /** A configuration identifier. */
  configuration?: string | null;
  /** A release label. */
  label?: string | null;
  /** Created at or after. */
  createdFrom?: Date | null;
  /** Created before. */
  createdBefore?: Date | null;
}

/** A run as the API shows it: the row, plus what lives in its END step. */
export interface RunView {
  row: AgentRunEntity;
  dryRun: boolean;
  finalContent: string | null;
  error: string | null;
  /** The calls waiting for a decision; [] unless the run waits for approval. */
  pendingToolCalls: RequestedToolCall[];
  /** When the wait ends undecided (unix seconds); null without a timeout or when not waiting. */
  approvalDeadline?: number | null;
  /**
   * The END step's cost: exact, and null for an unpriced model. The run row's
   * `decimal(10,6) NOT NULL` column holds it clamped, and 0 for unpriced.
   * Undefined while the run has no END.
   */
  endCost?: number | null;
  /** Set by `start` only: the skills the run's skill block injects, in block order. */
  appliedSkills?: string[];
}

/** What the reader needs to know of the runs this process drives. */
export interface RunsDrivenHere {
  /** Whether this process executes the run now. */
  has(uuid: string): boolean;
  /** The run's dry-run flag while this process executes it (its END, which holds it, is not stored yet). */
  dryRun(uuid: string): boolean | undefined;
}

export interface RunReaderOptions {
  /** How many steps a live watcher may fall behind before it is told to resubscribe. */
  watcherQueueSize: number;
  /**
   * A watcher that heard nothing for this long reads the table (its bus
   * messages may have been lost, e.g. with a dropped Redis connection).
   */
  watcherRecheckMs?: number;
  /** Writes and reads the cursors of runsConnection. */
  cursors: PagingCursors;
}

const DEFAULT_WATCHER_RECHECK_MS = 5_000;

/** Rows of the first budgeted read of a trace: the next reads grow with what the rows weigh. */
export const FIRST_BUDGETED_READ_ROWS = 8;

/**
 * Rows of the next budgeted read: the largest power of two that half the
 * remaining budget fits at `rowBytes` a row, at least `rows`, at most
 * MAX_PAGE_SIZE (powers of two keep the prepared statements few).
 */
export function nextReadRows(rows: number, rowBytes: number, remaining: number): number {
  const fitting = Math.floor(remaining / 2 / Math.max(1, rowBytes));
  const power = fitting >= 1 ? 2 ** Math.floor(Math.log2(fitting)) : 1;
  return Math.min(MAX_PAGE_SIZE, Math.max(rows, power));
}

export class RunReader {
  /**
   * Live watchers that heard nothing for a while are told to read the table:
   * one timer for all of them. A watcher counts as quiet from its last bus
   * message; the bus announces its own reconnects as well.
   */
  private readonly quietWatchers = new Set<TraceWatcher>();
  private quietTimer: NodeJS.Timeout | null = null;

  constructor(
    private readonly store: RunStore,
    private readonly bus: TraceBus,
    private readonly drivenHere: RunsDrivenHere,
    private readonly options: RunReaderOptions,
  ) {}

  async get(uuid: string): Promise<RunView | null> {
    const row = await this.store.findRun(uuid);
    return row ? this.view(row) : null;
  }

  async list(limit: number, offset: number): Promise<RunView[]> {
    checkPage({ limit, offset });
    const rows = await this.store.listRuns(limit, offset);
    const ends = await this.store.endStepsOf(rows.map((r) => r.uid));
    return rows.map((row) => this.viewWith(row, ends.get(row.uid) ?? null));
  }

  /** The provenance of each run that has one, by run uid (runs started by older versions or by TYPO3 have none). */
  provenanceOf(runUids: readonly number[]): Promise<Map<number, RunProvenance>> {
    return this.store.provenanceOf(runUids);
  }

  /**
   * One page of the runs that pass the filters, newest first (created, then
   * uid), after the position `after` names. A run is found under the status
   * it shows (nr_llm's `waiting_for_input` as RUNNING, unknown values as
   * FAILED); times are compared with the created second.
   */
  async page(request: RunPageRequest): Promise<KeysetPage<RunView>> {
    const first = checkFirst(request.first);
    const filter: RunListFilter = {
      statuses: request.status && request.status.length > 0 ? [...new Set(request.status)] : null,
      configuration: null,
      label: null,
      createdFrom: unixSecondAtOrAfter(request.createdFrom, 'createdFrom'),
      createdBefore: unixSecondAtOrAfter(request.createdBefore, 'createdBefore'),
    };
    if (request.configuration !== undefined && request.configuration !== null) {
      filter.configuration = request.configuration.trim().toLowerCase();
      if (filter.configuration === '') throw new BadUserInputError('configuration needs a configuration identifier', 'configuration');
    }
    if (request.label !== undefined && request.label !== null) {
      const label = checkLabel(request.label.trim());
      if (!label.ok) throw new BadUserInputError(label.message, 'label');
      filter.label = label.label;
    }
    const page = await this.options.cursors.readPage(RUN_LIST, RUN_KEY_KINDS, this.store.listedRuns(filter), first, request.after);
    const ends = await this.store.endStepsOf(page.rows.map(({ row }) => row.uid));
    return { ...page, rows: page.rows.map(({ row, cursor }) => ({ row: this.viewWith(row, ends.get(row.uid) ?? null), cursor })) };
  }

  /**
   * Stored steps after `afterSequence`; all of them, or one page of `limit`
   * (validated like every page). Read for an answer with a budget: a few
   * rows at a time, each read charged before the next (a step can hold a
   * megabyte-long transcript), so a trace too large for the answer stops
   * being read at the limit. `measure` counts what the answer takes of a
   * step (by default all of it).
   */
  async steps(
    runUid: number,
    afterSequence: number,
    limit: number | null = null,
    budget?: AnswerBudget,
    measure: (step: StoredStep, atMost: number) => number = jsonSizeAtLeast,
  ): Promise<StoredStep[]> {
    if (limit !== null) checkPage({ limit, offset: 0 });
    if (!budget) return this.store.stepsAfter(runUid, afterSequence, limit);
    return budget.serially(async () => {
      const steps: StoredStep[] = [];
      let after = afterSequence;
      let rows = FIRST_BUDGETED_READ_ROWS;
      for (;;) {
        const want = limit === null ? rows : Math.min(rows, limit - steps.length);
        if (want <= 0) return steps;
        // A long trace gives way to other requests between its reads.
        if (steps.length > 0) await nextTurn();
        budget.check();
        const read = await this.store.stepsAfter(runUid, after, want);
        let bytes = 0;
        for (const step of read) {
          const size = measure(step, budget.remaining + 1);
          budget.charge(size);
          bytes += size;
          steps.push(step);
        }
        if (read.length < want) return steps;
        after = read[read.length - 1].sequence;
        // The next read holds what half the rest of the budget fits at this read's row size (at least as many rows again).
        rows = nextReadRows(rows, bytes / read.length, budget.remaining);
      }
    });
  }

  view(row: AgentRunEntity): Promise<RunView> {
    const pending = row.status === 'WAITING_FOR_APPROVAL' ? this.store.pendingApproval(row.uid) : Promise.resolve({ calls: [], deadlineAt: null });
    return Promise.all([this.store.endStepsOf([row.uid]), pending]).then(([ends, approval]) => ({
      ...this.viewWith(row, ends.get(row.uid) ?? null, approval.calls),
      approvalDeadline: approval.deadlineAt,
    }));
  }

  private viewWith(row: AgentRunEntity, end: StoredStep | null, pending?: RequestedToolCall[]): RunView {
    return {
      row,
      dryRun: this.drivenHere.dryRun(row.uuid) ?? end?.dryRun === true,
      finalContent: typeof end?.finalContent === 'string' ? end.finalContent : null,
      error: typeof end?.error === 'string' ? end.error : null,
      pendingToolCalls: pending ?? [],
      endCost: end ? (typeof end.estimatedCost === 'number' && Number.isFinite(end.estimatedCost) ? end.estimatedCost : null) : undefined,
    };
  }

  /**
   * The trace of a run: stored steps after `afterSequence`, then live ones.
   * The live listener is attached before the table is read, so nothing falls
   * between the two; sequence numbers drop duplicates and reveal gaps, which
   * are filled from the table.
   */
  async openTrace(uuid: string, afterSequence: number): Promise<LiveSource<StoredStep, StoredStep | SubscriberLaggedError>> {
    const row = await this.store.findRun(uuid);
    if (!row) throw new NotFoundError(`No run with id "${uuid}"`, 'runId');
    const queue = new BoundedQueue<StoredStep | typeof RECHECK>(this.options.watcherQueueSize);
    const live: LiveState = { last: Math.max(0, afterSequence), deliver: null };
    // Only what the watcher needs is kept for as long as it watches (not the row: some 1.6 kB each).
    return new LiveTraceIterator(this.trace({ uid: row.uid, uuid: row.uuid, open: isOpenRunState(row.status) }, live, queue), queue, live);
  }

  /** Live content/thinking deltas of a running run; not stored, so there is nothing to replay. Ends with the run. */
  async openDeltas(uuid: string): Promise<AsyncIterableIterator<LoopDelta | SubscriberLaggedError>> {
    const row = await this.store.findRun(uuid);
    if (!row) throw new NotFoundError(`No run with id "${uuid}"`, 'runId');
    const queue = new BoundedQueue<LoopDelta | null>(this.options.watcherQueueSize * 16);
    // As for a trace, not the row: the watcher keeps it for as long as it watches.
    return new ReleasingIterator(this.deltas(row.uuid, row.status, queue), queue);
  }

  /** Bus listeners (trace and delta watchers, and the run's own driver) of a run in this process. */
  watcherCount(uuid: string): number {
    return this.bus.listenerCount(uuid);
  }

  /** Whether a live trace watcher of one of these runs is still open in this process. */
  watchesAny(uuids: ReadonlySet<string>): boolean {
    for (const watcher of this.quietWatchers) if (uuids.has(watcher.uuid)) return true;
    return false;
  }

  private watchQuiet(watcher: TraceWatcher): () => void {
    this.quietWatchers.add(watcher);
    const recheckMs = this.options.watcherRecheckMs ?? DEFAULT_WATCHER_RECHECK_MS;
    if (!this.quietTimer) {
      this.quietTimer = setInterval(() => {
        const now = Date.now();
        for (const quiet of this.quietWatchers) {
          if (now - quiet.heardAt >= recheckMs) {
            quiet.heardAt = now;
            quiet.wake();
          }
        }
      }, Math.max(50, recheckMs / 2));
      this.quietTimer.unref();
    }
    return () => {
      this.quietWatchers.delete(watcher);
      if (this.quietWatchers.size === 0 && this.quietTimer) {
        clearInterval(this.quietTimer);
        this.quietTimer = null;
      }
    };
  }

  private async *trace(run: WatchedRun, live: LiveState, queue: BoundedQueue<StoredStep | typeof RECHECK>): AsyncGenerator<StoredStep | SubscriberLaggedError> {
    const uuid = run.uuid;
    const watcher: TraceWatcher = { uuid, heardAt: Date.now(), wake: () => queue.push(RECHECK) };
    const unsubscribe = this.bus.subscribe(uuid, (message) => {
      if (message.type === 'step') {
        watcher.heardAt = Date.now();
        const step = message.step;
        // The next step of a watcher waiting for it, with nothing queued before it: handed over at once when
        // the deliverer takes it (the loop below is parked in queue.next(), everything earlier already sent).
        if (live.deliver && queue.isIdle && step.sequence === live.last + 1 && live.deliver(step)) {
          live.last = step.sequence;
          if (step.kind === 'end') queue.close();
          return;
        }
        queue.push(step);
      } else if (message.type === 'reconnected') {
        // Whatever was published while the bus was away is only in the table now.
        queue.push(RECHECK);
      }
    });
    const stopWatchingQuiet = this.watchQuiet(watcher);
    try {
      if (yield* this.fromTable(run.uid, live)) return;
      // A client resuming at or after END has nothing left to receive. The row was
      // read before the listener was attached, and END shares the status update's
      // transaction, so a finished status here means END is already stored.
      if (!run.open) return;
      for (;;) {
        const next = await queue.next();
        if (next.done) {
          if (queue.hasOverflowed) yield lagged(live.last);
          return;
        }
        const item = next.value;
        if (item === RECHECK) {
          // Fill from the table: messages may have been lost on the way.
          if (yield* this.fromTable(run.uid, live)) return;
          // Nothing stored after the last sent, and the run is over: its END is at or before it.
          if (!(await this.isOpen(uuid))) return;
          continue;
        }
        const step = item;
        if (step.sequence <= live.last) {
          // The END of a run whose trace was asked from beyond its last sequence: nothing more will come.
          if (step.kind === 'end') return;
          continue;
        }
        if (step.sequence > live.last + 1) yield* this.fromTable(run.uid, live, step.sequence);
        yield step;
        live.last = step.sequence;
        if (step.kind === 'end') return;
      }
    } finally {
      stopWatchingQuiet();
      unsubscribe();
      queue.close();
    }
  }

  /**
   * Whether the run is still open, its row read again. A function of its own, so that the row is not kept:
   * a suspended generator keeps what its frame last held (see fromTable).
   */
  private async isOpen(uuid: string): Promise<boolean> {
    const current = await this.store.findRun(uuid);
    return current !== null && isOpenRunState(current.status);
  }

  /**
   * The stored steps after the last one sent (and before `before`, when given), sent in order; true once END
   * was sent. A generator of its own, so that the rows it read are released when it is done: a suspended
   * generator keeps what its frame last held, and a watcher waits in `trace` for as long as the run lasts.
   */
  private async *fromTable(runUid: number, live: LiveState, before = Infinity): AsyncGenerator<StoredStep, boolean> {
    for (const step of await this.store.stepsAfter(runUid, live.last)) {
      if (step.sequence >= before) return false;
      yield step;
      live.last = step.sequence;
      if (step.kind === 'end') return true;
    }
    return false;
  }

  private async *deltas(uuid: string, status: string, queue: BoundedQueue<LoopDelta | null>): AsyncGenerator<LoopDelta | SubscriberLaggedError> {
    if (!this.drivenHere.has(uuid) && status !== 'QUEUED' && status !== 'RUNNING') return;
    const unsubscribe = this.bus.subscribe(uuid, (message) => {
      if (message.type === 'delta') queue.push(message.delta);
      else if (message.type === 'step' && message.step.kind === 'end') queue.push(null);
    });
    try {
      // The run may have ended between the first read and the listener: look again now that nothing can be missed.
      const current = await this.store.findRun(uuid);
      if (current && current.status !== 'QUEUED' && current.status !== 'RUNNING') return;
      for (;;) {
        const next = await queue.next();
        if (next.done) {
          if (queue.hasOverflowed) yield new SubscriberLaggedError('You fell behind the live output; the stored steps (run.steps or runTrace) hold every finished call.');
          return;
        }
        if (next.value === null) return;
        yield next.value;
      }
    } finally {
      unsubscribe();
      queue.close();
    }
  }
}

/** The run a trace watcher watches, as read when it started. */
interface WatchedRun {
  uid: number;
  uuid: string;
  /** Not finished yet (see isOpenRunState). */
  open: boolean;
}

/** What a trace watcher has sent (the last sequence) and who takes its live steps directly. */
interface LiveState {
  last: number;
  deliver: ((step: StoredStep) => boolean) | null;
}

interface TraceWatcher {
  uuid: string;
  /** When it last heard from the bus. */
  heardAt: number;
  wake(): void;
}

/** A watcher's signal to read the table instead of waiting for the bus. */
const RECHECK = Symbol('recheck');

function lagged(lastSequence: number): SubscriberLaggedError {
  return new SubscriberLaggedError(
    `You fell too far behind the live trace; resubscribe with afterSequence: ${lastSequence} to continue without a gap.`,
    'afterSequence',
  );
}

/**
 * The first unix second at or after `time`: `crdate >= it` is "created at or
 * after `time`", `crdate < it` "created before `time`" (crdate holds whole seconds).
 */
function unixSecondAtOrAfter(time: Date | null | undefined, field: string): number | null {
  if (time === undefined || time === null) return null;
  const milliseconds = time.getTime();
  if (!Number.isFinite(milliseconds)) throw new BadUserInputError(`${field} is not a valid time`, field);
  return Math.ceil(milliseconds / 1000);
}
