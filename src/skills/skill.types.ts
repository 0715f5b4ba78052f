import { IsOptional, MaxLength } from 'class-validator';
import { Field, InputType, Int, ObjectType } from 'type-graphql';
import { skillChecksumMatches } from '../prompt/skill-block';
import type { SkillEntity } from './skill.entity';

@ObjectType({ simpleResolvers: true, description: 'Reviewed reference prose injected into the first user message of a run.' })
export class Skill {
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field() body!: string;
  @Field() enabled!: boolean;
  @Field() orphaned!: boolean;
  @Field({ description: 'Whether the body still matches its reviewed checksum; a mismatch keeps the skill out of runs.' }) checksumValid!: boolean;
}

export function toSkill(row: SkillEntity): Skill {
  return {
    uid: row.uid,
    identifier: row.identifier,
    name: row.name,
    description: row.description,
    body: row.body,
    enabled: row.enabled,
    orphaned: row.orphaned,
    checksumValid: skillChecksumMatches(row),
  };
}

@InputType()
export class CreateSkillInput {
  @Field() @MaxLength(100) identifier!: string;
  @Field() @MaxLength(255) name!: string;
  @Field() body!: string;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field({ nullable: true }) enabled?: boolean;
}

@InputType()
export class UpdateSkillInput {
  @Field({ nullable: true }) @IsOptional() @MaxLength(100) identifier?: string;
  @Field({ nullable: true }) @IsOptional() @MaxLength(255) name?: string;
  @Field({ nullable: true }) body?: string;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field({ nullable: true }) enabled?: boolean;
}
