/**
 * Releases: a configuration frozen under a label. Publishing freezes what a
 * run of the configuration would send now — the effective system prompt,
 * the call options, the model, the attached skills — together with the
 * stored versions of the configuration and of every snippet and skill
 * composed into it. A run started with the label sends exactly that,
 * whatever was edited since.
 */
import type { DataSource, EntityManager } from 'typeorm';
import { type ConfigurationService } from '../configurations/configuration.service';
import { callOptionsOf, effectiveSystemPromptOf, selectedSnippetsOf } from '../prompt/configuration-prompt';
import type { ConfigurationEntity } from '../configurations/configuration.entity';
import type { IdentifierLock } from '../db/identifier-lock';
import type { ModelService } from '../providers/model.service';
import type { PromptHistoryService } from '../prompt-history/prompt-history.service';
import { skillStateOf, snippetStateOf } from '../prompt-history/record-states';
import type { VersionPins } from '../prompt-history/version-pins';
import type { SkillInput } from '../prompt/skill-block';
import { BadUserInputError, ConflictError, NotFoundError } from '../shared/errors';
import { phpJsonDecode, phpObjectText, type PhpArray } from '../shared/php-json';
import { unixNow } from '../shared/time';
import type { SkillEntity } from '../skills/skill.entity';
import type { PromptSnippetEntity } from '../snippets/snippet.entity';
import { ActiveSnippetIndex } from '../prompt/snippet-index';
import type { SnippetService } from '../snippets/snippet.service';
import { ConfigurationReleaseEntity } from './configuration-release.entity';
import { checkLabel, sameReleaseContent, type ReleaseContent, type ReleasedRecord } from './release-rules';

export interface ReleasedSkill extends ReleasedRecord {
  /** What a run injects of the skill. */
  skill: SkillInput;
}

export interface StoredRelease extends ReleaseContent {
  id: number;
  configurationUid: number;
  label: string;
  snippets: ReleasedRecord[];
  skills: ReleasedSkill[];
  author: string | null;
  /** Unix seconds. */
  createdAt: number;
}

type Frozen = ReleaseContent & { snippets: ReleasedRecord[]; skills: ReleasedSkill[] };

/** How often publishing reads again when a row changed between reading it and pinning its version. */
const FREEZE_ATTEMPTS = 3;

const RELEASE_TABLE = 'promptwire_configuration_release';

export class ReleaseService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly identifiers: IdentifierLock,
    private readonly configurations: ConfigurationService,
    private readonly models: ModelService,
    private readonly snippets: SnippetService,
    private readonly history: PromptHistoryService,
    private readonly pins: VersionPins,
  ) {}

  /**
   * Freezes the configuration under the label; the label then means this
   * release. Publishing an unchanged configuration under the label it already
   * has answers that release instead of adding an equal one.
   */
  async publish(identifier: string, label: string, author: string | null): Promise<StoredRelease> {
    const checked = requireLabel(label);
    for (let attempt = 0; attempt < FREEZE_ATTEMPTS; attempt += 1) {
      const configuration = await this.configurations.findByIdentifier(identifier);
      if (!configuration) throw new NotFoundError(`No configuration with identifier "${identifier}"`, 'identifier');
      const frozen = await this.freeze(configuration);
      if (!frozen) continue;
      return this.identifiers.transaction(RELEASE_TABLE, async (manager) => {
        const current = await this.latest(manager, configuration.uid, checked);
        if (current && sameReleaseContent(current, frozen)) return current;
        const row = await manager.getRepository(ConfigurationReleaseEntity).save(
          manager.getRepository(ConfigurationReleaseEntity).create({
            configurationUid: configuration.uid,
            label: checked,
            configurationVersion: frozen.configurationVersion,
            modelUid: frozen.modelUid,
            effectiveSystemPrompt: frozen.effectiveSystemPrompt,
            callOptions: phpObjectText(frozen.callOptions),
            snippets: JSON.stringify(frozen.snippets),
            skills: JSON.stringify(frozen.skills),
            author,
            createdAt: unixNow(),
          }),
        );
        return toStoredRelease(row);
      });
    }
    throw new ConflictError(`The configuration "${identifier}" or its snippets kept changing while it was being published; try again`, 'identifier');
  }

  /** What the label of the configuration means now; null for an unknown configuration or label. */
  async current(identifier: string, label: string): Promise<StoredRelease | null> {
    const checked = requireLabel(label);
    const configuration = await this.configurations.findByIdentifier(identifier);
    return configuration ? this.latest(this.dataSource.manager, configuration.uid, checked) : null;
  }

  /** What the label means now for a configuration known to exist; NOT_FOUND for a label never published. */
  async currentOf(configuration: ConfigurationEntity, label: string): Promise<StoredRelease> {
    const release = await this.latest(this.dataSource.manager, configuration.uid, requireLabel(label));
    if (!release) throw new NotFoundError(`The configuration "${configuration.identifier}" has no release labelled "${label}"; publishConfiguration makes one`, 'label');
    return release;
  }

  /** Every release of the given configurations, newest first (moved labels' older releases included); one query. */
  async forConfigurations(configurationUids: readonly number[]): Promise<StoredRelease[]> {
    if (configurationUids.length === 0) return [];
    const rows = await this.dataSource
      .getRepository(ConfigurationReleaseEntity)
      .createQueryBuilder('r')
      .where('r.configuration_uid IN (:...uids)', { uids: [...configurationUids] })
      .orderBy('r.id', 'DESC')
      .getMany();
    return rows.map(toStoredRelease);
  }

  async byIds(ids: readonly number[]): Promise<StoredRelease[]> {
    if (ids.length === 0) return [];
    const rows = await this.dataSource.getRepository(ConfigurationReleaseEntity).createQueryBuilder('r').where('r.id IN (:...ids)', { ids: [...ids] }).getMany();
    return rows.map(toStoredRelease);
  }

  /**
   * The stored versions of the snippets a run composed, for its record. When
   * one was edited while the run started, its newest stored version is named.
   */
  async composedVersions(rows: readonly PromptSnippetEntity[]): Promise<ReleasedRecord[]> {
    if (rows.length === 0) return [];
    const pinned = await this.pins.pin('snippet', rows.map((row) => ({ uid: row.uid, state: snippetStateOf(row) })));
    const versions = pinned ?? new Map([...(await this.history.latestVersions(this.dataSource.manager, 'snippet', rows.map((row) => row.uid)))].map(([uid, latest]) => [uid, latest.version]));
    return rows.map((row) => ({ uid: row.uid, identifier: row.identifier, version: versions.get(row.uid) ?? 0 }));
  }

  private async latest(manager: EntityManager, configurationUid: number, label: string): Promise<StoredRelease | null> {
    const row = await manager.getRepository(ConfigurationReleaseEntity).findOne({ where: { configurationUid, label }, order: { id: 'DESC' } });
    return row ? toStoredRelease(row) : null;
  }

  /**
   * What a run of the configuration would send now, with the versions of
   * what it was built from; null when a row changed between reading and
   * pinning (read again).
   */
  private async freeze(configuration: ConfigurationEntity): Promise<Frozen | null> {
    const [models, active, skillMap, configurationState] = await Promise.all([
      configuration.modelUid ? this.models.findByUids([configuration.modelUid]) : Promise.resolve([]),
      this.snippets.allActive().then((rows) => new ActiveSnippetIndex(rows)),
      this.configurations.skillsByConfiguration([configuration.uid]),
      this.history.configurationState(this.dataSource.manager, configuration),
    ]);
    const model = models[0] ?? null;
    const selected = selectedSnippetsOf(configuration, active);
    const skills: SkillEntity[] = skillMap.get(configuration.uid) ?? [];
    const configurationVersions = await this.pins.pin('configuration', [{ uid: configuration.uid, state: configurationState }]);
    const snippetVersions = await this.pins.pin('snippet', selected.map((row) => ({ uid: row.uid, state: snippetStateOf(row) })));
    const skillVersions = await this.pins.pin('skill', skills.map((row) => ({ uid: row.uid, state: skillStateOf(row) })));
    if (!configurationVersions || !snippetVersions || !skillVersions) return null;
    return {
      configurationVersion: configurationVersions.get(configuration.uid)!,
      modelUid: model?.uid ?? 0,
      effectiveSystemPrompt: effectiveSystemPromptOf(configuration, active),
      callOptions: callOptionsOf(configuration, model, active),
      snippets: selected.map((row) => ({ uid: row.uid, identifier: row.identifier, version: snippetVersions.get(row.uid)! })),
      skills: skills.map((row) => ({ uid: row.uid, identifier: row.identifier, version: skillVersions.get(row.uid)!, skill: skillInputOf(row) })),
    };
  }
}

function requireLabel(label: string): string {
  const checked = checkLabel(label);
  if (!checked.ok) throw new BadUserInputError(checked.message, 'label');
  return checked.label;
}

/** What the skill block of a run reads of an attached skill. */
export function skillInputOf(skill: SkillEntity): SkillInput {
  return {
    identifier: skill.identifier,
    source: skill.source ?? 0,
    name: skill.name,
    body: skill.body,
    bodyChecksum: skill.bodyChecksum,
    supportStatus: skill.supportStatus ?? 'full',
    enabled: skill.enabled,
    orphaned: skill.orphaned,
  };
}

function toStoredRelease(row: ConfigurationReleaseEntity): StoredRelease {
  return {
    id: row.id,
    configurationUid: row.configurationUid,
    label: row.label,
    configurationVersion: row.configurationVersion,
    modelUid: row.modelUid,
    effectiveSystemPrompt: row.effectiveSystemPrompt,
    callOptions: readStoredCallOptions(row.callOptions),
    snippets: parseJson<ReleasedRecord[]>(row.snippets, []),
    skills: parseJson<ReleasedSkill[]>(row.skills, []),
    author: row.author,
    createdAt: row.createdAt,
  };
}

/** A release's stored call options as PHP values; anything unreadable is an empty array. */
function readStoredCallOptions(text: string | null): PhpArray {
  const decoded = text === null ? undefined : phpJsonDecode(text);
  return decoded instanceof Map ? decoded : new Map();
}

function parseJson<T>(text: string, fallback: T): T {
  try {
    return (JSON.parse(text) as T) ?? fallback;
  } catch {
    return fallback;
  }
}
