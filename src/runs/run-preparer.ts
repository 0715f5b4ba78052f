/**
 * Preparing a run: the `startRun` input checked, and everything the driver
 * needs resolved once (configuration, model, provider, adapter, snippets,
 * skills, tools, call options and the effective system prompt through the
 * pure prompt functions). The same preparation serves a new run and a run
 * that goes on later (after approval, or on another instance) from its
 * stored request.
 */
import { Role, roleAtLeast, type Caller } from '../auth/roles';
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import { type ConfigurationService } from '../configurations/configuration.service';
import { callOptionsOf, effectiveSystemPromptOf, selectedSnippetsOf } from '../prompt/configuration-prompt';
import type { Logger } from '../logger';
import { createChatAdapter } from '../providers/adapters/registry';
import type { CallOptions, ChatAdapter, ChatMessage } from '../providers/adapters/types';
import { isPriced } from '../providers/cost';
import type { ModelEntity } from '../providers/model.entity';
import type { ModelService } from '../providers/model.service';
import type { ProviderService } from '../providers/provider.service';
import { BadUserInputError, ForbiddenError, NotFoundError } from '../shared/errors';
import { phpValueOf, plainValueOf, type PhpArray } from '../shared/php-json';
import type { SkillEntity } from '../skills/skill.entity';
import type { SkillService } from '../skills/skill.service';
import { ActiveSnippetIndex } from '../prompt/snippet-index';
import type { SnippetService } from '../snippets/snippet.service';
import type { LedgerAccount } from './engine/call-ledger';
import type { AgentLoopInput } from './engine/loop-contract';
import { releaseCallOptions, checkLabel } from '../releases/release-rules';
import { skillInputOf, type ReleaseService, type StoredRelease } from '../releases/release.service';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import type { ExternalToolSource, ToolRegistry } from './tools/tool-registry';
import { allowedToolGroupsOf, isToolSwitchedOn, NO_SWITCHES, type ToolSwitchSource } from './tools/tool-switches';
import type { RunTaskOrigin } from './run-queries';

export interface StartRunRequest {
  configuration: string;
  prompt: string;
  tools?: string[] | null;
  forcedSnippets?: string[] | null;
  forcedSkills?: string[] | null;
  systemPrompt?: string | null;
  maxRounds?: number | null;
  maxTokens?: number | null;
  temperature?: number | null;
  captureRaw?: boolean | null;
  dryRun?: boolean | null;
  /** Stream model output and publish deltas to `runDeltas` watchers. */
  stream?: boolean | null;
  /** Tools that need a person's approval in this run (besides those that always do). */
  approvalRequired?: string[] | null;
  /** Budget: the run ends `budget_exhausted` before a call that would go beyond it. */
  maxTotalTokens?: number | null;
  /** Budget in US dollars, same rule. */
  maxCost?: number | null;
  /** Seconds a run waits for a decision before its pending calls are refused as not approved. */
  approvalTimeoutSeconds?: number | null;
  /** Run the configuration's release with this label instead of its current state. */
  label?: string | null;
  /** `json`: ask the provider for JSON (nr_llm's `response_format` call option, merged over the configuration's). */
  responseFormat?: 'json' | null;
  /**
   * A JSON Schema (text) the final answer must match: validated on the
   * server, one repair call, the run ends `invalid_output` if it still fails.
   * Sent to the provider as `response_schema` for its native JSON mode.
   */
  outputSchema?: string | null;
  /** The task a task run runs (set by the tasks feature, never by a caller); its uid is the run's `taskUid`. */
  task?: RunTaskOrigin | null;
  /**
   * The release the label meant when the run started (set by the service,
   * never by a caller): a run that goes on later runs this release even if
   * the label has moved since.
   */
  releaseId?: number | null;
  /**
   * A conversation turn: the earlier turns, sent before the prompt. Never
   * stored with the request (a run that goes on later reads them again
   * through `conversation`), so a turn stores what a single run does.
   */
  history?: ChatMessage[] | null;
  /** A conversation turn: whose history it sends (read again by a run that goes on later). */
  conversation?: HistoryReference | null;
  /** Send a transcript over the context budget instead of ending `context_truncated` (a conversation turn). */
  sendOverBudget?: boolean | null;
}

/** Where a conversation turn's history lives: the session's messages up to and including `throughSequence` (-1: none). */
export interface HistoryReference {
  session: number;
  throughSequence: number;
}

/** Reads a conversation turn's history again (a run that goes on after approval or a takeover). */
export type HistorySource = (reference: HistoryReference) => Promise<ChatMessage[]>;

/** What `promptwire_run_request` keeps of a run: its input, checked, and who started it. */
export interface StoredRunRequest {
  request: StartRunRequest;
  startedBy: string;
  /** The starting token's TYPO3 backend user (0 = none; absent in requests stored before tokens had one). */
  beUser?: number;
  /** The starting token's integration ('' = none). */
  source?: string;
  /** The task the run executes (`tx_nrllm_task` uid; absent = none): its usage is booked to it. */
  taskUid?: number;
  /**
   * Someone asked to cancel the run while it was driven elsewhere: an
   * instance that takes the run up after its driver died ends it CANCELLED
   * instead of going on.
   */
  cancelRequested?: true;
}

/** Whom a run's provider calls are booked to. */
export interface RunBooking {
  beUser: number;
  source: string;
  taskUid: number;
}

/** The booking of a stored run (requests stored before tokens had an identity book to nobody). */
export function bookingOf(stored: StoredRunRequest): RunBooking {
  return { beUser: stored.beUser ?? 0, source: stored.source ?? '', taskUid: stored.taskUid ?? 0 };
}

/** A run ready to drive: the loop's input (without its cancellation signal) and what observers want to know. */
export interface PreparedRun {
  configuration: ConfigurationEntity;
  loopInput: Omit<AgentLoopInput, 'signal'>;
  providerType: string | null;
  dryRun: boolean;
  /** The release the run sends; null: the configuration as it is now. */
  release: StoredRelease | null;
  /** The snippets composed into the system prompt, in prompt order (for a release: as it froze them). */
  composedSnippets: readonly PromptSnippetEntity[];
  /** What the run's provider calls are checked against and booked to (the usage ledger). */
  account: LedgerAccount;
}

export interface RunPreparerOptions {
  /** Bytes one provider call may answer. */
  providerMaxResponseBytes?: number;
  /** Builds the adapter for a provider; tests swap in scripted ones. */
  adapterFactory?: (settings: ReturnType<ProviderService['settingsFor']>) => ChatAdapter;
  /** Tools beyond the built-ins (MCP servers'), read for each run whose allow-list names one. */
  externalTools?: ExternalToolSource;
  /** TYPO3's tool on/off switches, read for each run; absent: every tool is on. */
  toolSwitches?: ToolSwitchSource;
  /** Reads a conversation turn's history when its request does not carry it. */
  historySource?: HistorySource;
}

/** The longest a run may wait for a decision: 30 days. */
export const MAX_APPROVAL_TIMEOUT_SECONDS = 2_592_000;

export class RunPreparer {
  constructor(
    private readonly configurations: ConfigurationService,
    private readonly models: ModelService,
    private readonly providers: ProviderService,
    private readonly snippets: SnippetService,
    private readonly skills: SkillService,
    private readonly releases: ReleaseService,
    private readonly tools: ToolRegistry,
    private readonly logger: Logger,
    private readonly options: RunPreparerOptions,
  ) {}

  /** The caller's right to what the request asks, and the values the input classes cannot check alone. */
  checkRequest(request: StartRunRequest, caller: Caller): void {
    if (request.captureRaw === true && !roleAtLeast(caller.role, Role.ADMIN)) {
      throw new ForbiddenError('Raw capture keeps provider responses verbatim; only an ADMIN may ask for it', 'captureRaw');
    }
    const prompt = request.prompt ?? '';
    if (prompt.trim() === '') throw new BadUserInputError('prompt is required', 'prompt');
    if (Buffer.byteLength(prompt, 'utf8') > 1_000_000) throw new BadUserInputError('prompt must be at most 1 MB', 'prompt');
    if (request.maxTokens != null && (!Number.isInteger(request.maxTokens) || request.maxTokens < 0)) {
      throw new BadUserInputError('maxTokens must be a whole number ≥ 0', 'maxTokens');
    }
    if (request.temperature != null && (!Number.isFinite(request.temperature) || request.temperature < 0 || request.temperature > 2)) {
      throw new BadUserInputError('temperature must be between 0 and 2', 'temperature');
    }
    if (request.maxRounds != null && !Number.isInteger(request.maxRounds)) throw new BadUserInputError('maxRounds must be a whole number (it is clamped to 1..20)', 'maxRounds');
    if (request.maxTotalTokens != null && (!Number.isInteger(request.maxTotalTokens) || request.maxTotalTokens < 1)) {
      throw new BadUserInputError('maxTotalTokens must be a whole number ≥ 1', 'maxTotalTokens');
    }
    if (request.maxCost != null && (!Number.isFinite(request.maxCost) || request.maxCost <= 0)) {
      throw new BadUserInputError('maxCost must be a number of US dollars above 0', 'maxCost');
    }
    if (request.approvalTimeoutSeconds != null && (!Number.isInteger(request.approvalTimeoutSeconds) || request.approvalTimeoutSeconds < 1 || request.approvalTimeoutSeconds > MAX_APPROVAL_TIMEOUT_SECONDS)) {
      throw new BadUserInputError(`approvalTimeoutSeconds must be a whole number of seconds from 1 to ${MAX_APPROVAL_TIMEOUT_SECONDS} (30 days)`, 'approvalTimeoutSeconds');
    }
    if (request.label != null) {
      const label = checkLabel(request.label);
      if (!label.ok) throw new BadUserInputError(label.message, 'label');
      if (request.systemPrompt != null && request.systemPrompt !== '') {
        throw new BadUserInputError('A release runs the system prompt it froze; systemPrompt cannot be combined with label', 'systemPrompt');
      }
    }
  }

  /**
   * Resolves everything a run needs. `strict` (a new run): unknown tools,
   * snippets and skills are input errors. A run that goes on from its
   * stored request is prepared leniently: a tool removed since is simply no
   * longer offered (its pending call is then refused as no longer
   * permitted), and a snippet or skill deleted since contributes nothing.
   */
  async prepare(request: StartRunRequest, strict: boolean, booking: RunBooking = { beUser: 0, source: '', taskUid: 0 }, known: ConfigurationEntity | null = null): Promise<PreparedRun> {
    // External tools are only read (and only reach their servers) for a run that names one.
    const names = [...(request.tools ?? []), ...(request.approvalRequired ?? [])];
    const registry = names.some((name) => !this.tools.has(name)) && this.options.externalTools ? this.tools.withExternal(await this.options.externalTools.toolsForRun()) : this.tools;
    if (strict && request.tools) {
      const unknown = registry.unknownNames(request.tools);
      if (unknown.length > 0) {
        throw new BadUserInputError(`Unknown tool(s): ${unknown.join(', ')}. The tools query lists what exists.`, 'tools');
      }
    }
    if (strict && request.approvalRequired) {
      const unknown = registry.unknownNames(request.approvalRequired);
      if (unknown.length > 0) {
        throw new BadUserInputError(`Unknown tool(s): ${unknown.join(', ')}. The tools query lists what exists.`, 'approvalRequired');
      }
    }

    // A run that goes on runs the release it started with, found by id: the label may have moved, the identifier changed.
    const started = request.releaseId != null ? (await this.releases.byIds([request.releaseId]))[0] ?? null : null;
    if (request.releaseId != null && !started) throw new NotFoundError(`The release ${request.releaseId} of this run no longer exists`, 'label');
    // `known`: the caller has just read the configuration the request names (a conversation turn checks it first).
    const named = known && known.identifier === (request.configuration ?? '').trim().toLowerCase() ? known : null;
    const configuration = started ? await this.configurations.findByUid(started.configurationUid) : (named ?? (await this.configurations.findByIdentifier(request.configuration ?? '')));
    if (!configuration) throw new NotFoundError(`No configuration with identifier "${request.configuration}"`, 'configuration');
    const release = started ?? (request.label != null ? await this.releases.currentOf(configuration, request.label) : null);
    const tools = await this.switchedOn(registry, configuration, request, strict);
    const forcedSnippets = request.forcedSnippets?.length ? await this.snippets.findForcedByIdentifiers(request.forcedSnippets) : [];
    const forcedSkills: SkillEntity[] = [];
    for (const identifier of request.forcedSkills ?? []) {
      const skill = await this.skills.findByIdentifier(identifier);
      if (skill) forcedSkills.push(skill);
      else if (strict) throw new NotFoundError(`No skill with identifier "${identifier}"`, 'forcedSkills');
    }
    const dryRun = request.dryRun === true;
    const modelUid = release ? release.modelUid : configuration.modelUid;
    const model = modelUid ? (await this.models.findByUids([modelUid]))[0] ?? null : null;
    if (!model && !dryRun) {
      throw new BadUserInputError(
        release
          ? `The release "${release.label}" of "${configuration.identifier}" has no model (or its model was deleted); publish the configuration again`
          : `Configuration "${configuration.identifier}" has no model; set one with updateConfiguration`,
        'configuration',
      );
    }
    const provider = model ? (await this.providers.findByUids([model.providerUid]))[0] ?? null : null;
    if (model && !provider && !dryRun) throw new BadUserInputError(`The model "${model.identifier}" has no provider; fix it with updateModel`, 'configuration');
    if (provider && !provider.isActive && !dryRun) throw new BadUserInputError(`The provider "${provider.identifier}" is inactive`, 'configuration');

    // A release brings its prompt, options and skills; only a run of the configuration as it is reads them now.
    const [activeSnippets, skillMap, prices] = await Promise.all([
      release ? null : this.snippets.allActive().then((rows) => new ActiveSnippetIndex(rows)),
      release ? null : this.configurations.skillsByConfiguration([configuration.uid]),
      model ? this.models.pricesFor(model) : Promise.resolve(null),
    ]);
    // A cost budget is kept with the model's prices; without any, every cost is unknown and the budget would never stop the run.
    if (strict && request.maxCost != null && model && !isPriced(prices)) {
      throw new BadUserInputError(
        `maxCost needs a priced model: model "${model.identifier}" has no prices; set its costInput/costOutput (updateModel) or leave maxCost out`,
        'maxCost',
      );
    }

    // Typed as nr_llm's callers pass them: max_tokens an int, temperature a float.
    const overrides: PhpArray = new Map();
    if (request.maxTokens != null) overrides.set('max_tokens', BigInt(Math.trunc(request.maxTokens)));
    if (request.temperature != null) overrides.set('temperature', request.temperature);
    if (request.responseFormat === 'json') overrides.set('response_format', 'json');
    if (request.outputSchema != null) overrides.set('response_schema', phpValueOf(JSON.parse(request.outputSchema)));
    // plainValueOf: an option integer beyond 2^53 stays a bigint and reaches the wire body with its digits (plainJsonText).
    const callOptions = release ? withModel(plainValueOf(releaseCallOptions(release.callOptions, overrides, model)) as Record<string, unknown>, model) : callOptionsFor(configuration, model, activeSnippets!, overrides);

    const history = request.history ?? (request.conversation && this.options.historySource ? await this.options.historySource(request.conversation) : []);
    const settings = provider ? this.providers.settingsFor(provider) : null;
    const adapter: ChatAdapter = settings ? this.adapterFor(settings) : unusableAdapter;

    return {
      configuration,
      dryRun,
      release,
      composedSnippets: activeSnippets ? selectedSnippetsOf(configuration, activeSnippets) : [],
      providerType: provider && !dryRun ? provider.adapterType : null,
      account: {
        ...booking,
        configurationUid: configuration.uid,
        configurationIdentifier: configuration.identifier,
        configurationCaps: { requests: configuration.maxRequestsPerDay, tokens: configuration.maxTokensPerDay, cost: configuration.maxCostPerDay },
        modelUid: model?.uid ?? 0,
        modelId: typeof callOptions.model === 'string' ? callOptions.model : '',
        providerType: provider?.adapterType ?? '',
      },
      loopInput: {
        adapter,
        model: { contextLength: model?.contextLength ?? 0, maxOutputTokens: model?.maxOutputTokens ?? 0, prices: isPriced(prices) ? prices : null },
        callOptions,
        runMaxTokens: request.maxTokens ?? null,
        systemPrompt: release ? release.effectiveSystemPrompt : effectiveSystemPromptOf(configuration, activeSnippets!, request.systemPrompt),
        forcedSnippets: forcedSnippets.map((s) => ({ identifier: s.identifier, name: s.name, snippet: s.snippet })),
        configurationSkills: release ? release.skills.map((skill) => skill.skill) : (skillMap!.get(configuration.uid) ?? []).map(skillInputOf),
        forcedSkills: forcedSkills.map(skillInputOf),
        ...historyInput(history, request.conversation ?? null),
        prompt: request.prompt,
        ...(request.sendOverBudget === true ? { sendOverBudget: true } : {}),
        tools: { registry: tools, allowList: request.tools ?? undefined },
        maxRounds: request.maxRounds ?? undefined,
        captureRaw: request.captureRaw === true,
        dryRun,
        // Streaming is the default: watchers see output as it is written.
        stream: request.stream !== false,
        approvalRequired: request.approvalRequired ?? [],
        approvalTimeoutSeconds: request.approvalTimeoutSeconds ?? null,
        budget: { maxTotalTokens: request.maxTotalTokens ?? null, maxCost: request.maxCost ?? null },
        structuredOutput: request.outputSchema != null ? { schemaJson: request.outputSchema } : null,
      },
    };
  }

  /**
   * The tools TYPO3's switches and the configuration's allowed tool groups
   * leave on. A new run that names a tool switched off is refused; a run
   * that goes on simply no longer offers it (its pending call is refused).
   */
  private async switchedOn(registry: ToolRegistry, configuration: ConfigurationEntity, request: StartRunRequest, strict: boolean): Promise<ToolRegistry> {
    const switches = (await this.options.toolSwitches?.read()) ?? NO_SWITCHES;
    const allowedGroups = allowedToolGroupsOf(configuration.allowedToolGroups);
    const on = registry.filtered((tool) => isToolSwitchedOn(tool, switches, allowedGroups));
    const off = strict ? on.unknownNames(request.tools).filter((name) => registry.has(name)) : [];
    if (off.length > 0) {
      throw new BadUserInputError(
        `Tool(s) switched off: ${off.join(', ')} (TYPO3's tool switches${allowedGroups.length > 0 ? `, or not in the configuration's allowed tool groups ${allowedGroups.join(', ')}` : ''})`,
        'tools',
      );
    }
    return on;
  }

  /**
   * The provider's adapter. A provider that cannot be called (nr_llm's SQL
   * default `adapter_type = ''`, an unknown type) still reads and dry-runs; a
   * live run's first call fails with the reason, and the run ends FAILED.
   */
  private adapterFor(settings: Parameters<NonNullable<RunPreparerOptions['adapterFactory']>>[0]): ChatAdapter {
    const factory = this.options.adapterFactory ?? ((s) => createChatAdapter(s, { logger: this.logger, ...(this.options.providerMaxResponseBytes ? { maxResponseBytes: this.options.providerMaxResponseBytes } : {}) }));
    try {
      return factory(settings);
    } catch (error) {
      return failingAdapter(error);
    }
  }
}

/** The model a call names: the options' own (a frozen release keeps the model id it was published with), else the model's. */
function withModel(options: Record<string, unknown>, model: ModelEntity | null): CallOptions {
  return { ...options, model: typeof options.model === 'string' ? options.model : (model?.modelId ?? '') };
}

/** behaviour.md §5 without the system prompt, which the loop sends as message 0. */
function callOptionsFor(
  configuration: ConfigurationEntity,
  model: ModelEntity | null,
  activeSnippets: ActiveSnippetIndex,
  overrides: PhpArray,
): CallOptions {
  const { system_prompt: _systemPrompt, ...options } = plainValueOf(callOptionsOf(configuration, model, activeSnippets, overrides)) as Record<string, unknown>;
  return withModel(options, model);

}

/** Used only for a dry run of a configuration without a model: the loop never calls it. */
const unusableAdapter: ChatAdapter = {
  adapterType: 'custom',
  chat: () => Promise.reject(new Error('no model configured')),
  // eslint-disable-next-line require-yield
  stream: async function* () {
    throw new Error('no model configured');
  },
};

/** An adapter whose every call fails with `error` (why the provider cannot be called). */
function failingAdapter(error: unknown): ChatAdapter {
  return {
    adapterType: 'custom',
    chat: () => Promise.reject(error),
    // eslint-disable-next-line require-yield
    stream: async function* () {
      throw error;
    },
  };
}

/** What a run's loop takes of a conversation turn's history: the messages, and where they are stored (none without messages). */
export function historyInput(history: ChatMessage[], conversation: HistoryReference | null): Pick<AgentLoopInput, 'history' | 'historyAt'> {
  if (history.length === 0) return {};
  return conversation ? { history, historyAt: { session: conversation.session, throughSequence: conversation.throughSequence } } : { history };
}
