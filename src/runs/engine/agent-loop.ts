/**
 * The bounded agent loop (behaviour.md §8).
 *
 * One run: assemble the messages once (skills into the first user message, the
 * effective system prompt, forced snippets as leading system messages), then
 * rounds of fit-context → request → call → tools, until the model answers
 * without asking for tools, the rounds run out (one last call without tools),
 * the transcript no longer fits, the provider fails, or the run is cancelled.
 *
 * Every step is handed to `hooks.recordStep` and awaited before the loop goes
 * on: the caller persists it, then publishes it, so a step is never announced
 * before it is stored. Every run ends with exactly one `end` step, whatever
 * happened before it.
 *
 * The loop knows no database and no GraphQL: the caller resolves the
 * configuration, the model and the skills, composes the effective system
 * prompt (behaviour.md §4) and passes plain values.
 */

import { performance } from 'node:perf_hooks';
import type {
  CallOptions,
  ChatAdapter,
  ChatMessage,
  ChatRequest,
  ChatResult,
  ToolCall,
  ToolDefinition,
} from '../../providers/adapters/types';
import { uniqueToolCallIds } from '../../providers/adapters/tool-calls';
import { estimateCost, type ModelPrices } from '../../providers/cost';
import { composeSnippets } from '../../prompt/snippet-text';
import { plainJsonText } from '../../shared/php-json';
import { ToolInputError, toToolDefinition, type ToolRegistration, type ToolRegistry } from '../tools/tool-registry';
import { contextBudget, fitContext, type ContextBudget } from './context-window';
import type {
  EndStep,
  LoopOutcome,
  RequestStep,
  RequestedToolCall,
  RunDelta,
  RunStep,
  TerminationReason,
  ToolStep,
} from './run-step';
import { SKILL_BLOCK_MAX_BYTES, buildSkillBlock, injectSkillBlock, type SkillBlock, type SkillInput } from '../../prompt/skill-block';
import { boundToolResult } from './tool-result';
import {
  applyStep,
  approvalDeadline,
  budgetWouldBeExceeded,
  contextDoesNotFit,
  endStatusOf,
  initialProgress,
  isStoredAgain,
  nextAction,
  rebuildProgress,
  refusal,
  takeInFlightCall,
  transcriptToolCall,
  type RunBudget,
  type RunProgress,
  type RunRules,
  type StepDetails,
} from './run-machine';
import { suspendedStateOf } from './suspended-state';
import { sanitizeUsage } from './usage-limits';

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

/** A snippet forced onto a run: sent as its own leading system message. */
export interface ForcedSnippet {
  identifier: string;
  name: string;
  snippet: string;
}

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

export interface AgentLoopInput {
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
  /**
   * The effective system prompt, already composed by the caller: the
   * override if non-empty, else the configuration's prompt, with the snippet
   * block appended (behaviour.md §4). `""` sends no system message.
   */
  systemPrompt: string;
  /** Forced snippets, in the order given. */
  forcedSnippets?: readonly ForcedSnippet[];
  /** The configuration's skills, in relation order (`sorting`). */
  configurationSkills?: readonly SkillInput[];
  /** Skills forced onto this run, after the configuration's. */
  forcedSkills?: readonly SkillInput[];
  /** The user prompt: the first (and only) user message. */
  prompt: string;
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
  /** Token and cost limits checked before every model call. */
  budget?: Partial<RunBudget>;
  /**
   * Seconds a run waits for a person's decision before its pending calls are
   * refused as not approved; null or absent: it waits until someone decides.
   * The loop stores the deadline on the APPROVAL step; the service enforces it.
   */
  approvalTimeoutSeconds?: number | null;
  /**
   * Go on from these stored steps instead of starting afresh: after a person
   * decided the pending calls, or after taking the run over from an
   * instance that died (`afterCrash`).
   */
  resume?: { steps: readonly RunStep[]; afterCrash: boolean };
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
  recordStep(step: RunStep, extras?: StepExtras): Promise<void>;
  /**
   * Whether the next tool call of a turn may start while the previous call's
   * TOOL step is still being written (see `AgentLoopRun.executeToolCall`):
   * true only while this process knows its hold on the run to be safe from
   * a takeover (its lease renewed recently enough), so that no other
   * instance can be driving the run when the call goes out. Absent or
   * false: every step is stored before the next action starts.
   */
  mayOverlapToolCall?(): boolean;
  /** Streamed output while a call streams (`input.stream`); exceptions thrown here are logged and ignored. */
  onDelta?(delta: RunDelta): void;
  logger: AgentLoopLogger;
}

/** Default 5; otherwise truncated to an integer and clamped to 1..20. */
export function clampMaxRounds(value: number | null | undefined): number {
  if (value === null || value === undefined || !Number.isFinite(value)) {
    return DEFAULT_MAX_ROUNDS;
  }
  return Math.min(MAX_MAX_ROUNDS, Math.max(MIN_MAX_ROUNDS, Math.trunc(value)));
}

export interface AssembledRun {
  /** The messages of the first request, before any context fitting. */
  messages: ChatMessage[];
  skills: SkillBlock;
  /** A non-empty skill block found no user message (never the case for a run, which always has its prompt). */
  skillBlockWithoutUserMessage: boolean;
}

export type AssemblyInput = Pick<
  AgentLoopInput,
  'systemPrompt' | 'forcedSnippets' | 'configurationSkills' | 'forcedSkills' | 'prompt'
>;

/**
 * The one-time assembly of behaviour.md §8:
 * 1. the skill block goes into the first user message (§6);
 * 2. the effective system prompt becomes message 0 if non-empty;
 * 3. each forced snippet, composed on its own with its name as label, becomes
 *    one more leading system message in the order given — unless the system
 *    prompt already contains that exact block (it was selected by tag). As in
 *    nr_llm's `ToolLoopService::assemble`, nothing else is de-duplicated: a
 *    snippet forced twice is sent twice.
 */
export function assembleRunMessages(input: AssemblyInput): AssembledRun {
  const skills = buildSkillBlock(input.configurationSkills ?? [], input.forcedSkills ?? []);
  const injection = injectSkillBlock([{ role: 'user', content: input.prompt }], skills.block);

  const leading: ChatMessage[] = [];
  if (input.systemPrompt !== '') {
    leading.push({ role: 'system', content: input.systemPrompt });
  }
  for (const snippet of input.forcedSnippets ?? []) {
    const block = composeSnippets([{ label: snippet.name, snippet: snippet.snippet }]);
    if (block === '' || (input.systemPrompt !== '' && input.systemPrompt.includes(block))) {
      continue;
    }
    leading.push({ role: 'system', content: block });
  }

  return {
    messages: [...leading, ...injection.messages],
    skills,
    skillBlockWithoutUserMessage: injection.noUserMessage,
  };
}

/** The signal fired: stop at once. */
class RunCancelled extends Error {
  constructor() {
    super('The run was cancelled.');
    this.name = 'RunCancelled';
  }
}

/** Over budget even after dropping turns: the model is not called. */
class ContextTruncated extends Error {
  constructor() {
    super('The transcript does not fit the context window.');
    this.name = 'ContextTruncated';
  }
}

/** A provider call failed; `cause` is the adapter's error. */
class ProviderFailure extends Error {
  constructor(readonly failure: unknown) {
    super('The provider call failed.');
    this.name = 'ProviderFailure';
  }
}

/** A stream that ended without its `done` event. */
export class ProviderStreamError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ProviderStreamError';
  }
}

function className(error: unknown): string {
  if (error instanceof Error) {
    return error.constructor.name !== '' ? error.constructor.name : error.name;
  }
  return typeof error;
}

function errorMessage(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/** Milliseconds since `start` on the monotonic clock, two decimals. */
function elapsedMs(start: number): number {
  return Math.round((performance.now() - start) * 100) / 100;
}

/**
 * A list of its own for a step or a request: the transcript grows after it,
 * the list must not. The messages themselves are shared, as values: nothing
 * changes a message once it is made (see `ChatMessage`).
 */
function snapshot(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages.slice();
}

/**
 * Rejects with `RunCancelled` as soon as the signal fires, even if `promise`
 * never settles (a tool or adapter that ignores the signal). A late rejection
 * of `promise` is absorbed.
 */
function raceAbort<T>(promise: Promise<T>, signal: AbortSignal): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    if (signal.aborted) {
      promise.catch(() => undefined);
      reject(new RunCancelled());
      return;
    }
    const onAbort = (): void => reject(new RunCancelled());
    signal.addEventListener('abort', onAbort, { once: true });
    promise.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (error: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(error);
      },
    );
  });
}

type ParsedArguments = { ok: true; value: unknown } | { ok: false; raw: string };

/** A call's arguments: empty means `{}`; text that is not JSON is kept raw. */
function parseToolArguments(raw: string): ParsedArguments {
  if (raw.trim() === '') {
    return { ok: true, value: {} };
  }
  try {
    return { ok: true, value: JSON.parse(raw) as unknown };
  } catch {
    return { ok: false, raw };
  }
}

function requestedToolCall(call: ToolCall): RequestedToolCall {
  const text = call.function.arguments;
  const parsed = parseToolArguments(text);
  const requested: RequestedToolCall = { id: call.id, name: call.function.name, arguments: parsed.ok ? parsed.value : parsed.raw };
  // Stored only when needed, so a run rebuilt from its steps sends the model exactly what it sent before.
  const reencoded = parsed.ok ? (text.trim() === '' ? '{}' : JSON.stringify(parsed.value)) : parsed.raw;
  if (parsed.ok && reencoded !== text && text.trim() !== '') requested.rawArguments = text;
  // A JSON string would be read back as raw text: keep what was sent.
  if (parsed.ok && typeof parsed.value === 'string') requested.rawArguments = text;
  if (call.providerReplay !== undefined) requested.providerReplay = call.providerReplay;
  if (call.wireId !== undefined) requested.wireId = call.wireId;
  return requested;
}

/** The budget's next-call check stopped the run before the model was called. */
class BudgetExhausted extends Error {
  constructor() {
    super('The next call would go beyond the run\'s budget.');
    this.name = 'BudgetExhausted';
  }
}

/**
 * The driver: asks the state machine (`run-machine.ts`) for the next action,
 * performs it, records the step it produced (persist, then publish) and folds
 * that step into the run's progress, until the machine says to end or to
 * wait for a person.
 */
class AgentLoopRun {
  private progress: RunProgress = initialProgress();
  /**
   * The write of the last TOOL step, while the next call of the same turn
   * runs (`executeToolCall`); settled before anything else is recorded, so
   * steps are stored one at a time and in order.
   */
  private toolStepWrite: Promise<void> | null = null;
  private readonly signal: AbortSignal;
  private readonly maxRounds: number;
  private readonly offered: ToolRegistration[];
  private readonly offeredNames: Set<string>;
  private readonly definitions: ToolDefinition[];
  private readonly callOptions: CallOptions;
  private readonly budget: ContextBudget;
  private readonly rules: RunRules;

  constructor(
    private readonly input: AgentLoopInput,
    private readonly hooks: AgentLoopHooks,
  ) {
    this.signal = input.signal ?? new AbortController().signal;
    this.maxRounds = clampMaxRounds(input.maxRounds);
    this.offered = input.tools.registry.resolveOffered(input.tools.allowList);
    this.offeredNames = new Set(this.offered.map((tool) => tool.name));
    this.definitions = this.offered.map(toToolDefinition);
    const options: CallOptions = { ...input.callOptions };
    delete options.captureRaw;
    delete options['system_prompt'];
    if (input.captureRaw === true) {
      options.captureRaw = true;
    }
    this.callOptions = options;
    this.budget = contextBudget({
      contextLength: input.model.contextLength,
      runMaxTokens: input.runMaxTokens,
      modelMaxOutputTokens: input.model.maxOutputTokens,
    });
    const approvalRequired = new Set(input.approvalRequired ?? []);
    const registry = input.tools.registry;
    this.rules = {
      maxRounds: this.maxRounds,
      offersTools: this.offered.length > 0,
      needsApproval: (name) => this.offeredNames.has(name) && (approvalRequired.has(name) || registry.get(name)?.requiresApproval === true),
      isIdempotent: (name) => registry.get(name)?.idempotent === true,
      budget: { maxTotalTokens: input.budget?.maxTotalTokens ?? null, maxCost: input.budget?.maxCost ?? null },
    };
  }

  async execute(): Promise<LoopResult> {
    let outcome: LoopOutcome | SuspendedRun;
    try {
      outcome = await this.run();
    } catch (error) {
      // A TOOL step still being written when the run stopped (cancelled, a call that failed to start) is stored first.
      const writeError = await this.settleToolStepWrite().then(
        () => null,
        (failure: unknown) => failure,
      );
      if (error instanceof RunTakenOver || writeError instanceof RunTakenOver) return { status: 'TAKEN_OVER' };
      outcome = this.outcomeOfError(writeError ?? error);
    }
    if (outcome.status === 'WAITING_FOR_APPROVAL') return outcome;
    const end: EndStep = { kind: 'end', round: this.progress.round, durationMs: 0, ...outcome };
    try {
      await this.hooks.recordStep(end);
    } catch (error) {
      if (error instanceof RunTakenOver) return { status: 'TAKEN_OVER' };
      this.hooks.logger.error({ err: error }, 'Recording the end step of a run failed');
    }
    return outcome;
  }

  private async run(): Promise<LoopOutcome | SuspendedRun> {
    this.throwIfCancelled();
    const resume = this.input.resume;
    if (resume !== undefined) {
      this.progress = rebuildProgress(resume.steps, this.rules);
    } else {
      const unknown = this.input.tools.registry.unknownNames(this.input.tools.allowList);
      if (unknown.length > 0) {
        this.hooks.logger.warn({ tools: unknown }, 'The tool allow-list names unknown tools; they are ignored');
      }
    }

    if (this.progress.transcript === null) {
      const assembled = assembleRunMessages(this.input);
      this.logSkillIssues(assembled);
      if (this.input.dryRun === true) {
        await this.record({ kind: 'assembled', round: 0, durationMs: 0, messagesSent: snapshot(assembled.messages) });
        return this.outcome('dry_run');
      }
      this.progress.transcript = assembled.messages;
    }

    let afterCrash = resume?.afterCrash === true;
    for (;;) {
      this.throwIfCancelled();
      const action = nextAction(this.progress, this.rules, afterCrash);
      // Only the next call of the same turn overlaps the previous call's TOOL step write.
      if (action.kind !== 'run_tool') await this.settleToolStepWrite();
      switch (action.kind) {
        case 'call_model':
          await this.callModel(action.round, action.withTools ? this.definitions : []);
          break;
        case 'run_tool':
          await this.executeToolCall(action.call, action.refusal, action.afterApproval);
          break;
        case 'ask_approval': {
          const deadlineAt = approvalDeadline(Math.floor(Date.now() / 1000), this.input.approvalTimeoutSeconds);
          // plainJsonText: an option integer beyond 2^53 is a bigint; TYPO3 reads its digits as PHP's int.
          const suspendedState = plainJsonText(
            suspendedStateOf(this.progress, action.calls, { allowList: this.input.tools.allowList ?? null, callOptions: this.callOptions }),
          );
          await this.record(
            { kind: 'approval', round: this.progress.round, durationMs: 0, pendingToolCalls: action.calls, ...(deadlineAt !== null ? { deadlineAt } : {}) },
            {},
            { suspendedState },
          );
          return { status: 'WAITING_FOR_APPROVAL', pendingToolCalls: action.calls };
        }
        case 'wait_for_approval':
          return { status: 'WAITING_FOR_APPROVAL', pendingToolCalls: action.calls };
        case 'end':
          return this.outcome(action.reason, { truncated: action.truncated, finalContent: action.finalContent ?? undefined });
      }
      // Only the first action after a takeover can meet a call the dead instance was running.
      afterCrash = false;
    }
  }

  /**
   * Fit the context, record `context`, check the budget, record `request`,
   * call the model, record `llm`. A call the instance that died had begun
   * is made again: its CONTEXT and REQUEST steps, when the fit gives them
   * again as stored, are folded in without being stored twice, and the LLM
   * step says the call was sent again.
   */
  private async callModel(round: number, tools: ToolDefinition[]): Promise<ChatResult> {
    this.throwIfCancelled();
    const begun = takeInFlightCall(this.progress);
    const transcript = this.progress.transcript ?? [];
    const fit = fitContext(transcript, tools, this.budget, this.progress.calibration.factor);
    const context = fit.report;
    if (fit.deferred === 'no_budget') {
      this.hooks.logger.warn({ round, ...this.budget }, 'The context budget is not positive; the transcript is sent as is');
    } else if (fit.deferred === 'unpaired_tool_message') {
      this.hooks.logger.warn({ round }, 'A tool message answers no declared call; the transcript is sent as is');
    }
    const contextStored = begun !== null && begun.round === round && isStoredAgain(begun.context, context);
    await this.record({ kind: 'context', round, durationMs: 0, contextBudget: context }, {}, undefined, contextStored);
    if (contextDoesNotFit(context)) {
      this.hooks.logger.warn(
        { round, estimate: context.estimate, budget: context.budget },
        'The transcript does not fit the context window; the model is not called',
      );
      throw new ContextTruncated();
    }
    const prices = this.input.model.prices;
    const costPerPromptToken = prices === null ? null : estimateCost({ promptTokens: 1_000_000, completionTokens: 0, totalTokens: 1_000_000 }, prices);
    if (budgetWouldBeExceeded(this.progress, this.rules.budget, { promptEstimate: fit.sentEstimate, costPerPromptToken: costPerPromptToken === null ? null : costPerPromptToken / 1_000_000 })) {
      throw new BudgetExhausted();
    }

    const requestStep: RequestStep = { kind: 'request', round, durationMs: 0, messagesSent: snapshot(fit.messages), toolsOffered: tools.map((tool) => tool.name) };
    const requestStored =
      begun !== null && contextStored && begun.request !== null && isStoredAgain({ messagesSent: begun.request.messagesSent, toolsOffered: begun.request.toolsOffered }, { messagesSent: requestStep.messagesSent, toolsOffered: requestStep.toolsOffered });
    await this.record(requestStep, {}, undefined, requestStored);

    const request: ChatRequest = { messages: snapshot(fit.messages), options: { ...this.callOptions }, signal: this.signal };
    if (tools.length > 0) {
      request.tools = tools;
    }
    const started = performance.now();
    let result: ChatResult;
    try {
      result = await raceAbort(this.invokeProvider(request, round), this.signal);
    } catch (error) {
      if (error instanceof RunCancelled || this.signal.aborted) {
        throw new RunCancelled();
      }
      throw new ProviderFailure(error);
    }
    const durationMs = elapsedMs(started);
    this.throwIfCancelled();

    // The provider's counts are untrusted: clamped before they are added, stored or priced.
    const usage = sanitizeUsage(result.usage);
    await this.record(
      {
        kind: 'llm',
        round,
        durationMs,
        content: result.content,
        thinking: result.thinking,
        finishReason: result.finishReason,
        rawFinishReason: result.rawFinishReason,
        promptTokens: usage.promptTokens,
        completionTokens: usage.completionTokens,
        totalTokens: usage.totalTokens,
        estimatedCost: prices === null ? null : estimateCost(usage, prices),
        // Each call its own id, so each gets its own TOOL step and decision (the adapters' normalisation does this; an injected adapter may not).
        requestedToolCalls: uniqueToolCallIds(result.toolCalls).map(requestedToolCall),
        ...(result.warnings.length > 0 ? { warnings: [...result.warnings] } : {}),
        ...(this.input.captureRaw === true && result.raw !== undefined ? { raw: result.raw } : {}),
        ...(requestStored ? { resentAfterTakeover: true as const } : {}),
      },
      { usage },
    );
    return result;
  }

  private async invokeProvider(request: ChatRequest, round: number): Promise<ChatResult> {
    if (this.input.stream !== true) {
      return this.input.adapter.chat(request);
    }
    const iterator = this.input.adapter.stream(request)[Symbol.asyncIterator]();
    let exhausted = false;
    try {
      for (;;) {
        const next = await raceAbort(iterator.next(), this.signal);
        if (next.done === true) {
          exhausted = true;
          throw new ProviderStreamError('The provider stream ended without a result.');
        }
        const event = next.value;
        if (event.type === 'done') {
          return event.result;
        }
        this.emitDelta({ kind: event.type, text: event.text, round });
      }
    } finally {
      if (!exhausted) {
        // Let the adapter close its connection; its outcome no longer matters.
        try {
          void Promise.resolve(iterator.return?.()).catch(() => undefined);
        } catch {
          // A synchronous failure to close changes nothing either.
        }
      }
    }
  }

  private emitDelta(delta: RunDelta): void {
    if (this.hooks.onDelta === undefined) {
      return;
    }
    try {
      this.hooks.onDelta(delta);
    } catch (error) {
      this.hooks.logger.warn({ err: error }, 'A stream listener failed');
    }
  }

  /**
   * Runs one call of the open turn (or answers it with `refusal`), then
   * records its `tool` step.
   *
   * When the previous call's TOOL step is still being written and
   * `hooks.mayOverlapToolCall()` allows it, this call starts at once instead
   * of waiting for that write (on MySQL a commit is about as long as a fast
   * remote call): the previous step is still stored and published before
   * this one, and if its write fails (the lease was lost, the database is
   * gone) this call is aborted and the run stops as it would have. Without
   * that permission the write is awaited first, as for every other step.
   */
  private async executeToolCall(call: RequestedToolCall, refused: string | null, afterApproval: boolean): Promise<void> {
    this.throwIfCancelled();
    if (this.toolStepWrite !== null && this.hooks.mayOverlapToolCall?.() !== true) await this.settleToolStepWrite();
    const previousWrite = this.toolStepWrite;
    const name = call.name;
    const text = transcriptArguments(call);
    const parsed = parseToolArguments(text);
    const registry = this.input.tools.registry;
    const tool = registry.get(name);
    let result: string;
    let isError = true;
    let durationMs = 0;
    let remoteCall = false;

    if (refused !== null) {
      result = refused;
    } else if (afterApproval && (tool === undefined || !this.offeredNames.has(name))) {
      // Disabled or dropped from the allow-list while the run waited.
      result = refusal.noLongerPermitted(name);
    } else if (tool === undefined) {
      result = `Error: unknown tool "${name}"`;
    } else if (!this.offeredNames.has(name)) {
      result = `Error: tool "${name}" not permitted`;
    } else if (!parsed.ok) {
      result = `Error: invalid arguments for tool "${name}": arguments are not valid JSON`;
    } else {
      const check = registry.validateArguments(name, parsed.value);
      if (!check.ok) {
        result = `Error: invalid arguments for tool "${name}": ${check.message}`;
      } else {
        // Overlapping a write: a failed write aborts this call as a cancel would.
        const writeFailed = previousWrite === null ? null : new AbortController();
        previousWrite?.catch(() => writeFailed?.abort());
        const signal = writeFailed === null ? this.signal : AbortSignal.any([this.signal, writeFailed.signal]);
        const started = performance.now();
        try {
          const context = { signal, remoteCallsMade: this.progress.remoteCallsMade, countRemoteCall: () => void (remoteCall = true) };
          const running = (async () => tool.execute(check.args, context))();
          result = await raceAbort(running, signal);
          isError = false;
        } catch (error) {
          // The write's own error (RunTakenOver, the database) is what stops the run.
          if (writeFailed?.signal.aborted === true) await this.settleToolStepWrite();
          if (error instanceof RunCancelled || this.signal.aborted) {
            throw new RunCancelled();
          }
          if (error instanceof ToolInputError) {
            result = `Error: ${error.message}`;
          } else {
            // The exception may carry internals (URLs, SQL, keys): log it, tell the model only that it failed.
            this.hooks.logger.error({ tool: name, toolCallId: call.id, err: error }, 'A tool failed');
            result = `Error: tool "${name}" failed.`;
          }
        }
        durationMs = elapsedMs(started);
      }
    }

    await this.settleToolStepWrite();
    const step: ToolStep = {
      kind: 'tool',
      round: this.progress.round,
      durationMs,
      toolCallId: call.id,
      toolName: name,
      toolArguments: parsed.ok ? parsed.value : parsed.raw,
      toolResult: boundToolResult(result),
      toolIsError: isError,
      ...(remoteCall ? { remoteCall: true as const } : {}),
    };
    // Written in the background; the next action settles it (or overlaps it, if it is the turn's next call).
    const write = this.hooks.recordStep(step);
    write.catch(() => undefined);
    this.toolStepWrite = write;
    applyStep(this.progress, step, this.rules, {});
    this.throwIfCancelled();
  }

  /** Waits for the TOOL step being written, if any; rethrows its failure. */
  private async settleToolStepWrite(): Promise<void> {
    const write = this.toolStepWrite;
    if (write === null) return;
    try {
      await write;
    } finally {
      this.toolStepWrite = null;
    }
  }

  /**
   * Records a step (persist, then publish) and folds it into the progress.
   * `alreadyStored`: the step is one a dead instance stored before the
   * takeover; it is only folded in.
   */
  private async record(step: RunStep, details: StepDetails = {}, extras?: StepExtras, alreadyStored = false): Promise<void> {
    if (!alreadyStored) await (extras ? this.hooks.recordStep(step, extras) : this.hooks.recordStep(step));
    applyStep(this.progress, step, this.rules, details);
    this.throwIfCancelled();
  }

  private throwIfCancelled(): void {
    if (this.signal.aborted) {
      throw new RunCancelled();
    }
  }

  private logSkillIssues(assembled: AssembledRun): void {
    for (const skipped of assembled.skills.skipped) {
      if (skipped.reason === 'checksum_mismatch') {
        this.hooks.logger.warn(
          { skill: skipped.identifier },
          'Skill skipped: its body no longer matches the reviewed checksum',
        );
      } else {
        this.hooks.logger.warn(
          { skill: skipped.identifier, maxBytes: SKILL_BLOCK_MAX_BYTES },
          'Skill dropped: the skill block would exceed its byte cap',
        );
      }
    }
    if (assembled.skillBlockWithoutUserMessage) {
      this.hooks.logger.warn({}, 'No user message to carry the skill block; no skill was injected');
    }
  }

  private outcomeOfError(error: unknown): LoopOutcome {
    if (error instanceof RunCancelled || this.signal.aborted) {
      return this.outcome('cancelled');
    }
    if (error instanceof ContextTruncated) {
      return this.outcome('context_truncated', { truncated: true });
    }
    if (error instanceof BudgetExhausted) {
      return this.outcome('budget_exhausted');
    }
    if (error instanceof ProviderFailure) {
      const failure = error.failure;
      this.hooks.logger.warn(
        { round: this.progress.round, errorClass: className(failure), error: errorMessage(failure) },
        'A provider call failed; the run stops',
      );
      return this.outcome('provider_failed', { error: errorMessage(failure), errorClass: className(failure) });
    }
    this.hooks.logger.error({ round: this.progress.round, err: error }, 'The agent loop failed');
    return this.outcome('error', { error: INTERNAL_ERROR_MESSAGE, errorClass: className(error) });
  }

  private outcome(
    terminationReason: TerminationReason,
    details: { truncated?: boolean; finalContent?: string; error?: string; errorClass?: string } = {},
  ): LoopOutcome {
    const prices = this.input.model.prices;
    const usage = this.progress.usage;
    return {
      status: endStatusOf(terminationReason),
      terminationReason,
      iterations: this.progress.iterations,
      truncated: details.truncated ?? false,
      finalContent: details.finalContent ?? null,
      promptTokens: usage.promptTokens,
      completionTokens: usage.completionTokens,
      totalTokens: usage.promptTokens + usage.completionTokens,
      // Cost is linear in tokens, so pricing the summed usage equals summing
      // per-call costs, without the float drift of adding many small numbers.
      estimatedCost: prices === null ? null : estimateCost(usage, prices),
      error: details.error ?? null,
      errorClass: details.errorClass ?? null,
      dryRun: this.input.dryRun === true,
    };
  }
}

/** The arguments text of a stored call, as it went back to the model. */
function transcriptArguments(call: RequestedToolCall): string {
  return transcriptToolCall(call).function.arguments;
}

/**
 * Drives one run until it ends or waits for a person, and resolves with the
 * outcome (or the calls it waits on). A run's failures (provider errors,
 * cancellation, a step that cannot be recorded) do not reject: they end the
 * run (FAILED / CANCELLED) and are in the outcome and the `end` step.
 */
export function driveRun(input: AgentLoopInput, hooks: AgentLoopHooks): Promise<LoopResult> {
  return new AgentLoopRun(input, hooks).execute();
}

/**
 * Runs the agent loop of a run that needs no approval and resolves with its
 * outcome (see `driveRun`).
 */
export async function runAgentLoop(input: AgentLoopInput, hooks: AgentLoopHooks): Promise<LoopOutcome> {
  const result = await driveRun(input, hooks);
  if (result.status === 'WAITING_FOR_APPROVAL') throw new Error('The run waits for approval; use driveRun for runs that may.');
  if (result.status === 'TAKEN_OVER') throw new RunTakenOver();
  return result;
}
