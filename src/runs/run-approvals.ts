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
import { decideApproval, timeoutDecision, type ToolDecisionRequest } from './engine/approval-decision';
import type { RunDriver } from './run-driver';
import type { RunView } from './run-reader';
import type { RunStore } from './run-store';
import { storedSpellings } from './run-status';

export class RunApprovals {
  constructor(
    private readonly store: RunStore,
    private readonly driver: RunDriver,
    private readonly logger: Logger,
  ) {}

  /**
   * Decides every pending call of a waiting run at once, stores the
   * decisions as an APPROVAL step and drives the run on in this process.
   */
  async resolve(uuid: string, decisions: readonly ToolDecisionRequest[], caller: Caller): Promise<RunView> {
    const waiting = await this.store.waitingRun(uuid);
    if (!waiting) throw new NotFoundError(`No run with id "${uuid}"`, 'runId');
    const { row, request, steps } = waiting;
    if (row.status !== 'WAITING_FOR_APPROVAL') throw new ConflictError(`The run is ${row.status}, not waiting for approval`, 'runId');
    if (!request) throw new ConflictError('The run cannot go on: what it was started with is not stored', 'runId');
    const step = decideApproval({ steps: waiting.loopSteps, maxRounds: request.request.maxRounds }, decisions, caller.name);
    const leaseAt = Date.now();
    const decided = await this.store.resumeWithDecisions(row.uid, (steps[steps.length - 1]?.sequence ?? 0) + 1, step, this.driver.instanceId);
    if (!decided) throw new ConflictError('The run is no longer waiting for approval (decided or cancelled meanwhile)', 'runId');
    this.logger.info({ runId: row.uuid, by: caller.name, approved: step.decisions!.filter((d) => d.approved).length, denied: step.decisions!.filter((d) => !d.approved).length }, 'tool calls decided');
    return this.driver.resume(row, request, steps, { decided, leaseAt });
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
    for (const expired of await this.store.expiredApprovals(now)) {
      if (this.driver.local(expired.uuid)) continue;
      const waiting = await this.store.waitingRun(expired.uuid);
      if (!waiting || waiting.row.status !== 'WAITING_FOR_APPROVAL') continue;
      const { row, request, steps } = waiting;
      const last = steps[steps.length - 1]?.sequence ?? 0;
      const step = request ? timeoutDecision({ steps: waiting.loopSteps, maxRounds: request.request.maxRounds }, request.request.approvalTimeoutSeconds ?? null) : null;
      if (!request || !step) {
        // Nothing to go on from: it ends as a run that cannot be resumed does.
        await this.driver.close(row, last, 'FAILED', 'interrupted', 'The run waited for approval, but cannot go on: what it was started with is not stored.', storedSpellings('WAITING_FOR_APPROVAL'));
        continue;
      }
      const leaseAt = Date.now();
      const decided = await this.store.resumeWithDecisions(row.uid, last + 1, step, this.driver.instanceId, now);
      if (!decided) continue;
      this.logger.info({ runId: row.uuid, pending: step.decisions!.length }, 'approval timed out; the pending calls are refused');
      handled += 1;
      await this.driver.resume(row, request, steps, { decided, leaseAt });
    }
    return handled;
  }
}
