import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { IsOptional, MaxLength } from 'class-validator';
import { Extensions, Field, Float, InputType, Int, ObjectType } from 'type-graphql';
import { keyState } from './provider.service';
import type { ModelEntity } from './model.entity';
import type { ProviderEntity } from './provider.entity';

@ObjectType({ simpleResolvers: true, description: 'An LLM endpoint. Its API key is write-only: `hasApiKey` says whether one is set.' })
export class LlmProvider {
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field({ description: 'openai, anthropic, gemini, ollama, openrouter, mistral, groq, custom (OpenAI-compatible) or demo (a local deterministic model, no network).' }) adapterType!: string;
  @Field(() => String, { nullable: true }) endpointUrl!: string | null;
  @Field({ description: 'Whether a key is stored; the key itself is never readable.' }) hasApiKey!: boolean;
  @Field({ description: 'none, stored (encrypted here), environment (env:NAME) or external (a TYPO3 vault identifier this service cannot read).' }) apiKeySource!: string;
  @Field(() => Int) apiTimeout!: number;
  @Field(() => Int) maxRetries!: number;
  @Field(() => Int) priority!: number;
  @Field() isActive!: boolean;
}

export function toLlmProvider(row: ProviderEntity): LlmProvider {
  const state = keyState(row.apiKey);
  return {
    uid: row.uid,
    identifier: row.identifier,
    name: row.name,
    description: row.description,
    adapterType: row.adapterType,
    endpointUrl: row.endpointUrl === '' ? null : row.endpointUrl,
    hasApiKey: state !== 'none',
    apiKeySource: state,
    apiTimeout: row.apiTimeout,
    maxRetries: row.maxRetries,
    priority: row.priority,
    isActive: row.isActive,
  };
}

@InputType()
export class CreateProviderInput {
  @Field() @MaxLength(100) identifier!: string;
  @Field() @MaxLength(255) name!: string;
  @Field() adapterType!: string;
  @Field(() => String, { nullable: true }) endpointUrl?: string | null;
  @Field(() => String, { nullable: true, description: 'Write-only; stored encrypted. "env:NAME" reads the variable NAME at call time.' }) apiKey?: string | null;
  @Field(() => String, { nullable: true }) organizationId?: string | null;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field(() => Int, { nullable: true }) apiTimeout?: number;
  @Field(() => Int, { nullable: true }) maxRetries?: number;
  @Field(() => Int, { nullable: true }) priority?: number;
  @Field({ nullable: true }) isActive?: boolean;
}

@InputType()
export class UpdateProviderInput {
  @Field({ nullable: true }) @IsOptional() @MaxLength(100) identifier?: string;
  @Field({ nullable: true }) @IsOptional() @MaxLength(255) name?: string;
  @Field({ nullable: true }) adapterType?: string;
  @Field(() => String, { nullable: true }) endpointUrl?: string | null;
  @Field(() => String, { nullable: true, description: 'Write-only. null or "" removes the key.' }) apiKey?: string | null;
  @Field(() => String, { nullable: true }) organizationId?: string | null;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field(() => Int, { nullable: true }) apiTimeout?: number;
  @Field(() => Int, { nullable: true }) maxRetries?: number;
  @Field(() => Int, { nullable: true }) priority?: number;
  @Field({ nullable: true }) isActive?: boolean;
}

@ObjectType({ simpleResolvers: true, description: 'A provider model with its limits and prices (US cents per million tokens).' })
export class LlmModel {
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field() modelId!: string;
  @Field(() => Int, { description: '0 = unknown (8192 is assumed).' }) contextLength!: number;
  @Field(() => Int, { description: '0 = unknown.' }) maxOutputTokens!: number;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String]) capabilities!: string[];
  @Field(() => Int) defaultTimeout!: number;
  @Field(() => Int, { description: 'US cents per million input tokens.' }) costInput!: number;
  @Field(() => Int, { description: 'US cents per million output tokens.' }) costOutput!: number;
  @Field() isActive!: boolean;
  @Field() isDefault!: boolean;
  providerUid!: number;
}

export function toLlmModel(row: ModelEntity): LlmModel {
  return {
    uid: row.uid,
    identifier: row.identifier,
    name: row.name,
    description: row.description,
    modelId: row.modelId,
    contextLength: row.contextLength,
    maxOutputTokens: row.maxOutputTokens,
    capabilities: row.capabilities.split(',').map((c) => c.trim()).filter((c) => c !== ''),
    defaultTimeout: row.defaultTimeout,
    costInput: row.costInput,
    costOutput: row.costOutput,
    isActive: row.isActive,
    isDefault: row.isDefault,
    providerUid: row.providerUid,
  };
}

@ObjectType({ simpleResolvers: true, description: 'Prices beyond input/output, US cents per million tokens; null = billed at the input/output price.' })
export class ModelExtraPrices {
  @Field(() => Int, { nullable: true }) costCacheRead!: number | null;
  @Field(() => Int, { nullable: true }) costCacheWrite!: number | null;
  @Field(() => Int, { nullable: true }) costReasoning!: number | null;
}

@InputType()
export class CreateModelInput {
  @Field() @MaxLength(100) identifier!: string;
  @Field() @MaxLength(255) name!: string;
  @Field({ description: 'Provider identifier.' }) provider!: string;
  @Field() modelId!: string;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field(() => Int, { nullable: true }) contextLength?: number;
  @Field(() => Int, { nullable: true }) maxOutputTokens?: number;
  @Field(() => [String], { nullable: true }) capabilities?: string[];
  @Field(() => Int, { nullable: true }) defaultTimeout?: number;
  @Field(() => Int, { nullable: true }) costInput?: number;
  @Field(() => Int, { nullable: true }) costOutput?: number;
  @Field(() => Int, { nullable: true }) costCacheRead?: number | null;
  @Field(() => Int, { nullable: true }) costCacheWrite?: number | null;
  @Field(() => Int, { nullable: true }) costReasoning?: number | null;
  @Field({ nullable: true }) isActive?: boolean;
  @Field({ nullable: true }) isDefault?: boolean;
}

@InputType()
export class UpdateModelInput {
  @Field({ nullable: true }) @IsOptional() @MaxLength(100) identifier?: string;
  @Field({ nullable: true }) @IsOptional() @MaxLength(255) name?: string;
  @Field({ nullable: true }) provider?: string;
  @Field({ nullable: true }) modelId?: string;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field(() => Int, { nullable: true }) contextLength?: number;
  @Field(() => Int, { nullable: true }) maxOutputTokens?: number;
  @Field(() => [String], { nullable: true }) capabilities?: string[];
  @Field(() => Int, { nullable: true }) defaultTimeout?: number;
  @Field(() => Int, { nullable: true }) costInput?: number;
  @Field(() => Int, { nullable: true }) costOutput?: number;
  @Field(() => Int, { nullable: true }) costCacheRead?: number | null;
  @Field(() => Int, { nullable: true }) costCacheWrite?: number | null;
  @Field(() => Int, { nullable: true }) costReasoning?: number | null;
  @Field({ nullable: true }) isActive?: boolean;
  @Field({ nullable: true }) isDefault?: boolean;
}

@ObjectType({ simpleResolvers: true, description: 'The outcome of a minimal test call to a provider.' })
export class ProviderTestResult {
  @Field() ok!: boolean;
  @Field(() => Float, { description: 'Milliseconds for the call.' }) latencyMs!: number;
  @Field(() => String, { nullable: true }) model!: string | null;
  @Field(() => String, { nullable: true, description: 'The model\'s answer, when ok.' }) answer!: string | null;
  @Field(() => String, { nullable: true, description: 'What went wrong and what to do, when not ok.' }) error!: string | null;
}

