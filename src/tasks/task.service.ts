/**
 * Tasks: nr_llm's one-shot prompt tasks on `tx_nrllm_task`, with declared
 * variables and an output schema kept in `promptwire_task_extension`.
 * Writes follow the snippet and configuration rules (identifier unique among
 * non-deleted rows, taken under the table's identifier lock, soft delete);
 * a task's user prompt is made by the pure rules of task-rules.ts, and what a
 * run of it sends by the runs' own preparation (`RunService.preview`), so
 * that a preview shows exactly what a run sends.
 */
import type { DataSource, EntityManager } from 'typeorm';
import type { Caller } from '../auth/roles';
import type { ConfigurationService } from '../configurations/configuration.service';
import type { IdentifierLock } from '../db/identifier-lock';
import { assertIdentifierAvailable, checkPage, findLiveByIdentifierOrFail, findLiveOrFail, newRecordColumns, normalizeIdentifier, optionalText, requireName, type Page } from '../db/record-rules';
import { checkTextFits, textLimitOf } from '../db/text-limits';
import { checkStructuredAnswer, decodeJsonAnswer, isInStrictSubset, SCHEMA_OUTSIDE_SUBSET_MESSAGE, schemaText, withSchemaInstruction } from '../prompt/structured-output';
import type { RunPreview, RunReader, RunService, RunView, StartRunRequest } from '../runs';
import { BadUserInputError, ConflictError, NotFoundError } from '../shared/errors';
import type { PromptHistoryService } from '../prompt-history/prompt-history.service';
import type { VersionPins } from '../prompt-history/version-pins';
import type { TaskState } from '../prompt-history/version-state';
import { checkLabel } from '../releases/release-rules';
import type { TaskReleaseEntity } from './task-release.entity';
import { unixNow } from '../shared/time';
import { SkillEntity } from '../skills/skill.entity';
import { TaskExtensionEntity } from './task-extension.entity';
import {
  checkChoice,
  checkDeclaredVariables,
  type DeclaredVariable,
  JSON_ONLY_SUFFIX,
  readDeclaredVariables,
  renderTemplate,
  resolveVariables,
  TASK_CATEGORIES,
  TASK_INPUT_TYPES,
  TASK_OUTPUT_FORMATS,
} from './task-rules';
import { TaskEntity } from './task.entity';
import type { TaskRepository } from './task.repository';

const TASK_TABLE = 'tx_nrllm_task';
const RELEASE_TABLE = 'promptwire_task_release';

export interface TaskWrite {
  identifier?: string;
  name?: string;
  description?: string | null;
  category?: string | null;
  /** A configuration identifier; null or '' for the default configuration. */
  configuration?: string | null;
  promptTemplate?: string;
  inputType?: string | null;
  outputFormat?: string | null;
  /** Skill identifiers, in injection order (after the configuration's). */
  skills?: string[] | null;
  /** A JSON Schema for the answer of a JSON task; null removes it. */
  outputSchema?: unknown;
  variables?: DeclaredVariable[] | null;
  isActive?: boolean | null;
  hidden?: boolean | null;
  sorting?: number | null;
}

/** A task with what it is read with: its skills, declared variables and schema, and its configuration's identifier. */
export interface TaskRecord {
  row: TaskEntity;
  /** Live skills in relation order. */
  skills: SkillEntity[];
  variables: DeclaredVariable[];
  /** The schema as stored (JSON text); null: none, or unreadable. */
  outputSchema: string | null;
  /** Null: the default configuration (also when the configuration it names is gone, as nr_llm falls back). */
  configuration: string | null;
}

export interface TaskListQuery extends Page {
  category?: string | null;
}

/** What a task run sends, as `renderTask` shows it. */
export interface RenderedTask extends RunPreview {
  task: TaskRecord;
  /** The user prompt: the skill block, the template with its variables, the JSON instruction. */
  userPrompt: string;
}

/** A task frozen under a label. */
export interface TaskRelease {
  id: number;
  task: string;
  label: string;
  version: number;
  author: string | null;
  createdAt: number;
}

function toTaskRelease(row: TaskReleaseEntity, task: string): TaskRelease {
  return { id: row.id, task, label: row.label, version: row.taskVersion, author: row.author, createdAt: row.createdAt };
}

/** `runTask`'s input. */
export interface TaskRunRequest {
  task: string;
  input?: string | null;
  variables?: unknown;
  /** Run the configuration's release under this label. */
  label?: string | null;
  /** Wait for the run's end before answering (default), or answer with the QUEUED run. */
  wait?: boolean | null;
}

/** A task run, and once it ended its answer as the task's output format reads it. */
export interface TaskRunResult {
  task: TaskRecord;
  run: RunView;
  appliedSkills: string[];
  /** Model calls made: 1, or 2 when the answer was repaired; 0 while not waited for. */
  attempts: number;
  content: string | null;
  /** A JSON task's answer, parsed (with a schema: only when valid); null otherwise. */
  output: unknown;
  /** A JSON task: whether the answer is JSON (matching the schema, when there is one); null for other tasks or while running. */
  outputValid: boolean | null;
  /** The last answer that failed the schema (the run ended `invalid_output`); null otherwise. */
  rawOutput: string | null;
}

export class TaskService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly identifiers: IdentifierLock,
    private readonly repository: TaskRepository,
    private readonly configurations: ConfigurationService,
    private readonly runs: RunService,
    private readonly reader: RunReader,
    private readonly history: PromptHistoryService,
    private readonly pins: VersionPins,
  ) {}

  async list(query: TaskListQuery): Promise<TaskRecord[]> {
    const { limit, offset } = checkPage(query);
    const category = query.category ?? null;
    if (category !== null) checked(checkChoice(category, TASK_CATEGORIES, 'category'), 'category');
    return this.records(await this.repository.list(category, limit, offset));
  }

  async findByUid(uid: number): Promise<TaskRecord | null> {
    const row = await this.repository.findLive(uid);
    return row ? (await this.records([row]))[0]! : null;
  }

  async findByIdentifier(identifier: string): Promise<TaskRecord | null> {
    const row = await this.repository.findLiveByIdentifier(identifier.trim().toLowerCase());
    return row ? (await this.records([row]))[0]! : null;
  }

  /** nr_llm's texts: an unknown task is NOT_FOUND `Task not found`. */
  async require(identifier: string): Promise<TaskRecord> {
    const task = await this.findByIdentifier(identifier);
    if (!task) throw new NotFoundError('Task not found', 'task');
    return task;
  }

  /** `author` is the token name behind the write; it is stored with the version. */
  async create(input: TaskWrite, author: string | null = null): Promise<TaskRecord> {
    const identifier = normalizeIdentifier(input.identifier ?? '');
    const [saved, change] = await this.identifiers.transaction(TASK_TABLE, async (manager) => {
      await assertIdentifierAvailable(manager, TaskEntity, identifier, null, 'task');
      const row = manager.create(TaskEntity, {
        ...newRecordColumns(unixNow()),
        description: null,
        category: 'general',
        configurationUid: 0,
        inputType: 'manual',
        inputSource: null,
        outputFormat: 'markdown',
        skills: 0,
        isActive: true,
        isSystem: false,
        sorting: 0,
      });
      const write = await this.applyWrite(manager, row, { ...input, identifier }, null, true);
      const created = await manager.save(row);
      await this.storeRelations(manager, created, write);
      return [created, await this.recordVersion(manager, created, null, author)] as const;
    });
    this.history.announce(change);
    return (await this.records([saved]))[0]!;
  }

  async update(uid: number, input: TaskWrite, author: string | null = null): Promise<TaskRecord> {
    const identifier = input.identifier === undefined ? undefined : normalizeIdentifier(input.identifier);
    return this.change(uid, author, async (manager, row, extension) => {
      if (identifier !== undefined) await assertIdentifierAvailable(manager, TaskEntity, identifier, uid, 'task');
      return this.applyWrite(manager, row, { ...input, identifier }, extension, false);
    });
  }

  /** Writes a stored version's content back (the identifier stays); the result is a new version. */
  async restore(uid: number, version: number, author: string | null = null): Promise<TaskRecord> {
    const { state } = await this.history.version('task', uid, version);
    return this.change(uid, author, async (manager, row) => {
      const { name, description, category, configurationUid, promptTemplate, inputType, outputFormat, isActive, hidden, sorting } = state;
      Object.assign(row, { name, description, category, configurationUid, promptTemplate, inputType, outputFormat, isActive, hidden, sorting });
      // Skills deleted since are left out, as a write naming them would refuse them.
      const live = await this.repository.skillsByUids(state.skillUids);
      return { skillUids: live.map((skill) => skill.uid), variables: state.variables, outputSchema: state.outputSchema };
    });
  }

  async delete(uid: number, author: string | null = null): Promise<boolean> {
    await this.change(uid, author, async (_manager, row, extension) => {
      row.deleted = true;
      return { skillUids: null, variables: extension?.variables ?? '[]', outputSchema: extension?.outputSchema ?? null };
    });
    return true;
  }

  /**
   * Freezes the task under the label: its template, variables, schema,
   * skills and configuration as the version they are now. `runTask` and
   * `renderTask` with the label send that (with the configuration's release
   * of the same label). Publishing an unchanged task under the label it
   * already has answers that release.
   */
  async publish(identifier: string, label: string, author: string | null): Promise<TaskRelease> {
    const checked = checkLabel(label);
    if (!checked.ok) throw new BadUserInputError(checked.message, 'label');
    for (let attempt = 0; attempt < 3; attempt += 1) {
      const task = await this.require(identifier);
      const state = (await this.history.taskStates(this.dataSource.manager, [task.row])).get(task.row.uid)!;
      const versions = await this.pins.pin('task', [{ uid: task.row.uid, state }]);
      if (!versions) continue;
      const version = versions.get(task.row.uid)!;
      const row = await this.identifiers.transaction(RELEASE_TABLE, async (manager) => {
        const current = await this.repository.latestRelease(manager, task.row.uid, checked.label);
        if (current && current.taskVersion === version) return current;
        return this.repository.insertRelease(manager, { taskUid: task.row.uid, label: checked.label, taskVersion: version, state: JSON.stringify(state), author, createdAt: unixNow() });
      });
      return toTaskRelease(row, task.row.identifier);
    }
    throw new ConflictError(`The task "${identifier}" kept changing while it was being published; try again`, 'identifier');
  }

  /** The task as its release under the label froze it; NOT_FOUND for a label never published. */
  private async released(task: TaskRecord, label: string): Promise<{ task: TaskRecord; version: number }> {
    const checked = checkLabel(label);
    if (!checked.ok) throw new BadUserInputError(checked.message, 'label');
    const release = await this.repository.latestRelease(this.dataSource.manager, task.row.uid, checked.label);
    if (!release) throw new NotFoundError(`The task "${task.row.identifier}" has no release labelled "${label}"; publishTask makes one`, 'label');
    const state = JSON.parse(release.state) as TaskState;
    const frozen = this.dataSource.manager.create(TaskEntity, { ...task.row, ...state, uid: task.row.uid, isActive: task.row.isActive });
    const [skills, configurations] = await Promise.all([
      this.repository.skillsByUids(state.skillUids),
      state.configurationUid > 0 ? this.configurations.findByUids([state.configurationUid]) : Promise.resolve([]),
    ]);
    const configuration = configurations.find((row) => !row.hidden)?.identifier ?? null;
    return {
      task: { row: frozen, skills, variables: readDeclaredVariables(state.variables), outputSchema: readSchemaText(state.outputSchema), configuration },
      version: release.taskVersion,
    };
  }

  /** One write to a live task: lock, change, stamp, save, store the version; announced after commit. */
  private async change(
    uid: number,
    author: string | null,
    apply: (manager: EntityManager, row: TaskEntity, extension: TaskExtensionEntity | null) => Promise<ExtensionWrite>,
  ): Promise<TaskRecord> {
    const [saved, change] = await this.identifiers.transaction(TASK_TABLE, async (manager) => {
      const row = await findLiveOrFail(manager, TaskEntity, uid, 'task');
      const previous = (await this.history.taskStates(manager, [row])).get(uid)!;
      const extension = (await this.repository.extensionsOf([uid], manager)).get(uid) ?? null;
      const write = await apply(manager, row, extension);
      row.tstamp = unixNow();
      const updated = await manager.save(row);
      await this.storeRelations(manager, updated, write);
      return [updated, await this.recordVersion(manager, updated, previous, author)] as const;
    });
    this.history.announce(change);
    return (await this.records([saved]))[0]!;
  }

  private async recordVersion(manager: EntityManager, row: TaskEntity, previous: TaskState | null, author: string | null) {
    const state = (await this.history.taskStates(manager, [row])).get(row.uid)!;
    return this.history.record(manager, { kind: 'task', uid: row.uid, state, previous, origin: { source: 'api', author } });
  }

  /**
   * What a run of the task would send, without calling anything: the task's
   * (or the default) configuration's system prompt, the user prompt built
   * from the template and the variables, the skill block (configuration's
   * skills, then the task's), and the call options. An inactive task is
   * BAD_USER_INPUT `Task is not active` (nr_llm's text).
   */
  async render(identifier: string, input: string | null | undefined, variables: unknown, caller: Caller, label: string | null = null): Promise<RenderedTask> {
    const { task, version } = await this.resolve(identifier, label);
    const request = { ...(await this.runRequest(task, input, variables, version)), label };
    const preview = await this.runs.preview(request, caller);
    const user = preview.messages.find((message) => message.role === 'user');
    return { ...preview, task, userPrompt: typeof user?.content === 'string' ? user.content : '' };
  }

  /**
   * Runs the task: a run like any other (traced, streamed, `run.finished`),
   * with the task on its provenance and its uid on its request. With `wait`
   * (the default) the answer comes once the run ended.
   */
  async run(request: TaskRunRequest, caller: Caller, origin: { trace?: unknown } = {}): Promise<TaskRunResult> {
    const { task, version } = await this.resolve(request.task, request.label ?? null);
    const runRequest = { ...(await this.runRequest(task, request.input, request.variables, version)), label: request.label ?? null };
    const started = await this.runs.start(runRequest, caller, origin);
    const appliedSkills = started.appliedSkills ?? [];
    if (request.wait === false) return resultOf(task, started, appliedSkills, 0, false);
    const attempts = await this.waitForEnd(started.row.uuid);
    const ended = (await this.reader.get(started.row.uuid)) ?? started;
    return resultOf(task, ended, appliedSkills, attempts, true);
  }

  /** Follows the run's trace until its END; how many model answers it stored. */
  private async waitForEnd(uuid: string): Promise<number> {
    let answers = 0;
    const trace = await this.reader.openTrace(uuid, 0);
    try {
      for await (const item of trace) {
        // A watcher that fell behind reads the rest from the table.
        if (item instanceof Error) return this.waitForEnd(uuid);
        if (item.kind === 'llm') answers += 1;
        if (item.kind === 'end') break;
      }
    } finally {
      await trace.return?.(undefined);
    }
    return answers;
  }

  /** The task a call sends: as it is now (and its latest version), or as its release under the label froze it. */
  private async resolve(identifier: string, label: string | null): Promise<{ task: TaskRecord; version: number | null }> {
    const task = await this.require(identifier);
    if (label !== null) return this.released(task, label);
    const latest = await this.history.latestVersions(this.dataSource.manager, 'task', [task.row.uid]);
    return { task, version: latest.get(task.row.uid)?.version ?? null };
  }

  /** The run request of a task call: checked, its prompt made, its configuration resolved. */
  async runRequest(task: TaskRecord, input: string | null | undefined, variables: unknown, version: number | null = null): Promise<StartRunRequest> {
    if (!task.row.isActive) throw new BadUserInputError('Task is not active', 'task');
    if (variables !== null && variables !== undefined && (typeof variables !== 'object' || Array.isArray(variables))) {
      throw new BadUserInputError('variables must be a JSON object of variable names and values', 'variables');
    }
    const values = checked(resolveVariables(task.row.promptTemplate, task.variables, input, (variables ?? {}) as Record<string, unknown>), 'variables');
    const configuration = await this.effectiveConfiguration(task);
    return {
      configuration: configuration.identifier,
      prompt: userPromptOf(task, renderTemplate(task.row.promptTemplate, values)),
      forcedSkills: task.skills.map((skill) => skill.identifier),
      tools: [],
      maxRounds: 1,
      task: { uid: task.row.uid, identifier: task.row.identifier, version },
      ...(task.row.outputFormat === 'json' ? { responseFormat: 'json' as const } : {}),
      ...(task.row.outputFormat === 'json' && task.outputSchema !== null ? { outputSchema: task.outputSchema } : {}),
    };
  }

  /**
   * The task's configuration, or nr_llm's default when it names none (or one
   * that is gone): the active default configuration, which must have a model.
   */
  private async effectiveConfiguration(task: TaskRecord): Promise<{ identifier: string }> {
    if (task.configuration !== null) return { identifier: task.configuration };
    const fallback = await this.configurations.findActiveDefault();
    if (!fallback || !fallback.modelUid) {
      throw new BadUserInputError(
        `The task "${task.row.identifier}" names no configuration and there is no active default configuration with a model; set one with updateConfiguration(isDefault: true) or give the task a configuration`,
        'configuration',
      );
    }
    return { identifier: fallback.identifier };
  }

  /** The tasks with their skills, extensions and configuration identifiers: three queries for any number of tasks. */
  private async records(rows: readonly TaskEntity[]): Promise<TaskRecord[]> {
    const uids = rows.map((row) => row.uid);
    const configurationUids = [...new Set(rows.map((row) => row.configurationUid).filter((uid) => uid > 0))];
    const [skills, extensions, configurations] = await Promise.all([
      this.repository.skillsOf(uids),
      this.repository.extensionsOf(uids),
      configurationUids.length > 0 ? this.configurations.findByUids(configurationUids) : Promise.resolve([]),
    ]);
    const liveConfigurations = new Map(configurations.filter((row) => !row.hidden).map((row) => [row.uid, row.identifier]));
    return rows.map((row) => {
      const extension = extensions.get(row.uid);
      return {
        row,
        skills: skills.get(row.uid) ?? [],
        variables: readDeclaredVariables(extension?.variables),
        outputSchema: readSchemaText(extension?.outputSchema ?? null),
        configuration: liveConfigurations.get(row.configurationUid) ?? null,
      };
    });
  }

  /** Validates every field before touching the row, so a refused write changes nothing. */
  private async applyWrite(manager: EntityManager, row: TaskEntity, input: TaskWrite, extension: TaskExtensionEntity | null, creating: boolean): Promise<ExtensionWrite> {
    const changes: Partial<TaskEntity> = {};
    if (input.identifier !== undefined) changes.identifier = input.identifier;
    if (creating || input.name !== undefined) changes.name = requireName(input.name ?? '');
    if (input.description !== undefined) changes.description = optionalText(input.description, textLimitOf(TaskEntity, 'description'), 'description') ?? null;
    if (input.category !== undefined && input.category !== null) changes.category = checked(checkChoice(input.category, TASK_CATEGORIES, 'category'), 'category');
    if (input.inputType !== undefined && input.inputType !== null) changes.inputType = checked(checkChoice(input.inputType, TASK_INPUT_TYPES, 'inputType'), 'inputType');
    if (input.outputFormat !== undefined && input.outputFormat !== null) changes.outputFormat = checked(checkChoice(input.outputFormat, TASK_OUTPUT_FORMATS, 'outputFormat'), 'outputFormat');
    if (creating || input.promptTemplate !== undefined) {
      if ((input.promptTemplate ?? '').trim() === '') throw new BadUserInputError('promptTemplate is required', 'promptTemplate');
      changes.promptTemplate = optionalText(input.promptTemplate, textLimitOf(TaskEntity, 'promptTemplate'), 'promptTemplate')!;
    }
    if (input.configuration !== undefined) {
      const wanted = (input.configuration ?? '').trim();
      // Configuration 0 means the default configuration (nr_llm).
      changes.configurationUid = wanted === '' ? 0 : (await this.requireConfiguration(wanted)).uid;
    }
    if (input.isActive !== undefined && input.isActive !== null) changes.isActive = input.isActive;
    if (input.hidden !== undefined && input.hidden !== null) changes.hidden = input.hidden;
    if (input.sorting !== undefined && input.sorting !== null) {
      if (!Number.isInteger(input.sorting) || input.sorting < 0) throw new BadUserInputError('sorting must be 0 or more', 'sorting');
      changes.sorting = input.sorting;
    }
    let skillUids: number[] | null = null;
    if (input.skills !== undefined && input.skills !== null) {
      skillUids = [];
      for (const identifier of input.skills) {
        const skill = await findLiveByIdentifierOrFail(manager, SkillEntity, identifier, 'skill', 'skills');
        if (!skillUids.includes(skill.uid)) skillUids.push(skill.uid);
      }
    }

    // The extension: checked against the template and format the row will have.
    const template = changes.promptTemplate ?? row.promptTemplate ?? '';
    const outputFormat = changes.outputFormat ?? row.outputFormat ?? 'markdown';
    const storedVariables = readDeclaredVariables(extension?.variables);
    const variables = input.variables !== undefined && input.variables !== null ? checked(checkDeclaredVariables(input.variables, template), 'variables') : storedVariables;
    if (input.variables === undefined || input.variables === null) {
      // A template edit must keep the stored declarations meaningful.
      checked(checkDeclaredVariables(storedVariables, template), 'promptTemplate');
    }
    let outputSchema = extension?.outputSchema ?? null;
    if (input.outputSchema !== undefined) {
      if (input.outputSchema === null) outputSchema = null;
      else {
        if (!isInStrictSubset(input.outputSchema)) throw new BadUserInputError(SCHEMA_OUTSIDE_SUBSET_MESSAGE, 'outputSchema');
        outputSchema = schemaText(input.outputSchema);
        checkTextFits(outputSchema, textLimitOf(TaskExtensionEntity, 'outputSchema'), 'outputSchema', 'outputSchema as JSON');
      }
    }
    if (outputSchema !== null && outputFormat !== 'json') throw new BadUserInputError(`An outputSchema needs outputFormat json (the task's is ${outputFormat})`, 'outputSchema');
    Object.assign(row, changes);
    return { skillUids, variables: JSON.stringify(variables), outputSchema };
  }

  private async requireConfiguration(identifier: string) {
    const configuration = await this.configurations.findByIdentifier(identifier);
    if (!configuration) throw new NotFoundError(`No configuration with identifier "${identifier}"`, 'configuration');
    return configuration;
  }

  private async storeRelations(manager: EntityManager, row: TaskEntity, write: ExtensionWrite): Promise<void> {
    if (write.skillUids !== null) {
      await this.repository.replaceSkills(manager, row, write.skillUids);
      await manager.save(row);
    }
    await this.repository.saveExtension(manager, row.uid, write.variables, write.outputSchema);
  }
}

interface ExtensionWrite {
  skillUids: number[] | null;
  variables: string;
  outputSchema: string | null;
}

/** What a task run's answer is, read by the task's output format. */
function resultOf(task: TaskRecord, run: RunView, appliedSkills: string[], attempts: number, ended: boolean): TaskRunResult {
  const content = run.finalContent;
  const json = task.row.outputFormat === 'json';
  const invalid = run.row.terminationReason === 'invalid_output';
  let output: unknown = null;
  let outputValid: boolean | null = null;
  if (json && ended && content !== null && !invalid) {
    const check = task.outputSchema !== null ? checkStructuredAnswer(content, task.outputSchema) : null;
    const decoded = check ? (check.valid ? check.output : undefined) : decodeJsonAnswer(content);
    output = decoded ?? null;
    outputValid = decoded !== undefined;
  } else if (json && invalid) outputValid = false;
  return { task, run, appliedSkills, attempts, content, output, outputValid, rawOutput: invalid ? content : null };
}

/**
 * The user prompt of a task (before the skill block, which the run's
 * assembly puts in front): the rendered template, then for a JSON task
 * nr_llm's JSON instruction, or with an output schema nr_llm's structured
 * output instruction.
 */
export function userPromptOf(task: Pick<TaskRecord, 'row' | 'outputSchema'>, rendered: string): string {
  if (task.row.outputFormat !== 'json') return rendered;
  return task.outputSchema !== null ? withSchemaInstruction(rendered, task.outputSchema) : rendered + JSON_ONLY_SUFFIX;
}

function readSchemaText(text: string | null): string | null {
  if (text === null) return null;
  try {
    return isInStrictSubset(JSON.parse(text)) ? text : null;
  } catch {
    return null;
  }
}

function checked<T>(result: { ok: true; value: T } | { ok: false; message: string }, field: string): T {
  if (!result.ok) throw new BadUserInputError(result.message, field);
  return result.value;
}
