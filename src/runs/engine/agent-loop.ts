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
 *
 * This file is the driver; its contract (input, hooks, results) is
 * loop-contract.ts, tool calls are tool-dispatch.ts, the message assembly is
 * src/prompt/run-messages.ts, and what to do next is run-machine.ts.
 */

import { performance } from 'node:perf_hooks';
import type { CallOptions, ChatMessage, ChatRequest, ChatResult, ToolDefinition } from '../../providers/adapters/types';
import { uniqueToolCallIds } from '../../providers/adapters/tool-calls';
import { estimateCost } from '../../providers/cost';
import { assembleRunMessages, assemblyWarnings } from '../../prompt/run-messages';
import { answerCheckFields, INVALID_OUTPUT, withRepairedAnswer } from '../../prompt/structured-output';
import { plainJsonText } from '../../shared/php-json';
import { toToolDefinition, type ToolRegistration } from '../tools/tool-registry';
import { contextBudget, fitContext, type ContextBudget } from './context-window';
import { clampMaxRounds, INTERNAL_ERROR_MESSAGE, RunTakenOver, type AgentLoopHooks, type AgentLoopInput, type LoopResult, type StepExtras, type SuspendedRun } from './loop-contract';
import { className, elapsedMs, errorMessage, raceAbort, RunCancelled } from './loop-support';
import { askLedger } from './call-ledger';
import type { EndStep, LoopOutcome, RequestStep, RequestedToolCall, LoopDelta, LoopStep, TerminationReason, ToolStep } from './loop-step';
import { approvalDeadline } from './approval-decision';
import { invokeProvider, ProviderFailure } from './provider-call';
import { dispatchToolCall, requestedToolCall } from './tool-dispatch';
import { boundToolResult } from './tool-result';
import {
  applyStep,
  budgetWouldBeExceeded,
  contextDoesNotFit,
  endStatusOf,
  initialProgress,
  isStoredAgain,
  nextAction,
  rebuildProgress,
  takeInFlightCall,
  type RunProgress,
  type RunRules,
  type StepDetails,
} from './run-machine';
import { historySentOf } from './history-sent';
import { suspendedStateOf } from './suspended-state';
import { sanitizeUsage } from './usage-limits';

/**
 * A list of its own for a step or a request: the transcript grows after it,
 * the list must not. The messages themselves are shared, as values: nothing
 * changes a message once it is made (see `ChatMessage`).
 */
function snapshot(messages: readonly ChatMessage[]): ChatMessage[] {
  return messages.slice();
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
      const assembled = this.input.assembled ?? assembleRunMessages(this.input);
      for (const warning of assemblyWarnings(assembled)) this.hooks.logger.warn(warning.fields, warning.message);
      if (this.input.dryRun === true) {
        await this.record({ kind: 'assembled', round: 0, durationMs: 0, messagesSent: snapshot(assembled.messages) });
        return this.outcome('dry_run');
      }
      // A copy: the transcript grows with every round, and an assembly handed in belongs to the input.
      this.progress.transcript = [...assembled.messages];
    }

    let afterCrash = resume?.afterCrash === true;
    for (;;) {
      this.throwIfCancelled();
      const action = nextAction(this.progress, this.rules, afterCrash);
      // Only the next call of the same turn overlaps the previous call's TOOL step write.
      if (action.kind !== 'run_tool') await this.settleToolStepWrite();
      switch (action.kind) {
        case 'call_model': {
          if (action.repair === true) this.progress.transcript = withRepairedAnswer(this.progress.transcript ?? [], this.progress.lastAnswer?.content ?? '');
          const ended = await this.callModel(action.round, action.withTools ? this.definitions : []);
          if (ended !== null) return ended;
          break;
        }
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
          return this.outcome(action.reason, { truncated: action.truncated, finalContent: action.finalContent ?? undefined, model: action.finalContent !== null ? this.progress.lastAnswer?.model : undefined, ...(action.reason === 'invalid_output' ? INVALID_OUTPUT : {}) });
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
   * step says the call was sent again. Resolves with the run's end when the
   * transcript does not fit or the call would go beyond the budget (the
   * model is not called), else null.
   */
  private async callModel(round: number, tools: ToolDefinition[]): Promise<LoopOutcome | null> {
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
    if (contextDoesNotFit(context) && this.input.sendOverBudget === true) {
      this.hooks.logger.warn({ round, estimate: context.estimate, budget: context.budget }, 'The transcript does not fit the context window even at its floor; it is sent anyway');
    } else if (contextDoesNotFit(context)) {
      this.hooks.logger.warn(
        { round, estimate: context.estimate, budget: context.budget },
        'The transcript does not fit the context window; the model is not called',
      );
      return this.outcome('context_truncated', { truncated: true });
    }
    const prices = this.input.model.prices;
    const costPerPromptToken = estimateCost({ promptTokens: 1_000_000, completionTokens: 0, totalTokens: 1_000_000 }, prices);
    if (budgetWouldBeExceeded(this.progress, this.rules.budget, { promptEstimate: fit.sentEstimate, costPerPromptToken: costPerPromptToken === null ? null : costPerPromptToken / 1_000_000 })) {
      return this.outcome('budget_exhausted');
    }
    // The usage ledger's budgets (per user, per configuration) before every call; a refusal names the limit.
    const permit = await askLedger(this.hooks.ledger, tools.length > 0);
    if (!permit.allowed) return this.outcome('budget_exhausted', { error: permit.message, errorClass: 'BudgetExceeded' });

    // A conversation's history is stored by reference (history-sent); the step as published keeps every message.
    const historySent = this.input.historyAt && this.input.history ? historySentOf(fit.messages, this.input.history, this.input.historyAt) : null;
    const requestStep: RequestStep = { kind: 'request', round, durationMs: 0, messagesSent: snapshot(fit.messages), toolsOffered: tools.map((tool) => tool.name), ...(historySent ? { historySent } : {}) };
    const requestStored =
      begun !== null && contextStored && begun.request !== null && isStoredAgain({ messagesSent: begun.request.messagesSent, toolsOffered: begun.request.toolsOffered }, { messagesSent: requestStep.messagesSent, toolsOffered: requestStep.toolsOffered });
    // A call not made frees what the ledger held for it.
    await this.record(requestStep, {}, undefined, requestStored).catch((error: unknown) => permit.release().then(() => Promise.reject(error)));

    const request: ChatRequest = { messages: snapshot(fit.messages), options: { ...this.callOptions }, signal: this.signal };
    if (tools.length > 0) {
      request.tools = tools;
    }
    const started = performance.now();
    let result: ChatResult;
    try {
      const streamed = { content: 0, thinking: 0 };
      const onDelta = (kind: LoopDelta['kind'], text: string) => {
        this.emitDelta({ kind, text, round, offset: streamed[kind] });
        streamed[kind] += text.length;
      };
      result = await raceAbort(invokeProvider(this.input.adapter, this.input.stream === true, request, this.signal, onDelta), this.signal);
    } catch (error) {
      await permit.release(error);
      if (error instanceof RunCancelled || this.signal.aborted) {
        throw new RunCancelled();
      }
      throw new ProviderFailure(error);
    }
    const durationMs = elapsedMs(started);
    // The provider's counts are untrusted: clamped before they are added, stored, priced or booked.
    const usage = sanitizeUsage(result.usage);
    const estimatedCost = estimateCost(usage, prices);
    await permit.book(usage, estimatedCost, { latencyMs: durationMs, responseModel: result.model ?? '' });
    this.throwIfCancelled();
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
        estimatedCost,
        // Each call its own id, so each gets its own TOOL step and decision (the adapters' normalisation does this; an injected adapter may not).
        requestedToolCalls: uniqueToolCallIds(result.toolCalls).map(requestedToolCall),
        ...(result.warnings.length > 0 ? { warnings: [...result.warnings] } : {}),
        ...(result.model ? { model: result.model } : {}),
        ...(this.input.captureRaw === true && result.raw !== undefined ? { raw: result.raw } : {}),
        ...(this.input.structuredOutput && result.toolCalls.length === 0 ? answerCheckFields(result.content, this.input.structuredOutput.schemaJson) : {}),
        ...(requestStored ? { resentAfterTakeover: true as const } : {}),
      },
      { usage },
    );
    return null;
  }

  private emitDelta(delta: LoopDelta): void {
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
    const { parsed, result, isError, durationMs, remoteCall } = await dispatchToolCall(call, refused, afterApproval, {
      registry: this.input.tools.registry,
      offeredNames: this.offeredNames,
      signal: this.signal,
      remoteCallsMade: this.progress.remoteCallsMade,
      previousWrite: this.toolStepWrite,
      settlePreviousWrite: () => this.settleToolStepWrite(),
      logger: this.hooks.logger,
    });

    await this.settleToolStepWrite();
    const step: ToolStep = {
      kind: 'tool',
      round: this.progress.round,
      durationMs,
      toolCallId: call.id,
      toolName: call.name,
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
  private async record(step: LoopStep, details: StepDetails = {}, extras?: StepExtras, alreadyStored = false): Promise<void> {
    if (!alreadyStored) await (extras ? this.hooks.recordStep(step, extras) : this.hooks.recordStep(step));
    applyStep(this.progress, step, this.rules, details);
    this.throwIfCancelled();
  }

  private throwIfCancelled(): void {
    if (this.signal.aborted) {
      throw new RunCancelled();
    }
  }

  private outcomeOfError(error: unknown): LoopOutcome {
    if (error instanceof RunCancelled || this.signal.aborted) {
      return this.outcome('cancelled');
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
    details: { truncated?: boolean; finalContent?: string; error?: string; errorClass?: string; model?: string } = {},
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
      estimatedCost: estimateCost(usage, prices),
      error: details.error ?? null,
      errorClass: details.errorClass ?? null,
      dryRun: this.input.dryRun === true,
      ...(details.model ? { model: details.model } : {}),
    };
  }
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
