import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { Extensions, Field, Float, Int, ObjectType } from 'type-graphql';
import { LlmConfiguration } from '../configurations/configuration.types';
import { DateTimeScalar, JSONScalar } from '../graphql/scalars';
import { PromptSnippet } from '../snippets/snippet.types';
import { fromUnix } from '../shared/time';
import { phpObjectJson, RawJson } from '../graphql/raw-json';
import { readMetadata } from '../prompt/snippet-metadata';
import { parseSelectionTags, parseTags } from '../prompt/tags';
import type { StoredVersion, VersionDiff } from './prompt-history.service';

@ObjectType({ simpleResolvers: true, description: 'One stored state of a snippet.' })
export class SnippetVersion {
  @Field(() => Int) version!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field() snippet!: string;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String]) tags!: string[];
  @Field(() => JSONScalar) metadata!: RawJson;
  @Field() isActive!: boolean;
  @Field() hidden!: boolean;
  @Field(() => Int) sorting!: number;
  @Field({ description: 'The row was deleted in this version.' }) deleted!: boolean;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => String, { nullable: true, description: 'The token name behind an API write; null for external changes.' }) author!: string | null;
  @Field({ description: '"api" (written through this service) or "external" (a row changed in the table by someone else, e.g. TYPO3).' }) source!: string;
}

@ObjectType({ simpleResolvers: true, description: 'One stored state of a configuration.' })
export class ConfigurationVersion {
  @Field(() => Int) version!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field() systemPrompt!: string;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String]) snippetTags!: string[];
  @Field(() => String, { nullable: true, description: 'The model identifier at the time.' }) model!: string | null;
  @Field(() => Float) temperature!: number;
  @Field(() => Int) maxTokens!: number;
  @Field(() => Float) topP!: number;
  @Field() isActive!: boolean;
  @Field() hidden!: boolean;
  @Field() deleted!: boolean;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => String, { nullable: true }) author!: string | null;
  @Field() source!: string;
}

@ObjectType({ simpleResolvers: true, description: 'One stored state of a skill.' })
export class SkillVersion {
  @Field(() => Int) version!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field() body!: string;
  @Field() enabled!: boolean;
  @Field() deleted!: boolean;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => String, { nullable: true }) author!: string | null;
  @Field() source!: string;
}

@ObjectType({ simpleResolvers: true })
export class FieldChange {
  @Field({ description: 'The field name as stored in the version (tags and snippetTags as their stored CSV).' }) field!: string;
  @Field(() => JSONScalar, { nullable: true }) before!: unknown;
  @Field(() => JSONScalar, { nullable: true }) after!: unknown;
}

@ObjectType({ simpleResolvers: true, description: 'What changed between two versions.' })
export class VersionDiffView {
  @Field(() => Int) from!: number;
  @Field(() => Int) to!: number;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [FieldChange], { description: 'Every field whose value differs.' }) fields!: FieldChange[];
  @Field({ description: 'Unified diff of the main text (snippet text, system prompt, skill body); "" when it is unchanged.' }) textDiff!: string;
}

const common = (stored: StoredVersion) => ({
  version: stored.version,
  createdAt: fromUnix(stored.createdAt),
  author: stored.author,
  source: stored.source,
});

export function toSnippetVersion(stored: StoredVersion<'snippet'>): SnippetVersion {
  const s = stored.state;
  return {
    ...common(stored),
    identifier: s.identifier,
    name: s.name,
    description: s.description,
    snippet: s.snippet,
    tags: parseTags(s.tags),
    metadata: phpObjectJson(readMetadata(s.metadata)),
    isActive: s.isActive,
    hidden: s.hidden,
    sorting: s.sorting,
    deleted: s.deleted,
  };
}

export function toConfigurationVersion(stored: StoredVersion<'configuration'>): ConfigurationVersion {
  const s = stored.state;
  return {
    ...common(stored),
    identifier: s.identifier,
    name: s.name,
    systemPrompt: s.systemPrompt,
    snippetTags: parseSelectionTags(s.snippetTags),
    model: s.model === '' ? null : s.model,
    temperature: s.temperature,
    maxTokens: s.maxTokens,
    topP: s.topP,
    isActive: s.isActive,
    hidden: s.hidden,
    deleted: s.deleted,
  };
}

export function toSkillVersion(stored: StoredVersion<'skill'>): SkillVersion {
  const s = stored.state;
  return { ...common(stored), identifier: s.identifier, name: s.name, body: s.body, enabled: s.enabled, deleted: s.deleted };
}

@ObjectType({ simpleResolvers: true, description: 'One stored state of a task.' })
export class TaskVersion {
  @Field(() => Int) version!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field() category!: string;
  @Field() promptTemplate!: string;
  @Field() outputFormat!: string;
  @Field(() => JSONScalar, { description: 'The declared variables as stored.' }) variables!: unknown;
  @Field(() => JSONScalar, { nullable: true }) outputSchema!: unknown;
  @Field() isActive!: boolean;
  @Field() deleted!: boolean;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => String, { nullable: true }) author!: string | null;
  @Field() source!: string;
}

export function toTaskVersion(stored: StoredVersion<'task'>): TaskVersion {
  const s = stored.state;
  return {
    ...common(stored),
    identifier: s.identifier,
    name: s.name,
    category: s.category,
    promptTemplate: s.promptTemplate,
    outputFormat: s.outputFormat,
    variables: readJson(s.variables, []),
    outputSchema: s.outputSchema === null ? null : readJson(s.outputSchema, null),
    isActive: s.isActive,
    deleted: s.deleted,
  };
}

function readJson(text: string, fallback: unknown): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return fallback;
  }
}

export function toVersionDiff(diff: VersionDiff): VersionDiffView {
  return { from: diff.from, to: diff.to, fields: diff.fields, textDiff: diff.textDiff };
}

@ObjectType({ simpleResolvers: true, description: 'A snippet in a configuration\'s prompt and why it is there.' })
export class CompositionPart {
  @Field(() => PromptSnippet) snippet!: PromptSnippet;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String], { description: 'The configuration\'s tags that matched the snippet, in the configuration\'s order.' }) matchedTags!: string[];
  @Field({ description: 'The exact block it adds to the prompt ("Name:\\ntext"); "" when its text is empty.' }) text!: string;
}

@ObjectType({ simpleResolvers: true, description: 'A snippet the tags matched that is not in the prompt.' })
export class DroppedSnippet {
  @Field(() => PromptSnippet) snippet!: PromptSnippet;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String]) matchedTags!: string[];
  @Field({ description: 'INACTIVE (is_active = 0), HIDDEN (the editorial switch) or DUPLICATE (an identifier already selected).' }) reason!: string;
}

@ObjectType({ simpleResolvers: true, description: 'Where each part of the effective prompt comes from.' })
export class Composition {
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [CompositionPart], { description: 'The selected snippets in prompt order.' }) parts!: CompositionPart[];
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [DroppedSnippet]) dropped!: DroppedSnippet[];
}

@ObjectType({ simpleResolvers: true, description: 'How a configuration\'s effective prompt would change.' })
export class PromptChange {
  @Field(() => LlmConfiguration) configuration!: LlmConfiguration;
  @Field() before!: string;
  @Field() after!: string;
  @Field({ description: 'Unified diff from before to after.' }) diff!: string;
}

@ObjectType('PromptChangeEvent', { simpleResolvers: true, description: 'A snippet, configuration, skill or task changed (through the API or in the tables).' })
export class PromptChangeEventView {
  @Field({ description: 'snippet, configuration, skill or task' }) kind!: string;
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field(() => Int, { nullable: true }) version!: number | null;
  @Field({ description: 'api or external' }) source!: string;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String], { description: 'Identifiers of the configurations whose prompt the change may alter.' }) affectedConfigurations!: string[];
  @Field(() => DateTimeScalar) at!: Date;
}
