/**
 * The agent loop's contract: what a caller hands the loop (input, hooks)
 * and what it gets back (an outcome, a suspended run, or a takeover). The
 * driver is agent-loop.ts; tool calls are tool-dispatch.ts; the one-time
 * message assembly is src/prompt/run-messages.ts.
 */
import type { CallOptions, ChatAdapter } from '../../providers/adapters/types';
import type { ModelPrices } from '../../providers/cost';
import type { AssembledRun, AssemblyInput } from '../../prompt/run-messages';
import type { ToolRegistry } from '../tools/tool-registry';
import type { CallLedger } from './call-ledger';
import type { HistoryAt } from './history-sent';
import type { RunBudget } from './run-machine';
import type { LoopOutcome, RequestedToolCall, LoopDelta, LoopStep } from './loop-step';

export const DEFAULT_MAX_ROUNDS = 5;
export const MIN_MAX_ROUNDS = 1;
export const MAX_MAX_ROUNDS = 20;

/** The error text of a run that failed inside the service; the details go to the log only. */
export const INTERNAL_ERROR_MESSAGE = 'The run stopped because of an internal error.';

/** What the loop needs to know about the model row (`tx_nrllm_model` plus its extra prices). */
export interface AgentLoopModel {
  /** `context_length`; 0 = unknown (the window is then 8192). */
  contextLength: number;
  /** `max_output_tokens`; 0 = unknown. */
  maxOutputTokens: number;
  /** Prices for `estimateCost`; null = unpriced (costs are then null). */
  prices: ModelPrices | null;
}

export type { ForcedSnippet } from '../../prompt/run-messages';

/** The tools side of a run. */
export interface AgentLoopTools {
  registry: ToolRegistry;
  /**
   * Absent: the tools enabled by default; `[]`: no tools; a list: those tools.
   * Unknown names are the caller's input error to report before the run
   * (`registry.unknownNames`); the loop ignores them.
   */
  allowList?: readonly string[] | null;
}

/** What a run is driven with; the system prompt, forced snippets and skills, and the prompt are the assembly's (src/prompt/run-messages.ts). */
export interface AgentLoopInput extends AssemblyInput {
  adapter: ChatAdapter;
  model: AgentLoopModel;
  /**
   * The call options of behaviour.md §5 (model, temperature, top_p,
   * penalties, max_tokens, timeout, pass-through options). A `system_prompt`
   * or `captureRaw` key here is ignored: the system prompt travels as message
   * 0 and raw capture is `captureRaw` below.
   */
  callOptions: CallOptions;
  /**
   * The `max_tokens` the run itself asked for (startRun's `maxTokens`), not
   * the configuration's: the response reserve of the context budget, before
   * the model's maximum output (behaviour.md §7, as nr_llm's loop reserves).
   */
  runMaxTokens?: number | null;
  tools: AgentLoopTools;
  /** Default 5; truncated to an integer and clamped to 1..20. */
  maxRounds?: number | null;
  /** Keep the provider's decoded body on `llm` steps. Only an administrator may ask for it. */
  captureRaw?: boolean;
  /** Assemble and record the messages, call nothing. */
  dryRun?: boolean;
  /** Cancels the run: it stops at once with status CANCELLED. */
  signal?: AbortSignal;
  /** Call `adapter.stream` and forward deltas to `hooks.onDelta`, instead of `adapter.chat`. */
  stream?: boolean;
  /** Tools that need a person's approval in this run, besides those that declare it themselves. */
  approvalRequired?: readonly string[];
  /**
   * Send a transcript that does not fit even after dropping every turn that
   * may go, instead of ending the run `context_truncated` (a conversation
   * turn: the estimate errs high, and the provider may still answer).
   */
  sendOverBudget?: boolean;
  /** Token and cost limits checked before every model call. */
  budget?: Partial<RunBudget>;
  /** A conversation turn: where `history` is stored, so its REQUEST steps name it instead of copying it (history-sent). */
  historyAt?: HistoryAt;
  /** The assembly of these messages when the run's starter already made it (first-fit): the loop sends it as it is. */
  assembled?: AssembledRun;
  /**
   * Seconds a run waits for a person's decision before its pending calls are
   * refused as not approved; null or absent: it waits until someone decides.
   * The loop stores the deadline on the APPROVAL step; the service enforces it.
   */
  approvalTimeoutSeconds?: number | null;
  /**
   * The JSON Schema (text) the final answer must match: each answer is
   * validated on the server; an invalid first answer gets one repair call
   * (run-machine.ts), a second ends the run `invalid_output`.
   */
  structuredOutput?: { schemaJson: string } | null;
  /**
   * Go on from these stored steps instead of starting afresh: after a person
   * decided the pending calls, or after taking the run over from an
   * instance that died (`afterCrash`).
   */
  resume?: { steps: readonly LoopStep[]; afterCrash: boolean };
}

/** A run that stopped to wait for a person: its APPROVAL step is recorded, no END. */
export interface SuspendedRun {
  status: 'WAITING_FOR_APPROVAL';
  pendingToolCalls: RequestedToolCall[];
}

/**
 * A run this process stopped driving because another instance took it over
 * (its lease went stale and was claimed): nothing more is recorded here, no
 * END either; the new owner goes on from the stored steps.
 */
export interface TakenOverRun {
  status: 'TAKEN_OVER';
}

export type LoopResult = LoopOutcome | SuspendedRun | TakenOverRun;

/**
 * What `recordStep` throws when this process no longer owns the run: the
 * step was not stored, and the loop stops at once without an END.
 */
export class RunTakenOver extends Error {
  constructor() {
    super('Another instance took the run over; this one stops driving it.');
    this.name = 'RunTakenOver';
  }
}

/** The part of a pino logger the loop uses. */
export interface AgentLoopLogger {
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

/** What is stored beside a step, outside the trace. */
export interface StepExtras {
  /**
   * With the APPROVAL step that makes the run wait: the run's state as
   * nr_llm keeps it in `tx_nrllm_agentrun.suspended_state` (JSON), so TYPO3's
   * approvals inbox can show the pending calls.
   */
  suspendedState?: string;
}

export interface AgentLoopHooks {
  /**
   * Persist, then publish. Awaited before the loop goes on; a failure ends
   * the run with reason `error`, except `RunTakenOver`, which stops it at
   * once without an END (another instance drives it now).
   */
  recordStep(step: LoopStep, extras?: StepExtras): Promise<void>;
  /**
   * Whether the next tool call of a turn may start while the previous call's
   * TOOL step is still being written (see `AgentLoopRun.executeToolCall`):
   * true only while this process knows its hold on the run to be safe from
   * a takeover (its lease renewed recently enough), so that no other
   * instance can be driving the run when the call goes out. Absent or
   * false: every step is stored before the next action starts.
   */
  mayOverlapToolCall?(): boolean;
  /** The usage ledger: asked before every provider call, told after every successful one. Absent: nothing is metered. */
  ledger?: CallLedger;
  /** Streamed output while a call streams (`input.stream`); exceptions thrown here are logged and ignored. */
  onDelta?(delta: LoopDelta): void;
  logger: AgentLoopLogger;
}

/** Default 5; otherwise truncated to an integer and clamped to 1..20. */
export function clampMaxRounds(value: number | null | undefined): number {
  if (value === null || value === undefined || !Number.isFinite(value)) {
    return DEFAULT_MAX_ROUNDS;
  }
  return Math.min(MAX_MAX_ROUNDS, Math.max(MIN_MAX_ROUNDS, Math.trunc(value)));
}
