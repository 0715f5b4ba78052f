/**
 * The version state of each kind, read from its TYPO3 row. The one place that
 * says which columns a version keeps.
 */
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import type { SkillEntity } from '../skills/skill.entity';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import type { ConfigurationState, SkillState, SnippetState } from './version-state';

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
