import { Extensions, Field, ID, Int, ObjectType } from 'type-graphql';
import { EMBEDDED_LIST } from '../graphql/query-limits';
import { phpObjectJson, RawJson } from '../graphql/raw-json';
import { DateTimeScalar, JSONScalar } from '../graphql/scalars';
import { fromUnix } from '../shared/time';
import type { ReleasedRecord } from './release-rules';
import type { StoredRelease } from './release.service';

@ObjectType({ simpleResolvers: true, description: 'A snippet version composed into a release or a run.' })
export class ReleasedSnippet {
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field(() => Int, { description: 'The snippet\'s stored version (PromptSnippet.versions).' }) version!: number;
}

@ObjectType({ simpleResolvers: true, description: 'A skill version attached to a release.' })
export class ReleasedSkill {
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field(() => Int, { description: 'The skill\'s stored version (Skill.versions).' }) version!: number;
}

@ObjectType({
  simpleResolvers: true,
  description: 'A configuration frozen under a label by publishConfiguration: a run started with the label sends exactly this, whatever was edited since.',
})
export class ConfigurationRelease {
  @Field(() => ID) id!: string;
  @Field({ description: 'Lower case.' }) label!: string;
  @Field({ description: 'The system prompt with the snippet block appended, as a run sends it.' }) effectiveSystemPrompt!: string;
  @Extensions(EMBEDDED_LIST)
  @Field(() => [ReleasedSnippet], { description: 'The snippets composed into the prompt, in prompt order, with their versions.' }) snippets!: ReleasedSnippet[];
  @Extensions(EMBEDDED_LIST)
  @Field(() => [ReleasedSkill], { description: 'The attached skills, in injection order, with their versions.' }) skills!: ReleasedSkill[];
  @Field(() => JSONScalar, { description: 'The call options as they were built at publication (system_prompt included); a run may still set maxTokens and temperature.' })
  callOptions!: RawJson;
  @Field(() => Int, { description: 'The configuration version it was published from (LlmConfiguration.versions).' }) configurationVersion!: number;
  @Field(() => DateTimeScalar) createdAt!: Date;
  @Field(() => String, { nullable: true, description: 'The token name of the publisher.' }) author!: string | null;
}

export function toReleasedSnippet(record: ReleasedRecord): ReleasedSnippet {
  return { uid: record.uid, identifier: record.identifier, version: record.version };
}

export function toConfigurationRelease(release: StoredRelease): ConfigurationRelease {
  return {
    id: String(release.id),
    label: release.label,
    effectiveSystemPrompt: release.effectiveSystemPrompt,
    snippets: release.snippets.map(toReleasedSnippet),
    skills: release.skills.map((skill) => ({ uid: skill.uid, identifier: skill.identifier, version: skill.version })),
    callOptions: phpObjectJson(release.callOptions),
    configurationVersion: release.configurationVersion,
    createdAt: fromUnix(release.createdAt),
    author: release.author,
  };
}
