/**
 * Drives runs in this process: one loop per run, from its start or from
 * stored steps, recording each step (persist, then publish) under this
 * instance's lease. What runs it drives, and for how long it may count on
 * their leases, is known here; ending runs that no loop drives is the
 * supervisor's (run-supervisor.ts).
 */
import crypto from 'node:crypto';
import type { Logger } from '../logger';
import type { AgentRunEntity } from './agent-run.entity';
import { driveRun } from './engine/agent-loop';
import type { CallLedger } from './engine/call-ledger';
import { INTERNAL_ERROR_MESSAGE, RunTakenOver, type AgentLoopInput, type StepExtras } from './engine/loop-contract';
import type { EndStep, LoopDelta, LoopStep, TerminationReason } from './engine/loop-step';
import { LeaseClock } from './lease-clock';
import { bookingOf, type PreparedRun, type RunPreparer, type StoredRunRequest } from './run-preparer';
import { asLoopStep, asLoopSteps, LeaseLostError, type RunStore } from './run-store';
import { closeRun, type RunEndStatus } from './run-supervisor';
import type { RunView } from './run-reader';
import type { RunServiceOptions } from './run.service';
import { preciseNow, type RunObservation } from '../operations/run-observer';
import type { StoredStep, TraceBus } from './trace-bus';

export interface ActiveRun {
  uid: number;
  controller: AbortController;
  dryRun: boolean;
  done: Promise<void>;
}

export const DEFAULT_LEASE_SECONDS = 15;
const DEFAULT_STORE_RETRY_DELAYS_MS: readonly number[] = [100, 500, 2_000];

/** The END a run gets when its real END cannot be stored (too large, values out of range): small and always storable. */
export const UNSTORABLE_RESULT_MESSAGE = 'The run ended, but its result could not be stored.';

export class RunDriver {
  readonly instanceId = crypto.randomUUID();
  private readonly active = new Map<string, ActiveRun>();
  /** How long this instance may count on the leases of the runs it drives (lets a TOOL step's write overlap the next call). */
  readonly leases: LeaseClock;

  constructor(
    private readonly store: RunStore,
    private readonly preparer: RunPreparer,
    private readonly bus: TraceBus,
    private readonly logger: Logger,
    private readonly options: RunServiceOptions,
  ) {
    this.leases = new LeaseClock(this.leaseSeconds);
  }

  get leaseSeconds(): number {
    return this.options.leaseSeconds ?? DEFAULT_LEASE_SECONDS;
  }

  /** The loop driving `uuid` in this process, if any. */
  local(uuid: string): ActiveRun | undefined {
    return this.active.get(uuid);
  }

  /** Every run this process drives, by id. */
  running(): ReadonlyMap<string, ActiveRun> {
    return this.active;
  }

  /** Ends an open run no loop drives, after its last stored step (the one close path, run-supervisor.ts). */
  close(row: AgentRunEntity, lastSequence: number, status: RunEndStatus, reason: TerminationReason, error: string | null, onlyIn?: readonly string[]): Promise<boolean> {
    return closeRun({ store: this.store, bus: this.bus, observer: this.options.observer }, row, lastSequence, status, reason, error, onlyIn);
  }

  /**
   * Drives a run in this process until it ends or waits for a person:
   * `resume` null starts it; otherwise it goes on from those stored steps.
   */
  drive(row: AgentRunEntity, prepared: PreparedRun, resume: { steps: StoredStep[]; afterCrash: boolean } | null, requestTrace: unknown = null): void {
    const controller = new AbortController();
    // cancelRun may arrive at another instance; it asks over the bus.
    const stopListening = this.bus.onCancelRequest(row.uuid, () => controller.abort());
    const observation = this.options.observer?.runStarted({
      runId: row.uuid,
      configuration: prepared.configuration.identifier,
      providerType: prepared.providerType,
      model: prepared.dryRun ? null : prepared.loopInput.callOptions.model || null,
      dryRun: prepared.dryRun,
      requestTrace,
    });
    const input: AgentLoopInput = {
      ...prepared.loopInput,
      signal: controller.signal,
      ...(resume ? { resume: { steps: asLoopSteps(resume.steps), afterCrash: resume.afterCrash } } : {}),
    };
    const lastSequence = resume ? (resume.steps[resume.steps.length - 1]?.sequence ?? 0) : 0;
    // A dry run calls no provider: nothing to check or book.
    const ledger = prepared.dryRun ? undefined : this.options.callLedger?.forRun(prepared.account, row.uuid);
    const done = this.execute(row, input, lastSequence, observation, ledger).finally(() => {
      this.leases.released(row.uid);
      stopListening();
      this.active.delete(row.uuid);
    });
    this.active.set(row.uuid, { uid: row.uid, controller, dryRun: prepared.dryRun, done });
  }

  private async execute(row: AgentRunEntity, input: AgentLoopInput, lastSequence: number, observation?: RunObservation, ledger?: CallLedger): Promise<void> {
    // Let startRun answer before the first step is written.
    await new Promise((resolve) => setImmediate(resolve));
    let sequence = lastSequence;
    const recordStep = async (step: LoopStep, extras?: StepExtras): Promise<void> => {
      // Persist, then publish: a watcher that arrives late reads what it missed from the table.
      // The sequence number advances only once the step is stored, so a failed write leaves no gap.
      const handedOverAt = observation ? preciseNow() : 0;
      const stored = await this.storeStep(row, sequence + 1, step, extras);
      sequence = stored.sequence;
      this.bus.publish(row.uuid, { type: 'step', step: stored });
      // The step as stored: the loop's own, or the small FAILED END that replaced one that could not be stored.
      observation?.step(asLoopStep(stored), handedOverAt);
    };
    try {
      if (input.resume === undefined) await this.withStoreRetries(row, 'mark the run running', () => this.store.markRunning(row.uid));
      const outcome = await driveRun(input, {
        recordStep,
        ledger,
        mayOverlapToolCall: () => this.leases.mayOverlap(row.uid),
        onDelta: (delta: LoopDelta) => this.bus.publish(row.uuid, { type: 'delta', delta }),
        logger: { warn: (obj, msg) => this.logger.warn({ runId: row.uuid, ...obj }, msg), error: (obj, msg) => this.logger.error({ runId: row.uuid, ...obj }, msg) },
      });
      if (outcome.status === 'WAITING_FOR_APPROVAL') {
        this.logger.info({ runId: row.uuid, pending: outcome.pendingToolCalls.map((call) => call.name) }, 'run waits for approval');
      } else if (outcome.status === 'TAKEN_OVER') {
        this.logger.warn({ runId: row.uuid }, 'another instance took the run over (this one had stopped renewing its lease); stopped driving it');
      } else {
        this.logger.info({ runId: row.uuid, status: outcome.status, reason: outcome.terminationReason, tokens: outcome.totalTokens }, 'run finished');
      }
    } catch (error) {
      // The loop records its own END; this is only reached when marking the run failed.
      this.logger.error({ err: error, runId: row.uuid }, 'run failed outside the loop');
      await this.close(row, sequence, 'FAILED', 'error', INTERNAL_ERROR_MESSAGE).catch((closeError: unknown) =>
        this.logger.error({ err: closeError, runId: row.uuid }, 'could not close a failed run'),
      );
    } finally {
      observation?.finish();
    }
  }

  /**
   * Drives a run on from its stored `steps`, prepared again from its stored
   * request; a run that cannot be prepared any more ends FAILED. After a
   * crash (a takeover) the loop knows a call may have been cut short. With
   * `decided`, the APPROVAL step that just ended the run's wait under a
   * lease this instance took at `leaseAt`: noted, published, and gone on
   * from. Returns the run as it goes on (or as it ended).
   */
  async resume(row: AgentRunEntity, stored: StoredRunRequest, steps: StoredStep[], from: { afterCrash: true } | { decided: StoredStep; leaseAt: number }): Promise<RunView> {
    if ('decided' in from) {
      this.leases.taken(row.uid, from.leaseAt);
      this.bus.publish(row.uuid, { type: 'step', step: from.decided });
      row = (await this.store.findRun(row.uuid)) ?? row;
      steps = [...steps, from.decided];
    }
    let prepared: PreparedRun;
    try {
      prepared = await this.preparer.prepare(stored.request, false, bookingOf(stored));
    } catch (error) {
      const message = error instanceof Error && 'extensions' in error ? error.message : INTERNAL_ERROR_MESSAGE;
      this.logger.warn({ runId: row.uuid, errorClass: className(error) }, 'a run could not be prepared to go on');
      await this.close(row, steps[steps.length - 1]?.sequence ?? 0, 'FAILED', 'error', message);
      return { row: (await this.store.findRun(row.uuid)) ?? row, dryRun: false, finalContent: null, error: message, pendingToolCalls: [] };
    }
    this.drive(row, prepared, { steps, afterCrash: 'afterCrash' in from });
    return { row, dryRun: prepared.dryRun, finalContent: null, error: null, pendingToolCalls: [] };
  }

  /**
   * Stores one step, retrying while the database refuses. An END that cannot
   * be stored as it is (an answer over the database's packet limit, values a
   * column cannot hold) is replaced by a small FAILED END, so every run ends.
   * When even that fails, the run's lease is no longer renewed and
   * housekeeping closes the run once the database answers again.
   */
  private async storeStep(row: AgentRunEntity, sequence: number, step: LoopStep, extras?: StepExtras): Promise<StoredStep> {
    try {
      return await this.withStoreRetries(row, `store step ${sequence}`, () => this.appendStepOnce(row.uid, sequence, step, extras));
    } catch (error) {
      // Another instance holds the run now: this one stops, writing nothing more (no fallback END either).
      if (error instanceof LeaseLostError) throw new RunTakenOver();
      if (step.kind !== 'end') throw error;
      const fallback: EndStep = {
        ...step,
        status: 'FAILED',
        terminationReason: 'error',
        finalContent: null,
        error: UNSTORABLE_RESULT_MESSAGE,
        errorClass: 'UnstorableResult',
      };
      return this.withStoreRetries(row, `store the fallback END ${sequence}`, () => this.appendStepOnce(row.uid, sequence, fallback));
    }
  }

  /** One attempt; a retry after a write whose answer was lost finds the step stored and does not write it twice. */
  private async appendStepOnce(runUid: number, sequence: number, step: LoopStep, extras?: StepExtras): Promise<StoredStep> {
    try {
      // Written only while this instance holds the run's lease (see RunStore.insertAsOwner).
      return await this.store.appendStep(runUid, sequence, step, extras, this.instanceId);
    } catch (error) {
      // The step at this sequence, if any, is the new owner's: never take it for ours.
      if (error instanceof LeaseLostError) throw error;
      const stored = await this.store.stepsAfter(runUid, sequence - 1).catch(() => []);
      const same = stored.find((candidate) => candidate.sequence === sequence && candidate.kind === step.kind);
      if (same) return same;
      throw error;
    }
  }

  private async withStoreRetries<T>(row: AgentRunEntity, what: string, attempt: () => Promise<T>): Promise<T> {
    const delays = this.options.storeRetryDelaysMs ?? DEFAULT_STORE_RETRY_DELAYS_MS;
    for (let tried = 0; ; tried += 1) {
      try {
        return await attempt();
      } catch (error) {
        if (error instanceof LeaseLostError) throw error;
        // Only the error's class and code: a driver error's text may quote the parameters (the whole answer).
        this.logger.warn({ runId: row.uuid, attempt: tried + 1, errorClass: className(error), code: errorCode(error) }, `could not ${what}`);
        const delay = delays[tried];
        if (delay === undefined) throw error;
        await new Promise((resolve) => setTimeout(resolve, delay));
      }
    }
  }
}

export function className(error: unknown): string {
  return error instanceof Error ? error.constructor.name || error.name : typeof error;
}

export function errorCode(error: unknown): string | undefined {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' ? code : undefined;
}
