/**
 * The run state machine: one pure module that decides what a run does next.
 *
 * A run's progress is a fold over its stored steps (`applyStep`): the
 * transcript, the round, the token and cost totals, the tool calls of the
 * current turn that still wait for a result, and the approval asked for
 * them. `nextAction` reads that progress and answers the next thing to do:
 * call the model, run one tool call, ask a person for approval, wait, or end
 * with a named reason. The driver (`agent-loop.ts`) performs the action,
 * records the resulting step (persist, then publish) and folds it in.
 *
 * Because the progress is rebuilt from the steps alone, the same code drives
 * a fresh run, a run resumed after a person decided its pending tool calls,
 * and a run taken over from an instance that died: nothing a run needs to go
 * on lives only in a process's memory.
 *
 * The states, the termination reasons and every stop condition are defined
 * here and nowhere else.
 */

import type { ChatMessage, ToolCall, Usage } from '../../providers/adapters/types';
import { calibrateFromUsage, calibrationAfterFit, firstSendCalibration, type ContextCalibration } from './context-window';
import { addUsage } from './usage-limits';
import type { ApprovalDecision, ContextBudgetReport, RequestedToolCall, RunOutcomeStatus, LoopStep } from './loop-step';

/** Every state a run can be in (the GraphQL `RunStatus`). */
export const RUN_STATES = ['QUEUED', 'RUNNING', 'WAITING_FOR_APPROVAL', 'COMPLETED', 'FAILED', 'CANCELLED'] as const;
export type RunState = (typeof RUN_STATES)[number];

/** The states of a run that has not ended: it may still get steps. */
export const OPEN_RUN_STATES: readonly RunState[] = ['QUEUED', 'RUNNING', 'WAITING_FOR_APPROVAL'];

export function isOpenRunState(state: string): boolean {
  return (OPEN_RUN_STATES as readonly string[]).includes(state);
}

/**
 * Why a run ended (nr_llm's vocabulary, plus `dry_run` and `error`):
 * - `completed`: the model answered without asking for tools;
 * - `max_iterations`: the rounds ran out while the model still asked for
 *   tools; a last call without tools gave the answer (truncated);
 * - `budget_exhausted`: the next call would go beyond the run's token or cost budget;
 * - `approval_denied`: nr_llm ends a run so when a person refuses it outright;
 *   this service refuses single calls and lets the model go on, so none of its
 *   runs end with it, but runs nr_llm wrote may;
 * - `provider_failed`: a provider call failed;
 * - `cancelled`: someone cancelled the run (also while it waited for approval);
 * - `context_truncated`: the transcript did not fit the window even after
 *   dropping turns; the model was not called (truncated);
 * - `interrupted`: the instance executing the run died during a tool call that
 *   must not run twice, or before the run could be resumed at all;
 * - `dry_run`: the messages were assembled and not sent;
 * - `invalid_output`: the answer did not match the run's output schema, also after one repair call;
 * - `error`: anything else went wrong inside the service (e.g. recording a step).
 */
export const TERMINATION_REASONS = [
  'completed',
  'max_iterations',
  'budget_exhausted',
  'approval_denied',
  'provider_failed',
  'cancelled',
  'context_truncated',
  'interrupted',
  'dry_run',
  'invalid_output',
  'error',
] as const;
export type TerminationReason = (typeof TERMINATION_REASONS)[number];

/** The status a run ends in for each reason. */
export function endStatusOf(reason: TerminationReason): RunOutcomeStatus {
  switch (reason) {
    case 'completed':
    case 'max_iterations':
    case 'budget_exhausted':
    case 'context_truncated':
    case 'dry_run':
      return 'COMPLETED';
    case 'cancelled':
      return 'CANCELLED';
    case 'approval_denied':
    case 'provider_failed':
    case 'interrupted':
    case 'invalid_output':
    case 'error':
      return 'FAILED';
  }
}

/** The refusal results a tool call gets instead of running (nr_llm's exact strings). */
export const refusal = {
  denied: (name: string) => `Error: tool "${name}" was denied by the operator.`,
  noLongerPermitted: (name: string) => `Error: tool "${name}" is no longer permitted and was not executed.`,
  notApproved: (name: string) => `Error: tool "${name}" requires approval that was not given.`,
} as const;

/** What the machine needs to know about a run besides its steps. */
export interface RunRules {
  /** Already clamped (1..20). */
  maxRounds: number;
  /** Whether the run offers any tool: without tools a run makes one plain call. */
  offersTools: boolean;
  /** Whether a tool call needs a person's approval before it runs. */
  needsApproval(toolName: string): boolean;
  /** Whether a tool may run again after a crash that may have happened while it ran. */
  isIdempotent(toolName: string): boolean;
  budget: RunBudget;
}

/** Per-run limits checked before every model call. Null: no limit. */
export interface RunBudget {
  maxTotalTokens: number | null;
  /** US dollars. */
  maxCost: number | null;
}

/** The approval asked for the calls of one turn, and the decisions once given. */
export interface TurnApproval {
  pending: RequestedToolCall[];
  /** Null while nobody decided. */
  decisions: ApprovalDecision[] | null;
  /** Nobody decided before the run's approval timeout: every call is refused as not approved. */
  timedOut: boolean;
}

/** A model answer that asked for tools: its calls run one after another. */
export interface OpenTurn {
  round: number;
  calls: RequestedToolCall[];
  /** Ids of the calls whose TOOL step is stored. */
  done: Set<string>;
  approval: TurnApproval | null;
}

/**
 * A model call whose CONTEXT (and perhaps REQUEST) step is stored but whose
 * answer is not: the instance making it died. The run taken over makes the
 * call again without storing those steps a second time.
 */
export interface InFlightCall {
  round: number;
  context: ContextBudgetReport | null;
  /** The calibration before the stored CONTEXT was folded in: the fit is made again with it. */
  calibrationBefore: ContextCalibration;
  request: { messagesSent: ChatMessage[]; toolsOffered: string[] } | null;
}

/** Everything the stored steps say about where a run stands. */
export interface RunProgress {
  /** Null until the messages are assembled (or read back from the first REQUEST step). */
  transcript: ChatMessage[] | null;
  /** The round of the last model call (0 before the first). */
  round: number;
  /** Rounds (1..maxRounds) whose model call answered. */
  iterations: number;
  usage: Usage;
  /** Sum of the stored calls' costs; null while every call was unpriced. */
  spentCost: number | null;
  /** The context window's calibration for the next send (`context-window.ts`). */
  calibration: ContextCalibration;
  lastContext: ContextBudgetReport | null;
  /** Tools offered with the last request. */
  lastToolsOffered: string[] | null;
  /** The last model answer; `outputValid` false: it did not match the run's output schema; `model`: the model the provider reported. */
  lastAnswer: { round: number; content: string; toolCalls: RequestedToolCall[]; withTools: boolean; outputValid?: boolean; model?: string } | null;
  /** The turn whose tool calls are not all done yet. */
  openTurn: OpenTurn | null;
  /** A model call begun (CONTEXT stored) and not answered; null otherwise. */
  inFlight: InFlightCall | null;
  /** Calls to external tools made so far (TOOL steps marked `remoteCall`): nr_llm's budget counts them per run. */
  remoteCallsMade: number;
  ended: boolean;
  /** Steps folded in. */
  stepCount: number;
}

export function initialProgress(): RunProgress {
  return {
    transcript: null,
    round: 0,
    iterations: 0,
    usage: { promptTokens: 0, completionTokens: 0, totalTokens: 0 },
    spentCost: null,
    calibration: firstSendCalibration(),
    lastContext: null,
    lastToolsOffered: null,
    lastAnswer: null,
    openTurn: null,
    inFlight: null,
    remoteCallsMade: 0,
    ended: false,
    stepCount: 0,
  };
}

/**
 * What the recording side knows beyond the stored step: the exact usage
 * classes. Absent when a run is rebuilt from the table; the stored numbers
 * are used then.
 */
export interface StepDetails {
  usage?: Usage;
}

/** A tool call as it goes back to the model in the assistant turn: arguments as sent, empty as `{}`. */
export function transcriptToolCall(call: RequestedToolCall): ToolCall {
  const text =
    call.rawArguments !== undefined ? call.rawArguments : typeof call.arguments === 'string' ? call.arguments : JSON.stringify(call.arguments ?? {});
  return {
    id: call.id,
    type: 'function',
    function: { name: call.name, arguments: text.trim() === '' ? '{}' : text },
    ...(call.providerReplay !== undefined ? { providerReplay: call.providerReplay } : {}),
    ...(call.wireId !== undefined ? { wireId: call.wireId } : {}),
  };
}

/** Folds one step into the progress (the progress is changed in place and returned). */
export function applyStep(progress: RunProgress, step: LoopStep, rules: Pick<RunRules, 'maxRounds'>, details: StepDetails = {}): RunProgress {
  progress.stepCount += 1;
  switch (step.kind) {
    case 'assembled':
      progress.transcript ??= step.messagesSent.slice();
      break;
    case 'context':
      progress.inFlight = { round: step.round, context: step.contextBudget, calibrationBefore: progress.calibration, request: null };
      progress.lastContext = step.contextBudget;
      // The stored estimate is what the next reported usage is divided by.
      progress.calibration = calibrationAfterFit(progress.calibration, step.contextBudget);
      progress.round = step.round;
      break;
    case 'request':
      // The first request holds the assembly as it was (nothing can be dropped before the first answer).
      progress.transcript ??= step.messagesSent.slice();
      progress.round = step.round;
      progress.lastToolsOffered = step.toolsOffered;
      if (progress.inFlight?.round === step.round && progress.inFlight.request === null) {
        progress.inFlight.request = { messagesSent: step.messagesSent, toolsOffered: step.toolsOffered };
      } else {
        progress.inFlight = { round: step.round, context: null, calibrationBefore: progress.calibration, request: { messagesSent: step.messagesSent, toolsOffered: step.toolsOffered } };
      }
      break;
    case 'llm': {
      progress.inFlight = null;
      const usage = details.usage ?? { promptTokens: step.promptTokens, completionTokens: step.completionTokens, totalTokens: step.totalTokens };
      addUsage(progress.usage, usage);
      if (step.estimatedCost !== null && step.estimatedCost !== undefined) progress.spentCost = (progress.spentCost ?? 0) + step.estimatedCost;
      progress.calibration = calibrateFromUsage(progress.calibration, usage.promptTokens);
      progress.round = step.round;
      const withTools = (progress.lastToolsOffered?.length ?? 0) > 0;
      if (step.round <= rules.maxRounds) progress.iterations = step.round;
      progress.lastAnswer = { round: step.round, content: step.content, toolCalls: step.requestedToolCalls, withTools, outputValid: step.outputValid, ...(step.model ? { model: step.model } : {}) };
      if (withTools && step.requestedToolCalls.length > 0) {
        progress.transcript?.push({
          role: 'assistant',
          content: step.content === '' ? null : step.content,
          tool_calls: step.requestedToolCalls.map(transcriptToolCall),
        });
        progress.openTurn = { round: step.round, calls: step.requestedToolCalls, done: new Set(), approval: null };
      } else {
        progress.openTurn = null;
      }
      break;
    }
    case 'approval': {
      progress.inFlight = null;
      const turn = progress.openTurn;
      if (!turn) break;
      if (step.pendingToolCalls) turn.approval = { pending: step.pendingToolCalls, decisions: null, timedOut: false };
      if (step.decisions && turn.approval) {
        turn.approval.decisions = step.decisions;
        turn.approval.timedOut = step.timedOut === true;
        // The loop goes on after a person's decision as nr_llm's resumed loop does: its next send is a first send.
        progress.calibration = firstSendCalibration();
      }
      break;
    }
    case 'tool':
      progress.inFlight = null;
      if (step.remoteCall === true) progress.remoteCallsMade += 1;
      progress.transcript?.push({ role: 'tool', tool_call_id: step.toolCallId, content: step.toolResult });
      if (progress.openTurn) {
        progress.openTurn.done.add(step.toolCallId);
        if (progress.openTurn.calls.every((call) => progress.openTurn!.done.has(call.id))) progress.openTurn = null;
      }
      break;
    case 'end':
      progress.inFlight = null;
      progress.ended = true;
      break;
  }
  return progress;
}

/** Rebuilds a run's progress from its stored steps, in sequence order. */
export function rebuildProgress(steps: readonly LoopStep[], rules: Pick<RunRules, 'maxRounds'>): RunProgress {
  const progress = initialProgress();
  for (const step of steps) applyStep(progress, step, rules);
  return progress;
}

/**
 * Takes the model call a dead instance began (its CONTEXT, perhaps its
 * REQUEST, stored; no answer) out of the progress, which is rewound to just
 * before that call: the driver fits the context again and, where the result
 * is what is stored, folds the stored step in instead of storing it twice
 * (`isStoredAgain`). Null when no call was in flight.
 */
export function takeInFlightCall(progress: RunProgress): InFlightCall | null {
  const call = progress.inFlight;
  if (call === null) return null;
  progress.inFlight = null;
  progress.calibration = call.calibrationBefore;
  return call;
}

/**
 * Whether a step about to be recorded is the one the in-flight call already
 * stored (same values as they were written): it is then not stored again, so
 * a run taken over shows one CONTEXT and one REQUEST for the call made again.
 */
export function isStoredAgain(stored: unknown, fresh: unknown): boolean {
  return stored !== null && stored !== undefined && JSON.stringify(stored) === JSON.stringify(fresh);
}

// ---------------------------------------------------------------------------
// Stop conditions: each one named predicate.
// ---------------------------------------------------------------------------

/** The model's last answer asked for no tools: the run is done. */
export function answeredWithoutTools(progress: RunProgress): boolean {
  return progress.lastAnswer !== null && progress.lastAnswer.toolCalls.length === 0;
}

/** The last answer did not match the run's output schema. */
export function answerFailedSchema(progress: RunProgress): boolean {
  return progress.lastAnswer?.outputValid === false;
}

/** Structured output makes exactly one repair call: only a first answer is repaired. */
export function repairsLeft(progress: RunProgress): boolean {
  return progress.lastAnswer !== null && progress.lastAnswer.round === 1;
}

/** The last call was made without tools (the cap's synthesis call, or a run offering none): its answer ends the run. */
export function answeredLastCall(progress: RunProgress): boolean {
  return progress.lastAnswer !== null && !progress.lastAnswer.withTools;
}

/** Every round was used and the model still asks for tools: one last call without tools, then the end. */
export function roundsUsedUp(progress: RunProgress, rules: Pick<RunRules, 'maxRounds'>): boolean {
  return progress.round >= rules.maxRounds;
}

/** Even after dropping turns the transcript does not fit the window: the model is not called. */
export function contextDoesNotFit(context: ContextBudgetReport): boolean {
  return !context.fits;
}

/**
 * The next call would go beyond the run's budget: the tokens spent plus the
 * calibrated estimate of the prompt about to be sent, and the cost of those
 * prompt tokens at the model's input price.
 */
export function budgetWouldBeExceeded(
  progress: RunProgress,
  budget: RunBudget,
  next: { promptEstimate: number; costPerPromptToken: number | null },
): boolean {
  if (budget.maxTotalTokens !== null && progress.usage.totalTokens + next.promptEstimate > budget.maxTotalTokens) return true;
  if (budget.maxCost !== null) {
    const spent = progress.spentCost ?? 0;
    const nextCost = next.costPerPromptToken === null ? 0 : next.promptEstimate * next.costPerPromptToken;
    if (spent + nextCost > budget.maxCost) return true;
  }
  return false;
}

/** A turn with a call to a tool that needs approval waits, before any of its calls runs, until a person decides. */
export function turnNeedsApproval(turn: OpenTurn, rules: Pick<RunRules, 'needsApproval'>): boolean {
  return turn.done.size === 0 && turn.calls.some((call) => rules.needsApproval(call.name));
}

/**
 * A run taken over after a crash whose next tool call may have been running
 * when the instance died: it runs again only if the tool says it can.
 */
export function interruptedToolCall(turn: OpenTurn, call: RequestedToolCall, rules: Pick<RunRules, 'isIdempotent'>, resumedAfterCrash: boolean): boolean {
  return resumedAfterCrash && !rules.isIdempotent(call.name) && !refusedByApproval(turn, call);
}

function decisionOf(turn: OpenTurn, call: RequestedToolCall): ApprovalDecision | null {
  return turn.approval?.decisions?.find((decision) => decision.toolCallId === call.id) ?? null;
}

function refusedByApproval(turn: OpenTurn, call: RequestedToolCall): boolean {
  const decision = decisionOf(turn, call);
  return turn.approval !== null && (decision === null || !decision.approved);
}

// ---------------------------------------------------------------------------
// The next action.
// ---------------------------------------------------------------------------

export type RunAction =
  | { kind: 'call_model'; round: number; withTools: boolean; repair?: boolean } // repair: show the model its answer that failed the output schema
  /** `afterApproval`: a person decided this turn (a tool no longer offered is then refused as such). */
  | { kind: 'run_tool'; call: RequestedToolCall; refusal: string | null; afterApproval: boolean }
  | { kind: 'ask_approval'; calls: RequestedToolCall[] }
  | { kind: 'wait_for_approval'; calls: RequestedToolCall[] }
  | { kind: 'end'; reason: TerminationReason; truncated: boolean; finalContent: string | null };

/**
 * What a run does next, from its progress alone. `resumedAfterCrash`: the
 * run was taken over from an instance that died (its next tool call may
 * have been running there).
 */
export function nextAction(progress: RunProgress, rules: RunRules, resumedAfterCrash = false): RunAction {
  const turn = progress.openTurn;
  if (turn) {
    if (turnNeedsApproval(turn, rules) && turn.approval === null) return { kind: 'ask_approval', calls: turn.calls };
    if (turn.approval !== null && turn.approval.decisions === null) return { kind: 'wait_for_approval', calls: turn.approval.pending };
    const call = turn.calls.find((candidate) => !turn.done.has(candidate.id))!;
    if (interruptedToolCall(turn, call, rules, resumedAfterCrash)) return { kind: 'end', reason: 'interrupted', truncated: false, finalContent: null };
    return { kind: 'run_tool', call, refusal: approvalRefusal(turn, call), afterApproval: turn.approval !== null };
  }
  const answer = progress.lastAnswer;
  if (answer !== null) {
    if (answerFailedSchema(progress)) {
      return repairsLeft(progress) ? { kind: 'call_model', round: answer.round + 1, withTools: false, repair: true } : { kind: 'end', reason: 'invalid_output', truncated: false, finalContent: answer.content };
    }
    if (answeredLastCall(progress)) {
      const capped = rules.offersTools;
      return { kind: 'end', reason: capped ? 'max_iterations' : 'completed', truncated: capped, finalContent: answer.content };
    }
    if (answeredWithoutTools(progress)) return { kind: 'end', reason: 'completed', truncated: false, finalContent: answer.content };
  }
  if (!rules.offersTools) return { kind: 'call_model', round: 1, withTools: false };
  if (answer !== null && roundsUsedUp(progress, rules)) return { kind: 'call_model', round: rules.maxRounds + 1, withTools: false };
  return { kind: 'call_model', round: (answer?.round ?? 0) + 1, withTools: true };
}

/** The refusal a call of a decided turn gets instead of running; null when it runs. */
function approvalRefusal(turn: OpenTurn, call: RequestedToolCall): string | null {
  if (turn.approval === null) return null;
  const decision = decisionOf(turn, call);
  if (decision === null || turn.approval.timedOut) return refusal.notApproved(call.name);
  return decision.approved ? null : refusal.denied(call.name);
}
