import { IsOptional, MaxLength } from 'class-validator';
import { Extensions, Field, InputType, Int, ObjectType } from 'type-graphql';
import { CATALOGUE_ROWS, EMBEDDED_LIST, listRows } from '../graphql/query-limits';
import { DateTimeScalar, JSONScalar } from '../graphql/scalars';
import { RawJson } from '../graphql/raw-json';
import { plainJsonText } from '../shared/php-json';
import { fromUnix } from '../shared/time';
import { taskVariablesOf, type DeclaredVariable, type VariableType, type VariableValue } from './task-rules';
import { AgentRun, toAgentRun } from '../runs';
import type { RenderedTask, TaskRecord, TaskRelease as TaskReleaseRecord, TaskRunResult } from './task.service';

@ObjectType({ simpleResolvers: true, description: 'A placeholder of the template: `input` (the task\'s input) or a named variable, declared or not (then a required string).' })
export class TaskVariable {
  @Field() name!: string;
  @Field({ description: 'string, number, integer or boolean.' }) type!: string;
  @Field({ description: 'A call must give it (it has no default).' }) required!: boolean;
  @Field(() => JSONScalar, { nullable: true, description: 'Used when a call leaves the variable out.' }) default!: VariableValue | null;
  @Field(() => String, { nullable: true }) description!: string | null;
}

@ObjectType({ simpleResolvers: true, description: 'A one-shot prompt task (nr_llm\'s `tx_nrllm_task`): a template with `{{input}}` and named variables, run on a configuration.' })
export class Task {
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field({ description: 'log_analysis, content, system, developer or general.' }) category!: string;
  @Field(() => String, { nullable: true, description: 'The configuration identifier; null: the active default configuration.' }) configuration!: string | null;
  @Field() promptTemplate!: string;
  @Field({ description: 'manual, syslog, deprecation_log, table or file.' }) inputType!: string;
  @Field({ description: 'markdown, json, plain or html.' }) outputFormat!: string;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String], { description: 'Skill identifiers in injection order, after the configuration\'s.' }) skills!: string[];
  @Extensions(EMBEDDED_LIST)
  @Field(() => [TaskVariable], { description: 'The template\'s placeholders in order of first appearance, `input` included.' }) variables!: TaskVariable[];
  @Field(() => JSONScalar, { nullable: true, description: 'The JSON Schema a JSON task\'s answer is validated against on the server.' }) outputSchema!: unknown;
  @Field() isActive!: boolean;
  @Field({ description: 'Shipped by nr_llm.' }) isSystem!: boolean;
  @Field() hidden!: boolean;
  @Field(() => Int) sorting!: number;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => DateTimeScalar) updatedAt!: Date;
}

export function toTask(record: TaskRecord): Task {
  const { row } = record;
  return {
    uid: row.uid,
    identifier: row.identifier,
    name: row.name,
    description: row.description,
    category: row.category,
    configuration: record.configuration,
    promptTemplate: row.promptTemplate,
    inputType: row.inputType,
    outputFormat: row.outputFormat,
    skills: record.skills.map((skill) => skill.identifier),
    variables: taskVariablesOf(row.promptTemplate, record.variables),
    outputSchema: record.outputSchema === null ? null : JSON.parse(record.outputSchema),
    isActive: row.isActive,
    isSystem: row.isSystem,
    hidden: row.hidden,
    sorting: row.sorting,
    createdAt: fromUnix(row.crdate),
    updatedAt: fromUnix(row.tstamp),
  };
}

@InputType({ description: 'A named variable the template uses as `{{name}}`.' })
export class TaskVariableInput {
  @Field() @MaxLength(100) name!: string;
  @Field({ description: 'string, number, integer or boolean.' }) type!: string;
  @Field(() => JSONScalar, { nullable: true, description: 'A value of the type; without one the variable is required.' }) default?: unknown;
  @Field(() => String, { nullable: true }) description?: string | null;
}

export function toDeclaredVariables(input: readonly TaskVariableInput[] | null | undefined): DeclaredVariable[] | null | undefined {
  if (input === null || input === undefined) return input;
  return input.map((variable) => ({
    name: variable.name,
    type: variable.type as VariableType,
    default: (variable.default ?? null) as VariableValue | null,
    description: variable.description ?? null,
  }));
}

@InputType()
export class CreateTaskInput {
  @Field() @MaxLength(100) identifier!: string;
  @Field() @MaxLength(255) name!: string;
  @Field({ description: '`{{input}}` is the input; any other `{{name}}` a variable.' }) promptTemplate!: string;
  @Field(() => String, { nullable: true, description: 'A configuration identifier; left out: the active default configuration.' }) configuration?: string | null;
  @Field(() => String, { nullable: true, description: 'Default general.' }) category?: string | null;
  @Field(() => String, { nullable: true, description: 'Default markdown.' }) outputFormat?: string | null;
  @Field(() => String, { nullable: true, description: 'Default manual.' }) inputType?: string | null;
  @Field(() => [String], { nullable: true, description: 'Skill identifiers, in injection order.' }) skills?: string[] | null;
  @Field(() => JSONScalar, { nullable: true, description: 'A JSON Schema (nr_llm\'s strict subset) for a JSON task\'s answer.' }) outputSchema?: unknown;
  @Field(() => [TaskVariableInput], { nullable: true }) variables?: TaskVariableInput[] | null;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field({ nullable: true }) isActive?: boolean;
  @Field({ nullable: true }) hidden?: boolean;
  @Field(() => Int, { nullable: true }) sorting?: number;
}

@InputType()
export class UpdateTaskInput {
  @Field({ nullable: true }) @IsOptional() @MaxLength(100) identifier?: string;
  @Field({ nullable: true }) @IsOptional() @MaxLength(255) name?: string;
  @Field({ nullable: true }) promptTemplate?: string;
  @Field(() => String, { nullable: true, description: 'A configuration identifier; "" or null: the active default configuration.' }) configuration?: string | null;
  @Field(() => String, { nullable: true }) category?: string | null;
  @Field(() => String, { nullable: true }) outputFormat?: string | null;
  @Field(() => String, { nullable: true }) inputType?: string | null;
  @Field(() => [String], { nullable: true }) skills?: string[] | null;
  @Field(() => JSONScalar, { nullable: true, description: 'null removes the schema.' }) outputSchema?: unknown;
  @Field(() => [TaskVariableInput], { nullable: true }) variables?: TaskVariableInput[] | null;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field({ nullable: true }) isActive?: boolean;
  @Field({ nullable: true }) hidden?: boolean;
  @Field(() => Int, { nullable: true }) sorting?: number;
}

@InputType({ description: 'A task run: the task by identifier, its input and variables.' })
export class RunTaskInput {
  @Field({ description: 'The task identifier.' }) @MaxLength(100) task!: string;
  @Field(() => String, { nullable: true, description: 'What `{{input}}` becomes.' }) input?: string | null;
  @Field(() => JSONScalar, { nullable: true, description: 'Named variables: an object of names and values.' }) variables?: unknown;
  @Field(() => String, { nullable: true, description: 'Run the configuration\'s release with this label.' }) label?: string | null;
  @Field(() => Boolean, { nullable: true, defaultValue: true, description: 'Answer once the run ended (default); false: answer with the QUEUED run, to watch with runTrace.' }) wait?: boolean | null;
}

@ObjectType({ simpleResolvers: true, description: 'A task run and, once it ended, its answer.' })
export class TaskRun {
  @Field(() => AgentRun) run!: AgentRun;
  @Field(() => Task) task!: Task;
  @Field(() => String, { nullable: true, description: 'The answer as the model gave it; null while the run has not ended.' }) content!: string | null;
  @Field() outputFormat!: string;
  @Field(() => JSONScalar, { nullable: true, description: 'A JSON task: the parsed answer (with a schema, only a valid one); null otherwise.' }) output!: unknown;
  @Field(() => Boolean, { nullable: true, description: 'A JSON task: whether the answer is JSON (matching the schema, when there is one); null for other tasks or while running.' }) outputValid!: boolean | null;
  @Field(() => String, { nullable: true, description: 'The answer that still failed the schema after the repair call (the run ended `invalid_output`).' }) rawOutput!: string | null;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [String]) appliedSkills!: string[];
  @Field(() => Int, { description: 'Model calls: 1, or 2 when the answer was repaired; 0 while not waited for.' }) attempts!: number;
}

export function toTaskRun(result: TaskRunResult): TaskRun {
  return {
    run: toAgentRun(result.run),
    task: toTask(result.task),
    content: result.content,
    outputFormat: result.task.row.outputFormat,
    output: result.output,
    outputValid: result.outputValid,
    rawOutput: result.rawOutput,
    appliedSkills: result.appliedSkills,
    attempts: result.attempts,
  };
}

@ObjectType({ simpleResolvers: true, description: 'A task frozen under a label (publishTask).' })
export class TaskRelease {
  @Field(() => Int) id!: number;
  @Field({ description: 'The task identifier.' }) task!: string;
  @Field() label!: string;
  @Field(() => Int, { description: 'The task version it froze.' }) version!: number;
  @Field(() => String, { nullable: true }) author!: string | null;
  @Field(() => DateTimeScalar) createdAt!: Date;
}

export function toTaskReleaseView(release: TaskReleaseRecord): TaskRelease {
  return { ...release, createdAt: fromUnix(release.createdAt) };
}

@ObjectType({ simpleResolvers: true })
export class RenderedMessage {
  @Field() role!: string;
  @Field() content!: string;
}

@ObjectType({ simpleResolvers: true, description: 'What a run of the task would send, byte for byte; nothing is called.' })
export class TaskRender {
  @Field(() => Task) task!: Task;
  @Field({ description: 'The configuration the run uses (the task\'s, or the active default).' }) configuration!: string;
  @Field(() => String, { nullable: true, description: 'The release label the run would send, when one was asked for.' }) label!: string | null;
  @Field({ description: 'The effective system prompt ("" sends no system message).' }) systemPrompt!: string;
  @Field({ description: 'The user message: the skill block, the template with its variables, the JSON instruction.' }) userPrompt!: string;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [RenderedMessage]) messages!: RenderedMessage[];
  @Field(() => JSONScalar, { description: 'The call options (`response_format: "json"` for a JSON task).' }) callOptions!: unknown;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [String], { description: 'Skills in the skill block: the configuration\'s, then the task\'s, each once.' }) appliedSkills!: string[];
}

export function toTaskRender(rendered: RenderedTask): TaskRender {
  return {
    task: toTask(rendered.task),
    configuration: rendered.configuration,
    label: rendered.release?.label ?? null,
    systemPrompt: rendered.systemPrompt,
    userPrompt: rendered.userPrompt,
    messages: rendered.messages.map((message) => ({ role: message.role, content: typeof message.content === 'string' ? message.content : '' })),
    callOptions: new RawJson(plainJsonText(rendered.callOptions)),
    appliedSkills: rendered.appliedSkills,
  };
}
