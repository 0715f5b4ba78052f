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
  Usage,
} from '../../providers/adapters/types';
import { estimateCost, type ModelPrices } from '../../providers/cost';
import { composeSnippets } from '../../snippets/snippet-composer';
import { lowerCaseAscii, trimWhitespace } from '../../snippets/tag-rules';
import { ToolInputError, toToolDefinition, type ToolRegistration, type ToolRegistry } from '../tools/tool-registry';
import { INITIAL_CALIBRATION, contextBudget, fitContext, nextCalibration, type ContextBudget } from './context-window';
import type {
  EndStep,
  LoopOutcome,
  RequestedToolCall,
  RunDelta,
  RunOutcomeStatus,
  RunStep,
  TerminationReason,
} from './run-step';
import { SKILL_BLOCK_MAX_BYTES, buildSkillBlock, injectSkillBlock, type SkillBlock, type SkillInput } from './skill-block';
import { boundToolResult } from './tool-result';
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
   * 0 and raw capture is `captureRaw` below. `max_tokens` is also the
   * response reserve of the context budget.
   */
  callOptions: CallOptions;
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
}

/** The part of a pino logger the loop uses. */
export interface AgentLoopLogger {
  warn(details: object, message: string): void;
  error(details: object, message: string): void;
}

export interface AgentLoopHooks {
  /** Persist, then publish. Awaited before the loop goes on; a failure ends the run with reason `error`. */
  recordStep(step: RunStep): Promise<void>;
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
 *    prompt already contains that exact block, or an earlier forced snippet
 *    had the same identifier or the same block.
 */
export function assembleRunMessages(input: AssemblyInput): AssembledRun {
  const skills = buildSkillBlock(input.configurationSkills ?? [], input.forcedSkills ?? []);
  const injection = injectSkillBlock([{ role: 'user', content: input.prompt }], skills.block);

  const leading: ChatMessage[] = [];
  if (input.systemPrompt !== '') {
    leading.push({ role: 'system', content: input.systemPrompt });
  }
  const seenIdentifiers = new Set<string>();
  const seenBlocks = new Set<string>();
  for (const snippet of input.forcedSnippets ?? []) {
    const block = composeSnippets([{ label: snippet.name, snippet: snippet.snippet }]);
    const identifier = lowerCaseAscii(trimWhitespace(snippet.identifier));
    if (block === '' || input.systemPrompt.includes(block) || seenBlocks.has(block) || seenIdentifiers.has(identifier)) {
      continue;
    }
    seenBlocks.add(block);
    seenIdentifiers.add(identifier);
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

function snapshot(messages: readonly ChatMessage[]): ChatMessage[] {
  return structuredClone(messages as ChatMessage[]);
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
  const parsed = parseToolArguments(call.function.arguments);
  return { id: call.id, name: call.function.name, arguments: parsed.ok ? parsed.value : parsed.raw };
}

function addUsage(total: Usage, usage: Usage): void {
  total.promptTokens += usage.promptTokens;
  total.completionTokens += usage.completionTokens;
  total.totalTokens = total.promptTokens + total.completionTokens;
  if (usage.cachedInputTokens !== undefined) {
    total.cachedInputTokens = (total.cachedInputTokens ?? 0) + usage.cachedInputTokens;
  }
  if (usage.cacheWriteTokens !== undefined) {
    total.cacheWriteTokens = (total.cacheWriteTokens ?? 0) + usage.cacheWriteTokens;
  }
  if (usage.reasoningTokens !== undefined) {
    total.reasoningTokens = (total.reasoningTokens ?? 0) + usage.reasoningTokens;
  }
}

class AgentLoopRun {
  private transcript: ChatMessage[] = [];
  private round = 0;
  private iterations = 0;
  private calibration = INITIAL_CALIBRATION;
  private readonly usage: Usage = { promptTokens: 0, completionTokens: 0, totalTokens: 0 };
  private readonly signal: AbortSignal;
  private readonly maxRounds: number;
  private readonly offered: ToolRegistration[];
  private readonly offeredNames: Set<string>;
  private readonly definitions: ToolDefinition[];
  private readonly callOptions: CallOptions;
  private readonly budget: ContextBudget;

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
      callMaxTokens: input.callOptions.max_tokens,
      modelMaxOutputTokens: input.model.maxOutputTokens,
    });
  }

  async execute(): Promise<LoopOutcome> {
    let outcome: LoopOutcome;
    try {
      outcome = await this.run();
    } catch (error) {
      outcome = this.outcomeOfError(error);
    }
    const end: EndStep = { kind: 'end', round: this.round, durationMs: 0, ...outcome };
    try {
      await this.hooks.recordStep(end);
    } catch (error) {
      this.hooks.logger.error({ err: error }, 'Recording the end step of a run failed');
    }
    return outcome;
  }

  private async run(): Promise<LoopOutcome> {
    this.throwIfCancelled();
    const unknown = this.input.tools.registry.unknownNames(this.input.tools.allowList);
    if (unknown.length > 0) {
      this.hooks.logger.warn({ tools: unknown }, 'The tool allow-list names unknown tools; they are ignored');
    }

    const assembled = assembleRunMessages(this.input);
    this.logSkillIssues(assembled);
    this.transcript = assembled.messages;

    if (this.input.dryRun === true) {
      await this.record({ kind: 'assembled', round: 0, durationMs: 0, messagesSent: snapshot(this.transcript) });
      return this.outcome('COMPLETED', 'dry_run');
    }

    if (this.offered.length === 0) {
      // No tools offered at all: one plain call.
      this.round = 1;
      const result = await this.callModel([]);
      this.iterations = 1;
      return this.outcome('COMPLETED', 'completed', { finalContent: result.content });
    }

    for (let round = 1; round <= this.maxRounds; round += 1) {
      this.round = round;
      const result = await this.callModel(this.definitions);
      this.iterations = round;
      if (result.toolCalls.length === 0) {
        return this.outcome('COMPLETED', 'completed', { finalContent: result.content });
      }
      this.appendAssistantTurn(result);
      for (const call of result.toolCalls) {
        await this.executeToolCall(call);
      }
    }

    // The rounds are used up and the model still asks for tools: one last
    // call with none offered gives the answer.
    this.round = this.maxRounds + 1;
    const synthesis = await this.callModel([]);
    return this.outcome('COMPLETED', 'max_iterations', { truncated: true, finalContent: synthesis.content });
  }

  /** Fit the context, record `context` and `request`, call the model, record `llm`. */
  private async callModel(tools: ToolDefinition[]): Promise<ChatResult> {
    this.throwIfCancelled();
    const round = this.round;
    const fit = fitContext(this.transcript, tools, this.budget.budget, this.calibration);
    await this.record({
      kind: 'context',
      round,
      durationMs: 0,
      contextBudget: {
        ...this.budget,
        estimate: fit.estimate,
        droppedTurns: fit.droppedTurns,
        calibration: this.calibration,
        fits: fit.fits,
      },
    });
    if (!fit.fits) {
      this.hooks.logger.warn(
        { round, estimate: fit.estimate, budget: this.budget.budget },
        'The transcript does not fit the context window; the model is not called',
      );
      throw new ContextTruncated();
    }

    await this.record({
      kind: 'request',
      round,
      durationMs: 0,
      messagesSent: snapshot(fit.messages),
      toolsOffered: tools.map((tool) => tool.name),
    });

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
    addUsage(this.usage, usage);
    this.calibration = nextCalibration(this.calibration, usage.promptTokens, fit.rawEstimate);
    const prices = this.input.model.prices;
    await this.record({
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
      requestedToolCalls: result.toolCalls.map(requestedToolCall),
      ...(result.warnings.length > 0 ? { warnings: [...result.warnings] } : {}),
      ...(this.input.captureRaw === true && result.raw !== undefined ? { raw: result.raw } : {}),
    });
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

  /** The assistant turn as it goes back to the model: content and tool calls, empty arguments as `{}`. */
  private appendAssistantTurn(result: ChatResult): void {
    this.transcript.push({
      role: 'assistant',
      content: result.content === '' ? null : result.content,
      tool_calls: result.toolCalls.map((call) => ({
        id: call.id,
        type: 'function',
        function: {
          name: call.function.name,
          arguments: call.function.arguments.trim() === '' ? '{}' : call.function.arguments,
        },
        // Provider state the next round must send back (Gemini thought signatures, Anthropic signed thinking).
        ...(call.providerReplay !== undefined ? { providerReplay: call.providerReplay } : {}),
      })),
    });
  }

  private async executeToolCall(call: ToolCall): Promise<void> {
    this.throwIfCancelled();
    const name = call.function.name;
    const parsed = parseToolArguments(call.function.arguments);
    const registry = this.input.tools.registry;
    const tool = registry.get(name);
    let result: string;
    let isError = true;
    let durationMs = 0;

    if (tool === undefined) {
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
        const started = performance.now();
        try {
          const running = (async () => tool.execute(check.args, { signal: this.signal }))();
          result = await raceAbort(running, this.signal);
          isError = false;
        } catch (error) {
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

    const bounded = boundToolResult(result);
    this.transcript.push({ role: 'tool', tool_call_id: call.id, content: bounded });
    await this.record({
      kind: 'tool',
      round: this.round,
      durationMs,
      toolCallId: call.id,
      toolName: name,
      toolArguments: parsed.ok ? parsed.value : parsed.raw,
      toolResult: bounded,
      toolIsError: isError,
    });
  }

  private async record(step: RunStep): Promise<void> {
    await this.hooks.recordStep(step);
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
      return this.outcome('CANCELLED', 'cancelled');
    }
    if (error instanceof ContextTruncated) {
      return this.outcome('COMPLETED', 'context_truncated', { truncated: true });
    }
    if (error instanceof ProviderFailure) {
      const failure = error.failure;
      this.hooks.logger.warn(
        { round: this.round, errorClass: className(failure), error: errorMessage(failure) },
        'A provider call failed; the run stops',
      );
      return this.outcome('FAILED', 'provider_failed', {
        error: errorMessage(failure),
        errorClass: className(failure),
      });
    }
    this.hooks.logger.error({ round: this.round, err: error }, 'The agent loop failed');
    return this.outcome('FAILED', 'error', { error: INTERNAL_ERROR_MESSAGE, errorClass: className(error) });
  }

  private outcome(
    status: RunOutcomeStatus,
    terminationReason: TerminationReason,
    details: { truncated?: boolean; finalContent?: string; error?: string; errorClass?: string } = {},
  ): LoopOutcome {
    const prices = this.input.model.prices;
    return {
      status,
      terminationReason,
      iterations: this.iterations,
      truncated: details.truncated ?? false,
      finalContent: details.finalContent ?? null,
      promptTokens: this.usage.promptTokens,
      completionTokens: this.usage.completionTokens,
      totalTokens: this.usage.promptTokens + this.usage.completionTokens,
      // Cost is linear in tokens, so pricing the summed usage equals summing
      // per-call costs, without the float drift of adding many small numbers.
      estimatedCost: prices === null ? null : estimateCost(this.usage, prices),
      error: details.error ?? null,
      errorClass: details.errorClass ?? null,
      dryRun: this.input.dryRun === true,
    };
  }
}

/**
 * Runs the agent loop for one run and resolves with its outcome. A run's
 * failures (provider errors, cancellation, a step that cannot be recorded)
 * do not reject: they end the run (FAILED / CANCELLED) and are in the outcome
 * and the `end` step.
 */
export function runAgentLoop(input: AgentLoopInput, hooks: AgentLoopHooks): Promise<LoopOutcome> {
  return new AgentLoopRun(input, hooks).execute();
}
