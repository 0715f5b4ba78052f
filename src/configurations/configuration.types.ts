import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { IsOptional, MaxLength } from 'class-validator';
import { Extensions, Field, Float, InputType, Int, ObjectType } from 'type-graphql';
import { connectionTypes } from '../graphql/connection';
import { JSONScalar } from '../graphql/scalars';
import { phpObjectJson, RawJson } from '../graphql/raw-json';
import { readOptions } from '../prompt/call-options';
import { parseSelectionTags } from '../prompt/tags';
import { TagMatch } from '../snippets/snippet.types';
import type { ConfigurationEntity } from './configuration.entity';

@ObjectType({ simpleResolvers: true, description: 'A model with its parameters, its system prompt and the snippet tags composed into it.' })
export class LlmConfiguration {
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field({ description: 'The configuration\'s own prompt, without snippets.' }) systemPrompt!: string;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String], { description: 'Normalised, first occurrence kept.' }) snippetTags!: string[];
  @Field(() => Float) temperature!: number;
  @Field(() => Int) maxTokens!: number;
  @Field(() => Float) topP!: number;
  @Field(() => Float) frequencyPenalty!: number;
  @Field(() => Float) presencePenalty!: number;
  @Field(() => Int, { description: 'Seconds; 0 = the model\'s default.' }) timeout!: number;
  @Field(() => JSONScalar, { description: 'Merged over the typed parameters; always an object. As nr_llm decodes the column: PHP\'s values and key order, integers exact; `{}` when empty or invalid.' }) options!: RawJson;
  @Field() isActive!: boolean;
  @Field() hidden!: boolean;
  @Field() isDefault!: boolean;
  @Field(() => Int) sorting!: number;
  @Field(() => Int, { description: 'Daily cap on provider calls over all users (0 = none); a run\'s call past it ends the run `budget_exhausted`.' }) maxRequestsPerDay!: number;
  @Field(() => Int, { description: 'Daily cap on tokens over all users (0 = none): a call goes while the day\'s tokens are at most the cap.' }) maxTokensPerDay!: number;
  @Field(() => Float, { description: 'Daily cap on cost in US dollars over all users (0 = none).' }) maxCostPerDay!: number;
  entity!: ConfigurationEntity;
}

/** A cap as stored; a negative or unreadable value written by another program sets none (0). */
function capOf(value: unknown): number {
  const number = Number(value);
  return Number.isFinite(number) && number > 0 ? number : 0;
}

export function toLlmConfiguration(row: ConfigurationEntity): LlmConfiguration {
  return {
    uid: row.uid,
    identifier: row.identifier,
    name: row.name,
    description: row.description,
    systemPrompt: row.systemPrompt,
    snippetTags: parseSelectionTags(row.snippetTags),
    temperature: row.temperature,
    maxTokens: row.maxTokens,
    topP: row.topP,
    frequencyPenalty: row.frequencyPenalty,
    presencePenalty: row.presencePenalty,
    timeout: row.timeout,
    options: phpObjectJson(readOptions(row.options)),
    isActive: row.isActive,
    hidden: row.hidden,
    isDefault: row.isDefault,
    sorting: row.sorting,
    maxRequestsPerDay: capOf(row.maxRequestsPerDay),
    maxTokensPerDay: capOf(row.maxTokensPerDay),
    maxCostPerDay: capOf(row.maxCostPerDay),
    entity: row,
  };
}

@InputType()
export class CreateConfigurationInput {
  @Field() @MaxLength(100) identifier!: string;
  @Field() @MaxLength(255) name!: string;
  @Field(() => String, { nullable: true, description: 'Model identifier.' }) model?: string | null;
  @Field(() => String, { nullable: true }) systemPrompt?: string | null;
  @Field(() => [String], { nullable: true }) snippetTags?: string[] | null;
  @Field(() => Float, { nullable: true, description: '0 to 2.' }) temperature?: number;
  @Field(() => Int, { nullable: true, description: '≥ 0; 0 = unset.' }) maxTokens?: number;
  @Field(() => Float, { nullable: true, description: '0 to 1.' }) topP?: number;
  @Field(() => Float, { nullable: true, description: '-2 to 2.' }) frequencyPenalty?: number;
  @Field(() => Float, { nullable: true, description: '-2 to 2.' }) presencePenalty?: number;
  @Field(() => Int, { nullable: true }) timeout?: number;
  @Field(() => JSONScalar, { nullable: true, description: 'A JSON object merged over the typed parameters.' }) options?: unknown;
  @Field(() => [String], { nullable: true, description: 'Skill identifiers, in injection order.' }) skills?: string[] | null;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field({ nullable: true }) isActive?: boolean;
  @Field({ nullable: true }) hidden?: boolean;
  @Field({ nullable: true }) isDefault?: boolean;
  @Field(() => Int, { nullable: true }) sorting?: number;
  @Field(() => Int, { nullable: true, description: 'ADMIN only. Daily cap on provider calls over all users; 0 = none.' }) maxRequestsPerDay?: number;
  @Field(() => Int, { nullable: true, description: 'ADMIN only. Daily cap on tokens over all users; 0 = none.' }) maxTokensPerDay?: number;
  @Field(() => Float, { nullable: true, description: 'ADMIN only. Daily cap on cost in US dollars (two decimals) over all users; 0 = none.' }) maxCostPerDay?: number;
}

@InputType()
export class UpdateConfigurationInput {
  @Field({ nullable: true }) @IsOptional() @MaxLength(100) identifier?: string;
  @Field({ nullable: true }) @IsOptional() @MaxLength(255) name?: string;
  @Field(() => String, { nullable: true }) model?: string | null;
  @Field(() => String, { nullable: true }) systemPrompt?: string | null;
  @Field(() => [String], { nullable: true }) snippetTags?: string[] | null;
  @Field(() => Float, { nullable: true }) temperature?: number;
  @Field(() => Int, { nullable: true }) maxTokens?: number;
  @Field(() => Float, { nullable: true }) topP?: number;
  @Field(() => Float, { nullable: true }) frequencyPenalty?: number;
  @Field(() => Float, { nullable: true }) presencePenalty?: number;
  @Field(() => Int, { nullable: true }) timeout?: number;
  @Field(() => JSONScalar, { nullable: true }) options?: unknown;
  @Field(() => [String], { nullable: true }) skills?: string[] | null;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field({ nullable: true }) isActive?: boolean;
  @Field({ nullable: true }) hidden?: boolean;
  @Field({ nullable: true }) isDefault?: boolean;
  @Field(() => Int, { nullable: true }) sorting?: number;
  @Field(() => Int, { nullable: true, description: 'ADMIN only. Daily cap on provider calls over all users; 0 = none.' }) maxRequestsPerDay?: number;
  @Field(() => Int, { nullable: true, description: 'ADMIN only. Daily cap on tokens over all users; 0 = none.' }) maxTokensPerDay?: number;
  @Field(() => Float, { nullable: true, description: 'ADMIN only. Daily cap on cost in US dollars (two decimals) over all users; 0 = none.' }) maxCostPerDay?: number;
}

export const { ConnectionType: LlmConfigurationConnection } = connectionTypes(
  LlmConfiguration,
  'LlmConfiguration',
  'A page of configurations in list order (sorting, then name, then uid), with cursors.',
);

@InputType({ description: 'Filters of configurationsConnection; given ones combine with AND.' })
export class ConfigurationFilter {
  @Field(() => [String], {
    nullable: true,
    description: 'Configurations whose snippetTags hold these tags, matched as stored tags are read (` STYLE ` is `style`; `style` never matches `lifestyle`). At most 50.',
  })
  tags?: string[] | null;
  @Field(() => TagMatch, { nullable: true, defaultValue: TagMatch.ANY, description: 'ANY: at least one of `tags`; ALL: every one.' }) tagsMatch?: TagMatch | null;
  @Field(() => Boolean, { nullable: true }) isActive?: boolean | null;
  @Field(() => Boolean, { nullable: true }) hidden?: boolean | null;
  @Field(() => String, { nullable: true, description: 'Found, case-insensitively, in identifier, name or description. At most 1,000 characters.' }) search?: string | null;
}
