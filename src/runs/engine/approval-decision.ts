/**
 * The approval rules, as pure functions: which APPROVAL step a person's
 * decisions make of the tool calls a waiting run holds, or why they make
 * none (decideApproval); when a wait ends undecided, and the step that
 * then refuses every call (approvalDeadline, approvalTimedOut,
 * timeoutDecision). The flow around them (loading the run, storing the
 * step, driving the run on) is src/runs/run-approvals.ts.
 */
import { BadUserInputError, ConflictError } from '../../shared/errors';
import { clampMaxRounds } from './loop-contract';
import { rebuildProgress, type RunProgress } from './run-machine';
import type { ApprovalStep, LoopStep, RequestedToolCall } from './loop-step';

/** One decision of `resolveToolApproval`. */
export interface ToolDecisionRequest {
  toolCallId: string;
  approve: boolean;
  reason?: string | null;
}

/** A waiting run as its wait is decided from: its steps, and the `maxRounds` it was started with (clamped here, as the loop does). */
export interface ApprovalWait {
  steps: readonly LoopStep[];
  maxRounds: number | null | undefined;
}

function progressOf(wait: ApprovalWait): RunProgress {
  return rebuildProgress(wait.steps, { maxRounds: clampMaxRounds(wait.maxRounds) });
}

/** The calls of the turn a run waits on; [] when it waits on none. */
function pendingCallsOf(progress: RunProgress): RequestedToolCall[] {
  return progress.openTurn?.approval?.decisions === null ? progress.openTurn.approval.pending : [];
}

/**
 * The APPROVAL step deciding every pending call of a waiting run at once, by
 * `decidedBy`. Refused (a client error saying what to send instead) when the
 * run waits on no call, a decision names a call that is not pending or one
 * twice, a reason is longer than 1000 characters, or a pending call is left
 * undecided.
 */
export function decideApproval(wait: ApprovalWait, decisions: readonly ToolDecisionRequest[], decidedBy: string): ApprovalStep {
  const progress = progressOf(wait);
  const pending = pendingCallsOf(progress);
  if (pending.length === 0) throw new ConflictError('The run has no pending tool calls', 'runId');
  const byId = new Map<string, ToolDecisionRequest>();
  for (const decision of decisions) {
    if (!pending.some((call) => call.id === decision.toolCallId)) throw new BadUserInputError(`No pending tool call "${decision.toolCallId}" in this run`, 'decisions');
    if (byId.has(decision.toolCallId)) throw new BadUserInputError(`Tool call "${decision.toolCallId}" is decided twice`, 'decisions');
    if (decision.reason != null && decision.reason.length > 1000) throw new BadUserInputError('A reason is at most 1000 characters', 'decisions');
    byId.set(decision.toolCallId, decision);
  }
  const undecided = pending.filter((call) => !byId.has(call.id));
  if (undecided.length > 0) throw new BadUserInputError(`Every pending call must be decided at once; missing: ${undecided.map((call) => call.id).join(', ')}`, 'decisions');
  return {
    kind: 'approval',
    round: progress.round,
    durationMs: 0,
    decisions: pending.map((call) => {
      const decision = byId.get(call.id)!;
      return { toolCallId: call.id, approved: decision.approve, reason: decision.reason ?? null, decidedBy };
    }),
  };
}

/** A waiting run whose approval deadline has passed: nobody decided in time. */
export function approvalTimedOut(deadlineAt: number | null, now: number): boolean {
  return deadlineAt !== null && now >= deadlineAt;
}

/** When a run that starts waiting now stops waiting (unix seconds); null: it waits until someone decides. */
export function approvalDeadline(now: number, timeoutSeconds: number | null | undefined): number | null {
  return timeoutSeconds === null || timeoutSeconds === undefined ? null : now + timeoutSeconds;
}

/**
 * The APPROVAL step that ends a wait nobody decided in time: every pending
 * call is refused (`refusal.notApproved`), decided by no one.
 */
export function approvalTimeoutStep(pending: readonly RequestedToolCall[], round: number, timeoutSeconds: number | null): ApprovalStep {
  const reason = timeoutSeconds === null ? 'No decision before the approval timeout.' : `No decision within ${timeoutSeconds} s.`;
  return {
    kind: 'approval',
    round,
    durationMs: 0,
    timedOut: true,
    decisions: pending.map((call) => ({ toolCallId: call.id, approved: false, reason, decidedBy: null })),
  };
}

/**
 * The APPROVAL step ending a wait whose deadline passed (see
 * approvalTimeoutStep); null when the run waits on no call, so nothing can
 * go on from it.
 */
export function timeoutDecision(wait: ApprovalWait, timeoutSeconds: number | null): ApprovalStep | null {
  const progress = progressOf(wait);
  const pending = pendingCallsOf(progress);
  return pending.length === 0 ? null : approvalTimeoutStep(pending, progress.round, timeoutSeconds);
}
