import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { IsInt, IsOptional, Max, MaxLength, Min } from 'class-validator';
import { Extensions, Field, InputType, Int, ObjectType, registerEnumType } from 'type-graphql';
import { connectionTypes } from '../graphql/connection';
import { DateTimeScalar, JSONScalar } from '../graphql/scalars';
import { fromUnix } from '../shared/time';
import { phpObjectJson, RawJson } from '../graphql/raw-json';
import { readMetadata } from '../prompt/snippet-metadata';
import type { PromptSnippetEntity } from './snippet.entity';
import { parseTags } from '../prompt/tags';

@ObjectType({ simpleResolvers: true, description: 'A tagged prompt fragment (persona, tone of voice, audience, style, layout …).' })
export class PromptSnippet {
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field({ description: 'The label when the snippet is composed into a prompt.' }) name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [String], { description: 'Normalised tag list, duplicates kept (behaviour.md §2).' }) tags!: string[];
  @Field({ description: 'The fragment text.' }) snippet!: string;
  @Field(() => JSONScalar, { description: 'Always an object; {} when empty or invalid. As nr_llm reads it: PHP\'s values and key order, integers exact.' }) metadata!: RawJson;
  @Field({ description: 'Operational switch: inactive snippets are out of every tag lookup.' }) isActive!: boolean;
  @Field({ description: 'Editorial switch: hidden snippets are listed but never composed into a prompt.' }) hidden!: boolean;
  @Field(() => Int) sorting!: number;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => DateTimeScalar) updatedAt!: Date;
}

export function toPromptSnippet(row: PromptSnippetEntity): PromptSnippet {
  return {
    uid: row.uid,
    identifier: row.identifier,
    name: row.name,
    description: row.description,
    tags: parseTags(row.tags),
    snippet: row.snippet,
    metadata: phpObjectJson(readMetadata(row.metadata)),
    isActive: row.isActive,
    hidden: row.hidden,
    sorting: row.sorting,
    createdAt: fromUnix(row.crdate),
    updatedAt: fromUnix(row.tstamp),
  };
}

@InputType()
export class CreateSnippetInput {
  @Field({ description: 'a-z 0-9 _ -, at most 100 characters, stored lower-case, unique.' }) @MaxLength(100) identifier!: string;
  @Field() @MaxLength(255) name!: string;
  @Field() snippet!: string;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field(() => [String], { nullable: true, description: 'No comma inside a tag; at most 255 characters joined.' }) tags?: string[];
  @Field(() => JSONScalar, { nullable: true, description: 'Must be a JSON object.' }) metadata?: unknown;
  @Field({ nullable: true }) isActive?: boolean;
  @Field({ nullable: true }) hidden?: boolean;
  @Field(() => Int, { nullable: true }) @IsOptional() @IsInt() @Min(0) @Max(2147483647) sorting?: number;
}

@InputType()
export class UpdateSnippetInput {
  @Field({ nullable: true }) @IsOptional() @MaxLength(100) identifier?: string;
  @Field({ nullable: true }) @IsOptional() @MaxLength(255) name?: string;
  @Field({ nullable: true }) snippet?: string;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field(() => [String], { nullable: true }) tags?: string[];
  @Field(() => JSONScalar, { nullable: true }) metadata?: unknown;
  @Field({ nullable: true }) isActive?: boolean;
  @Field({ nullable: true }) hidden?: boolean;
  @Field(() => Int, { nullable: true }) @IsOptional() @IsInt() @Min(0) @Max(2147483647) sorting?: number;
}

export const { ConnectionType: PromptSnippetConnection } = connectionTypes(
  PromptSnippet,
  'PromptSnippet',
  'A page of snippets in list order (sorting, then name, then uid), with cursors.',
);

export enum TagMatch {
  ANY = 'ANY',
  ALL = 'ALL',
}
registerEnumType(TagMatch, { name: 'TagMatch', description: 'Whether a tag filter wants any of its tags or all of them.' });

@InputType({ description: 'Filters of snippetsConnection; given ones combine with AND.' })
export class SnippetFilter {
  @Field(() => [String], {
    nullable: true,
    description: 'Snippets carrying these tags, matched as stored tags are read (` STYLE ` is `style`; `style` never matches `lifestyle`). At most 50. Does not imply isActive.',
  })
  tags?: string[] | null;
  @Field(() => TagMatch, { nullable: true, defaultValue: TagMatch.ANY, description: 'ANY: at least one of `tags`; ALL: every one.' }) tagsMatch?: TagMatch | null;
  @Field(() => Boolean, { nullable: true }) isActive?: boolean | null;
  @Field(() => Boolean, { nullable: true }) hidden?: boolean | null;
  @Field(() => String, { nullable: true, description: 'Found, case-insensitively, in identifier, name, description, tags or text. At most 1,000 characters.' }) search?: string | null;
}
