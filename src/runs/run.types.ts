import { ArrayMaxSize, IsOptional } from 'class-validator';
import { Extensions, Field, Float, ID, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { connectionTypes } from '../graphql/connection';
import { JSONScalar, DateTimeScalar } from '../graphql/scalars';
import { CATALOGUE_ROWS, EMBEDDED_LIST, listRows } from '../graphql/query-limits';
import type { ChatMessage as WireMessage } from '../providers/adapters/types';
import { fromUnix } from '../shared/time';
import type { RunView } from './run.service';
import type { StoredStep } from './trace-bus';
import { storedInt } from './engine/usage-limits';
import { publicRunStatus } from './run-status';

export enum RunStatus {
  QUEUED = 'QUEUED',
  RUNNING = 'RUNNING',
  WAITING_FOR_APPROVAL = 'WAITING_FOR_APPROVAL',
  COMPLETED = 'COMPLETED',
  FAILED = 'FAILED',
  CANCELLED = 'CANCELLED',
}
registerEnumType(RunStatus, { name: 'RunStatus' });

export enum RunStepKind {
  ASSEMBLED = 'ASSEMBLED',
  CONTEXT = 'CONTEXT',
  REQUEST = 'REQUEST',
  LLM = 'LLM',
  APPROVAL = 'APPROVAL',
  TOOL = 'TOOL',
  END = 'END',
}
registerEnumType(RunStepKind, { name: 'RunStepKind' });

@ObjectType({ simpleResolvers: true })
export class ToolCall {
  @Field() id!: string;
  @Field() name!: string;
  @Field(() => JSONScalar) arguments!: unknown;
}

@ObjectType({ simpleResolvers: true, description: 'A person\'s decision on one pending tool call.' })
export class ToolDecision {
  @Field() toolCallId!: string;
  @Field() approved!: boolean;
  @Field(() => String, { nullable: true }) reason!: string | null;
  @Field(() => String, { nullable: true, description: 'The name of the API token that decided.' }) decidedBy!: string | null;
}

@InputType()
export class ToolDecisionInput {
  @Field() toolCallId!: string;
  @Field() approve!: boolean;
  @Field(() => String, { nullable: true, description: 'At most 1000 characters.' }) reason?: string | null;
}

@ObjectType({ simpleResolvers: true, description: 'A message as sent to the model (OpenAI-shaped).' })
export class ChatMessage {
  @Field() role!: string;
  @Field(() => String, { nullable: true }) content!: string | null;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [ToolCall], { nullable: true }) toolCalls!: ToolCall[] | null;
  @Field(() => String, { nullable: true }) toolCallId!: string | null;
}

@ObjectType({ simpleResolvers: true, description: 'One stored step of a run trace. Only the fields that apply to its kind are set.' })
export class RunStep {
  @Field(() => Int, { description: '1, 2, 3, … per run, no gaps.' }) sequence!: number;
  @Field(() => RunStepKind) kind!: RunStepKind;
  @Field(() => Int) round!: number;
  @Field(() => Float) durationMs!: number;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [ChatMessage], { nullable: true }) messagesSent!: ChatMessage[] | null;
  @Field(() => Int, {
    nullable: true,
    description: 'REQUEST steps: how many messages were sent (the length of messagesSent), so a trace can be shown without the transcript each REQUEST repeats; null for other kinds.',
  })
  messageCount!: number | null;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String], { nullable: true }) toolsOffered!: string[] | null;
  @Field(() => String, { nullable: true }) content!: string | null;
  @Field(() => String, { nullable: true }) thinking!: string | null;
  @Field(() => String, { nullable: true }) finishReason!: string | null;
  @Field(() => String, { nullable: true, description: 'The provider\'s own finish reason.' }) rawFinishReason!: string | null;
  @Field(() => Int, { nullable: true }) promptTokens!: number | null;
  @Field(() => Int, { nullable: true }) completionTokens!: number | null;
  @Field(() => Int, { nullable: true }) totalTokens!: number | null;
  @Field(() => Float, { nullable: true }) estimatedCost!: number | null;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [ToolCall], { nullable: true }) requestedToolCalls!: ToolCall[] | null;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String], { nullable: true, description: 'LLM steps: settings the provider ignored. REQUEST steps: why messagesSent lacks messages that were sent (a conversation turn\'s history, stored by reference, deleted since).' }) warnings!: string[] | null;
  @Field(() => Boolean, {
    nullable: true,
    description: 'LLM steps: true when the instance that took the run over made this call again (the one making it stopped before its answer was stored); the CONTEXT and REQUEST before it are that call\'s, stored once.',
  })
  resentAfterTakeover!: boolean | null;
  /** The stored provider body; exposed as `raw` by RunStepResolver (ADMIN only, redacted). */
  storedRaw!: unknown;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [ToolCall], { nullable: true, description: 'APPROVAL steps that asked for decisions: the calls waiting for them.' }) pendingToolCalls!: ToolCall[] | null;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [ToolDecision], { nullable: true, description: 'APPROVAL steps that resumed the run: the decisions.' }) decisions!: ToolDecision[] | null;
  @Field(() => String, { nullable: true }) toolCallId!: string | null;
  @Field(() => String, { nullable: true }) toolName!: string | null;
  @Field(() => JSONScalar, { nullable: true }) toolArguments!: unknown;
  @Field(() => String, { nullable: true }) toolResult!: string | null;
  @Field(() => Boolean, { nullable: true }) toolIsError!: boolean | null;
  @Field(() => JSONScalar, { nullable: true }) contextBudget!: unknown;
  @Field(() => RunStatus, { nullable: true }) status!: RunStatus | null;
  @Field(() => String, { nullable: true }) terminationReason!: string | null;
  @Field(() => String, { nullable: true }) error!: string | null;
}

function wireToMessage(message: WireMessage): ChatMessage {
  switch (message.role) {
    case 'assistant':
      return {
        role: 'assistant',
        content: message.content,
        toolCalls: message.tool_calls?.map((call) => ({ id: call.id, name: call.function.name, arguments: parseArguments(call.function.arguments) })) ?? null,
        toolCallId: null,
      };
    case 'tool':
      return { role: 'tool', content: message.content, toolCalls: null, toolCallId: message.tool_call_id };
    default:
      return { role: message.role, content: message.content, toolCalls: null, toolCallId: null };
  }
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text || '{}');
  } catch {
    return text;
  }
}

/** A stored call as the API shows it (the stored raw text and provider state stay inside). */
function publicToolCall(call: ToolCall): ToolCall {
  return { id: call.id, name: call.name, arguments: call.arguments };
}

const str = (value: unknown): string | null => (typeof value === 'string' ? value : null);
const num = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? value : null);
/** A token count as a GraphQL `Int`: a stored value out of its range must not turn a whole list into an error. */
const count = (value: unknown): number | null => (typeof value === 'number' && Number.isFinite(value) ? storedInt(value) : null);

/**
 * The bus hands the same step object to every live watcher, so with 1,000
 * subscribers the mapping is done once, not 1,000 times.
 */
const runStepViews = new WeakMap<StoredStep, RunStep>();

/** Maps a stored step to the API shape; tolerant of payloads written by other versions. */
export function toRunStep(step: StoredStep): RunStep {
  let view = runStepViews.get(step);
  if (!view) runStepViews.set(step, (view = new RunStepView(step)));
  return view;
}

const RUN_STEP_KINDS: ReadonlySet<string> = new Set(Object.values(RunStepKind));

/**
 * A stored step as the API shows it: one class, so that every view has the
 * same shape (it is read field by field for every watcher's result), with
 * `messagesSent` mapped when first read (a REQUEST repeats the whole
 * transcript, and a trace read without it skips the work).
 */
class RunStepView implements RunStep {
  sequence: number;
  kind: RunStepKind;
  round: number;
  durationMs: number;
  messageCount: number | null;
  toolsOffered: string[] | null;
  content: string | null;
  thinking: string | null;
  finishReason: string | null;
  rawFinishReason: string | null;
  promptTokens: number | null;
  completionTokens: number | null;
  totalTokens: number | null;
  estimatedCost: number | null;
  requestedToolCalls: ToolCall[] | null;
  pendingToolCalls: ToolCall[] | null;
  decisions: ToolDecision[] | null;
  warnings: string[] | null;
  resentAfterTakeover: boolean | null;
  storedRaw: unknown;
  toolCallId: string | null;
  toolName: string | null;
  toolArguments: unknown;
  toolResult: string | null;
  toolIsError: boolean | null;
  contextBudget: unknown;
  status: RunStatus | null;
  terminationReason: string | null;
  error: string | null;
  readonly #sent: WireMessage[] | null;
  #messages: ChatMessage[] | null | undefined = undefined;

  constructor(step: StoredStep) {
    const stored = String(step.kind).toUpperCase();
    const kind = RUN_STEP_KINDS.has(stored) ? (stored as RunStepKind) : RunStepKind.END;
    const sent = Array.isArray(step.messagesSent) ? (step.messagesSent as WireMessage[]) : null;
    this.sequence = step.sequence;
    this.kind = kind;
    this.round = step.round;
    this.durationMs = step.durationMs;
    // Counted by the stored kind: an unknown kind shows as END and counts nothing.
    this.messageCount = stored === RunStepKind.REQUEST && sent ? sent.length : null;
    this.toolsOffered = Array.isArray(step.toolsOffered) ? (step.toolsOffered as string[]) : null;
    this.content = str(step.content) ?? (stored === RunStepKind.END ? str(step.finalContent) : null);
    this.thinking = str(step.thinking);
    this.finishReason = str(step.finishReason);
    this.rawFinishReason = str(step.rawFinishReason);
    this.promptTokens = count(step.promptTokens);
    this.completionTokens = count(step.completionTokens);
    this.totalTokens = count(step.totalTokens);
    this.estimatedCost = num(step.estimatedCost);
    this.requestedToolCalls = Array.isArray(step.requestedToolCalls) ? (step.requestedToolCalls as ToolCall[]).map(publicToolCall) : null;
    this.pendingToolCalls = Array.isArray(step.pendingToolCalls) ? (step.pendingToolCalls as ToolCall[]).map(publicToolCall) : null;
    this.decisions = Array.isArray(step.decisions) ? (step.decisions as ToolDecision[]) : null;
    this.warnings = Array.isArray(step.warnings) ? (step.warnings as string[]) : null;
    this.resentAfterTakeover = step.resentAfterTakeover === true ? true : null;
    this.storedRaw = step.raw ?? null;
    this.toolCallId = str(step.toolCallId);
    this.toolName = str(step.toolName);
    this.toolArguments = step.toolArguments ?? null;
    this.toolResult = str(step.toolResult);
    this.toolIsError = typeof step.toolIsError === 'boolean' ? step.toolIsError : null;
    this.contextBudget = step.contextBudget ?? null;
    this.status = stored === RunStepKind.END ? (str(step.status) as RunStatus | null) : null;
    this.terminationReason = str(step.terminationReason);
    this.error = str(step.error);
    this.#sent = sent;
  }

  get messagesSent(): ChatMessage[] | null {
    if (this.#messages === undefined) this.#messages = this.#sent?.map(wireToMessage) ?? null;
    return this.#messages;
  }
}

@ObjectType({ simpleResolvers: true, description: 'An agent run. Its steps are the stored trace.' })
export class AgentRun {
  @Field(() => ID, { description: 'uuid' }) id!: string;
  @Field(() => RunStatus) status!: RunStatus;
  @Field(() => String, { nullable: true, description: 'completed, max_iterations, budget_exhausted, context_truncated, cancelled, provider_failed, dry_run, interrupted, invalid_output, error' })
  terminationReason!: string | null;
  @Field() dryRun!: boolean;
  @Field(() => String, { nullable: true }) configurationIdentifier!: string | null;
  @Field(() => Int) iterations!: number;
  @Field() truncated!: boolean;
  @Field(() => String, { nullable: true }) finalContent!: string | null;
  @Field(() => Int) promptTokens!: number;
  @Field(() => Int) completionTokens!: number;
  @Field(() => Int) totalTokens!: number;
  @Field(() => Float, { nullable: true, description: 'US dollars; null when the model is unpriced.' }) estimatedCost!: number | null;
  @Field(() => String, { nullable: true }) error!: string | null;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [ToolCall], { description: 'The calls waiting for a decision (resolveToolApproval); [] otherwise.' }) pendingToolCalls!: ToolCall[];
  @Field(() => DateTimeScalar, { nullable: true, description: 'A run waiting for approval with approvalTimeoutSeconds: when its pending calls are refused as not approved if nobody decides.' })
  approvalDeadline!: Date | null;
  @Field(() => DateTimeScalar, { nullable: true }) startedAt!: Date | null;
  @Field(() => DateTimeScalar, { nullable: true }) finishedAt!: Date | null;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => Int, { description: 'The TYPO3 backend user the run is booked to (the starting token\'s beUser; 0 = none).' }) beUser!: number;
  runUid!: number;
  configurationUid!: number;
}

export function toAgentRun(view: RunView): AgentRun {
  const { row } = view;
  return {
    id: row.uuid,
    status: publicRunStatus(row.status) as RunStatus,
    terminationReason: row.terminationReason || null,
    dryRun: view.dryRun,
    configurationIdentifier: row.configurationIdentifier || null,
    // Rows written by other programs or older versions may hold counts no GraphQL Int can carry.
    iterations: storedInt(Number(row.iterations)),
    truncated: row.truncated,
    finalContent: view.finalContent,
    promptTokens: storedInt(Number(row.totalPromptTokens)),
    completionTokens: storedInt(Number(row.totalCompletionTokens)),
    totalTokens: storedInt(Number(row.totalTokens)),
    estimatedCost: view.endCost !== undefined ? view.endCost : Number(row.estimatedCost) || 0,
    error: view.error,
    pendingToolCalls: view.pendingToolCalls.map((call) => publicToolCall(call as ToolCall)),
    approvalDeadline: view.approvalDeadline ? fromUnix(view.approvalDeadline) : null,
    startedAt: row.startedAt ? fromUnix(row.startedAt) : null,
    finishedAt: row.finishedAt ? fromUnix(row.finishedAt) : null,
    createdAt: fromUnix(row.crdate),
    beUser: storedInt(Number(row.beUser)),
    runUid: row.uid,
    configurationUid: row.configurationUid,
  };
}

export const { ConnectionType: AgentRunConnection } = connectionTypes(AgentRun, 'AgentRun', 'A page of runs, newest first (created, then uid), with cursors.');

@InputType({ description: 'Filters of runsConnection; given ones combine with AND.' })
export class RunFilter {
  @Field(() => [RunStatus], { nullable: true, description: 'Runs showing any of these statuses.' }) status?: RunStatus[] | null;
  @Field(() => String, { nullable: true, description: 'Runs of the configuration with this identifier (as the run recorded it).' }) configuration?: string | null;
  @Field(() => String, { nullable: true, description: 'Runs started with this release label (startRun(input: {label})).' }) label?: string | null;
  @Field(() => DateTimeScalar, { nullable: true, description: 'Runs created at or after this time (createdAt, whole seconds).' }) createdFrom?: Date | null;
  @Field(() => DateTimeScalar, { nullable: true, description: 'Runs created before this time.' }) createdBefore?: Date | null;
}

@ObjectType({ simpleResolvers: true, description: 'A live piece of model output while a call streams. Not stored: the LLM step holds the final text.' })
export class RunDelta {
  @Field({ description: 'content or thinking' }) kind!: string;
  @Field() text!: string;
  @Field(() => Int) round!: number;
  @Field(() => Int, { description: 'Characters (UTF-16 code units) of this kind the call streamed before this piece: a gap shows a missed piece, whose text the stored LLM step holds.' }) offset!: number;
}

@ObjectType({ simpleResolvers: true, description: 'A tool the agent loop can offer.' })
export class ToolInfo {
  @Field() name!: string;
  @Field() description!: string;
  @Field(() => JSONScalar, { description: 'JSON schema of the arguments.' }) parameters!: Record<string, unknown>;
  @Field() enabledByDefault!: boolean;
  @Field({ description: 'Each call waits for a person\'s approval (resolveToolApproval).' }) requiresApproval!: boolean;
  @Field({ description: 'The group TYPO3\'s group switches and a configuration\'s allowedToolGroups name: `promptwire` for the built-ins, `mcp_<server>` for an MCP server\'s tools.' }) group!: string;
}

/** Each forced snippet or skill is looked up and sent on every call: a run names a handful, never thousands. */
export const MAX_FORCED_ITEMS = 100;

@InputType()
export class StartRunInput {
  @Field({ description: 'Configuration identifier.' }) configuration!: string;
  @Field() prompt!: string;
  @Field(() => [String], { nullable: true, description: 'Allow-list: absent = the tools enabled by default; [] = none.' }) tools?: string[] | null;
  @IsOptional()
  @ArrayMaxSize(MAX_FORCED_ITEMS)
  @Field(() => [String], { nullable: true, description: `Snippet identifiers sent as extra leading system messages (at most ${MAX_FORCED_ITEMS}).` })
  forcedSnippets?: string[] | null;
  @IsOptional()
  @ArrayMaxSize(MAX_FORCED_ITEMS)
  @Field(() => [String], { nullable: true, description: `Skill identifiers injected after the configuration's (at most ${MAX_FORCED_ITEMS}).` })
  forcedSkills?: string[] | null;
  @Field(() => String, { nullable: true, description: 'Replaces the configuration\'s prompt; the snippet block is still appended.' }) systemPrompt?: string | null;
  @Field(() => Int, { nullable: true, description: 'Default 5, clamped to 1..20.' }) maxRounds?: number | null;
  @Field(() => Int, { nullable: true }) maxTokens?: number | null;
  @Field(() => Float, { nullable: true }) temperature?: number | null;
  @Field(() => Boolean, { nullable: true, defaultValue: false, description: 'Keep raw provider responses on LLM steps (ADMIN only).' }) captureRaw?: boolean | null;
  @Field(() => Boolean, { nullable: true, defaultValue: false, description: 'Assemble and record the messages; call no provider.' }) dryRun?: boolean | null;
  @Field(() => Boolean, { nullable: true, defaultValue: true, description: 'Stream model output and publish it on runDeltas.' }) stream?: boolean | null;
  @IsOptional()
  @ArrayMaxSize(MAX_FORCED_ITEMS)
  @Field(() => [String], { nullable: true, description: 'Tools whose calls wait for a person\'s approval in this run (besides those that always do).' })
  approvalRequired?: string[] | null;
  @Field(() => Int, { nullable: true, description: 'Budget: the run ends budget_exhausted before a call that would take its tokens beyond this.' }) maxTotalTokens?: number | null;
  @Field(() => Float, { nullable: true, description: 'Budget in US dollars, same rule.' }) maxCost?: number | null;
  @Field(() => Int, {
    nullable: true,
    description: 'Seconds the run waits for a decision each time it waits for approval (1 to 2592000, 30 days); then every pending call of the turn gets "Error: tool "NAME" requires approval that was not given." and the run goes on. Absent: it waits until someone decides or cancels.',
  })
  approvalTimeoutSeconds?: number | null;
  @Field(() => String, {
    nullable: true,
    description: 'Run the configuration\'s release with this label (publishConfiguration): its frozen system prompt, call options, model and skills, whatever was edited since. Unknown label: NOT_FOUND. Cannot be combined with systemPrompt; maxTokens and temperature still apply.',
  })
  label?: string | null;
}
