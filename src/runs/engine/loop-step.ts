/**
 * The trace of a run as the engine sees it: the steps the agent loop records
 * (`LoopStep`) and the outcome it returns (behaviour.md §8). Stored, a step is
 * a `StoredStep` (trace-bus.ts); shown through the API, a GraphQL `RunStep`
 * (run.types.ts).
 *
 * Each step carries only the fields that apply to its kind. Field names follow
 * the GraphQL `RunStep` type where one exists; messages stay in the service's
 * OpenAI shape (`ChatMessage`), exactly as they were sent.
 */

import type { ChatMessage, FinishReason } from '../../providers/adapters/types';
import type { HistorySent } from './history-sent';
import type { TerminationReason } from './run-machine';

export type { TerminationReason } from './run-machine';

export type LoopStepKind = 'assembled' | 'context' | 'request' | 'llm' | 'approval' | 'tool' | 'end';

export type RunOutcomeStatus = 'COMPLETED' | 'FAILED' | 'CANCELLED';


interface StepBase {
  /** 0 for steps before the first round; the synthesis call after the cap has round `maxRounds + 1`. */
  round: number;
  /** Milliseconds, two decimals, monotonic clock: around the provider call (`llm`) or the tool (`tool`); 0 otherwise. */
  durationMs: number;
}

/** Dry run only: the messages a live run would send first. */
export interface AssembledStep extends StepBase {
  kind: 'assembled';
  messagesSent: ChatMessage[];
}

/**
 * The budget breakdown of behaviour.md §7 for one call. A transcript sent as
 * is without being measured (a budget ≤ 0, or a tool message answering no
 * declared call) reports every figure as 0, `fits` true.
 */
export interface ContextBudgetReport {
  window: number;
  reserve: number;
  safety: number;
  budget: number;
  /** Calibrated estimate of what is sent (after any dropping). */
  estimate: number;
  droppedTurns: number;
  /** The calibration factor used (1.15 on a first send, growing from there; rows written before that may hold 1). */
  calibration: number;
  /** False: over budget even after dropping; the run stops with `context_truncated`. */
  fits: boolean;
}

export interface ContextStep extends StepBase {
  kind: 'context';
  contextBudget: ContextBudgetReport;
}

export interface RequestStep extends StepBase {
  kind: 'request';
  messagesSent: ChatMessage[];
  /** Names of the tools offered with this call; `[]` for none. */
  toolsOffered: string[];
  /** A conversation turn: where its history sits in `messagesSent` (stored by reference, see history-sent). */
  historySent?: HistorySent;
  /** Read back: why `messagesSent` lacks messages that were sent. */
  warnings?: string[];
}

/** A tool call the model asked for, as api.md's `ToolCall`. */
export interface RequestedToolCall {
  id: string;
  name: string;
  /** The parsed arguments; the raw string when it is not valid JSON; `{}` when empty. */
  arguments: unknown;
  /** The arguments exactly as the model sent them, when re-encoding `arguments` would not give the same text. */
  rawArguments?: string;
  /** Adapter state that must go back with the call (see `ToolCall.providerReplay`). */
  providerReplay?: string;
  /** The provider's id for the call when it repeated an id within one answer and `id` is `<id>#2` (see `ToolCall.wireId`). */
  wireId?: string;
}

/** A person's decision on one pending tool call. */
export interface ApprovalDecision {
  toolCallId: string;
  approved: boolean;
  reason: string | null;
  /** The name of the API token that decided; null for a timeout. */
  decidedBy: string | null;
}

/**
 * A turn's tool calls waiting for a person (`pendingToolCalls`: the run then
 * waits in WAITING_FOR_APPROVAL), or the decisions taken on them (`decisions`).
 */
export interface ApprovalStep extends StepBase {
  kind: 'approval';
  pendingToolCalls?: RequestedToolCall[];
  /** With `pendingToolCalls` of a run given an approval timeout: when the wait ends undecided (unix seconds). */
  deadlineAt?: number;
  decisions?: ApprovalDecision[];
  /** The decisions are the timeout's: nobody decided in time, every call is refused as not approved. */
  timedOut?: boolean;
}

export interface LlmStep extends StepBase {
  kind: 'llm';
  content: string;
  thinking: string | null;
  finishReason: FinishReason;
  /** The provider's own finish reason. */
  rawFinishReason: string | null;
  promptTokens: number;
  completionTokens: number;
  /** `promptTokens + completionTokens`. */
  totalTokens: number;
  /** US dollars; null when the model is unpriced. */
  estimatedCost: number | null;
  requestedToolCalls: RequestedToolCall[];
  /** Settings the provider ignored; present only when there are some. */
  warnings?: string[];
  /** The model the provider reported answering; present only when it said. */
  model?: string;
  /**
   * The call was made again by the instance that took the run over: the one
   * that made it first stopped before its answer was stored. The CONTEXT and
   * REQUEST before this step are that call's, stored once.
   */
  resentAfterTakeover?: true;
  /** The decoded provider body; present only when raw capture was asked for. */
  raw?: unknown;
  /**
   * A run with an output schema: whether this answer matched it (validated
   * on the server); the failed answer's text stays in `content`.
   */
  outputValid?: boolean;
  /** Why the answer did not match (Ajv's words); present only when it did not. */
  outputError?: string;
}

export interface ToolStep extends StepBase {
  kind: 'tool';
  toolCallId: string;
  toolName: string;
  toolArguments: unknown;
  /** Exactly what the model receives. */
  toolResult: string;
  toolIsError: boolean;
  /** The tool contacted an external server (MCP): counted against the run's budget of remote calls. */
  remoteCall?: true;
}

/** What a run ends with; also the payload of its `end` step. */
export interface LoopOutcome {
  status: RunOutcomeStatus;
  terminationReason: TerminationReason;
  /** Rounds (1..maxRounds) whose model call answered; the call after the cap is not counted. */
  iterations: number;
  /** True for `max_iterations` and `context_truncated`. */
  truncated: boolean;
  /** The answer of the call that ended the run (`completed`, `max_iterations`); null otherwise. */
  finalContent: string | null;
  /** Sums over every provider call that answered, the call after the cap included. */
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  /** US dollars for the whole run; null when the model is unpriced. */
  estimatedCost: number | null;
  /** Safe to show: the provider error's message, or a generic text for internal errors. */
  error: string | null;
  /** The error's class name, e.g. `ProviderConnectionError`. */
  errorClass: string | null;
  dryRun: boolean;
  /** The model the provider reported for the answer in `finalContent`; present only when it said. */
  model?: string;
}

/** The last step of every run, exactly one per run. */
export interface EndStep extends StepBase, LoopOutcome {
  kind: 'end';
}

export type LoopStep = AssembledStep | ContextStep | RequestStep | LlmStep | ApprovalStep | ToolStep | EndStep;

/** A piece of streamed output, forwarded live while a call streams. */
export interface LoopDelta {
  kind: 'content' | 'thinking';
  text: string;
  round: number;
  /**
   * How much output of this kind (UTF-16 code units) the call streamed before
   * this piece: a watcher that joined late, or lost a piece, sees the gap and
   * takes the rest from the stored LLM step instead (no gap, no duplicate).
   */
  offset: number;
}
