/**
 * The approval flow: a person's decisions (resolveToolApproval) and the
 * timeout (expireApprovals) each store one APPROVAL step, only while the run
 * still waits, and drive the run on in this process. What the decisions
 * make of the pending calls is decideApproval's (approval-decision.ts).
 */
import type { Caller } from '../auth/roles';
import type { Logger } from '../logger';
import { ConflictError, NotFoundError } from '../shared/errors';
import { unixNow } from '../shared/time';
import { approvalTimeoutStep, decideApproval, pendingCallsOf, type ToolDecisionRequest } from './engine/approval-decision';
import { clampMaxRounds } from './engine/loop-contract';
import { rebuildProgress } from './engine/run-machine';
import type { ApprovalStep } from './engine/loop-step';
import type { RunDriver } from './run-driver';
import type { RunReader, RunView } from './run-reader';
import { asLoopSteps, type RunStore } from './run-store';
import { storedSpellings } from './run-status';
import type { StoredStep, TraceBus } from './trace-bus';

export class RunApprovals {
  constructor(
    private readonly store: RunStore,
    private readonly driver: RunDriver,
    private readonly bus: TraceBus,
    private readonly reader: RunReader,
    private readonly logger: Logger,
  ) {}

  /**
   * Decides every pending call of a waiting run at once, stores the
   * decisions as an APPROVAL step and drives the run on in this process.
   */
  async resolve(uuid: string, decisions: readonly ToolDecisionRequest[], caller: Caller): Promise<RunView> {
    const row = await this.store.findRun(uuid);
    if (!row) throw new NotFoundError(`No run with id "${uuid}"`, 'runId');
    if (row.status !== 'WAITING_FOR_APPROVAL') throw new ConflictError(`The run is ${row.status}, not waiting for approval`, 'runId');
    const steps = await this.store.stepsAfter(row.uid, 0);
    const stored = await this.driver.storedRequest(row);
    if (!stored) throw new ConflictError('The run cannot go on: what it was started with is not stored', 'runId');
    const progress = rebuildProgress(asLoopSteps(steps), { maxRounds: clampMaxRounds(stored.request.maxRounds) });
    const step = decideApproval(progress, decisions, caller.name);
    const decided = await this.storeDecision(row.uid, row.uuid, steps, step);
    if (!decided) throw new ConflictError('The run is no longer waiting for approval (decided or cancelled meanwhile)', 'runId');
    this.logger.info({ runId: row.uuid, by: caller.name, approved: step.decisions!.filter((d) => d.approved).length, denied: step.decisions!.filter((d) => !d.approved).length }, 'tool calls decided');
    const current = (await this.store.findRun(uuid)) ?? row;
    await this.driver.goOn(current, stored, [...steps, decided], false);
    return this.reader.view(current);
  }

  /**
   * Waiting runs whose approval timeout has passed (on this instance or any
   * other, before or after a restart) get an APPROVAL step refusing every
   * pending call as not approved, and go on in this instance. Race-free with
   * a person deciding and with other instances' housekeeping: the step is
   * stored only while the run still waits on that same deadline, so exactly
   * one of them takes the run back up. Returns how many runs timed out here.
   */
  async expire(): Promise<number> {
    const now = unixNow();
    let handled = 0;
    for (const row of await this.store.expiredApprovals(now)) {
      if (this.driver.local(row.uuid)) continue;
      const stored = await this.driver.storedRequest(row);
      const steps = await this.store.stepsAfter(row.uid, 0);
      const last = steps[steps.length - 1]?.sequence ?? 0;
      const progress = stored ? rebuildProgress(asLoopSteps(steps), { maxRounds: clampMaxRounds(stored.request.maxRounds) }) : null;
      const pending = progress ? pendingCallsOf(progress) : [];
      if (!stored || !progress || pending.length === 0) {
        // Nothing to go on from: it ends as a run that cannot be resumed does.
        await this.driver.close(row, last, 'FAILED', 'interrupted', 'The run waited for approval, but cannot go on: what it was started with is not stored.', storedSpellings('WAITING_FOR_APPROVAL'));
        continue;
      }
      const step = approvalTimeoutStep(pending, progress.round, stored.request.approvalTimeoutSeconds ?? null);
      const decided = await this.storeDecision(row.uid, row.uuid, steps, step, now);
      if (!decided) continue;
      this.logger.info({ runId: row.uuid, pending: pending.length }, 'approval timed out; the pending calls are refused');
      handled += 1;
      const current = (await this.store.findRun(row.uuid)) ?? row;
      await this.driver.goOn(current, stored, [...steps, decided], false);
    }
    return handled;
  }

  /** Stores the APPROVAL step after `steps` while the run still waits (on the deadline of `expiredAt`, when given), takes its lease and publishes it; null when it no longer waits. */
  private async storeDecision(runUid: number, runId: string, steps: readonly StoredStep[], step: ApprovalStep, expiredAt?: number): Promise<StoredStep | null> {
    const last = steps[steps.length - 1]?.sequence ?? 0;
    const leaseAt = Date.now();
    const decided = await this.store.resumeWithDecisions(runUid, last + 1, step, this.driver.instanceId, expiredAt);
    if (!decided) return null;
    this.driver.leases.taken(runUid, leaseAt);
    this.bus.publish(runId, { type: 'step', step: decided });
    return decided;
  }
}
