/**
 * The version state of each kind, read from its TYPO3 row. The one place that
 * says which columns a version keeps.
 */
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import type { SkillEntity } from '../skills/skill.entity';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import type { TaskEntity } from '../tasks/task.entity';
import type { ConfigurationState, SkillState, SnippetState, TaskState } from './version-state';

export function snippetStateOf(row: PromptSnippetEntity): SnippetState {
  return {
    identifier: row.identifier,
    name: row.name,
    description: row.description ?? null,
    tags: row.tags,
    snippet: row.snippet,
    metadata: row.metadata ?? null,
    isActive: row.isActive,
    hidden: row.hidden,
    sorting: row.sorting,
    deleted: row.deleted,
  };
}

export function configurationStateOf(row: ConfigurationEntity, model: string, skillUids: number[]): ConfigurationState {
  return {
    identifier: row.identifier,
    name: row.name,
    description: row.description ?? null,
    modelUid: row.modelUid,
    model,
    systemPrompt: row.systemPrompt,
    snippetTags: row.snippetTags,
    temperature: row.temperature,
    maxTokens: row.maxTokens,
    topP: row.topP,
    frequencyPenalty: row.frequencyPenalty,
    presencePenalty: row.presencePenalty,
    timeout: row.timeout,
    options: row.options ?? null,
    skillUids,
    isActive: row.isActive,
    hidden: row.hidden,
    isDefault: row.isDefault,
    sorting: row.sorting,
    deleted: row.deleted,
  };
}

export function skillStateOf(row: SkillEntity): SkillState {
  return {
    identifier: row.identifier,
    name: row.name,
    description: row.description ?? null,
    body: row.body,
    bodyChecksum: row.bodyChecksum,
    enabled: row.enabled,
    hidden: row.hidden,
    deleted: row.deleted,
  };
}

/** A task's state: the row, its skill uids in relation order, and its extension row's texts (none: no variables, no schema). */
export function taskStateOf(row: TaskEntity, skillUids: number[], extension: { variables: string; outputSchema: string | null } | null): TaskState {
  return {
    identifier: row.identifier,
    name: row.name,
    description: row.description ?? null,
    category: row.category,
    configurationUid: row.configurationUid,
    promptTemplate: row.promptTemplate,
    inputType: row.inputType,
    outputFormat: row.outputFormat,
    skillUids,
    variables: extension?.variables ?? '[]',
    outputSchema: extension?.outputSchema ?? null,
    isActive: row.isActive,
    hidden: row.hidden,
    sorting: row.sorting,
    deleted: row.deleted,
  };
}
