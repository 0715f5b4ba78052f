import type { DataSource, EntityManager } from 'typeorm';
import { checkFirst, type KeysetPage, type PagingCursors } from '../db/keyset';
import { getEntities, getPreparedEntityRows } from '../db/raw-rows';
import type { IdentifierLock } from '../db/identifier-lock';
import { assertIdentifierAvailable, checkPage, findLiveByIdentifierOrFail, findLiveOrFail, normalizeIdentifier, optionalText, type Page, requireName, liveRowsInListOrder, newRecordColumns } from '../db/record-rules';
import { checkTextFits, textLimitOf } from '../db/text-limits';
import { ModelEntity } from '../providers/model.entity';
import { ProviderEntity } from '../providers/provider.entity';
import type { PromptHistoryService } from '../prompt-history/prompt-history.service';
import type { ConfigurationState } from '../prompt-history/version-state';
import { BadUserInputError, ConflictError, ForbiddenError } from '../shared/errors';
import { unixNow } from '../shared/time';
import { SkillEntity } from '../skills/skill.entity';
import { parseMetadataForWrite } from '../prompt/snippet-metadata';
import { parseSelectionTags, validateTagsForWrite } from '../prompt/tags';
import { type TaggedListPageRequest, taggedListFilterOf } from '../snippets/tagged-list-filter';
import { ConfigurationSkillEntity } from './configuration-skill.entity';
import { ConfigurationEntity } from './configuration.entity';
import { CONFIGURATION_KEY_KINDS, CONFIGURATION_LIST, type ConfigurationRepository, type ListedConfiguration } from './configuration.repository';
import { adminOnlyOptionChanged, EDITOR_OPTION_KEYS, optionEntries } from './editor-options';

export interface ConfigurationWrite {
  identifier?: string;
  name?: string;
  description?: string | null;
  /** Model identifier; null detaches the model. */
  model?: string | null;
  systemPrompt?: string | null;
  snippetTags?: string[] | null;
  temperature?: number;
  maxTokens?: number;
  topP?: number;
  frequencyPenalty?: number;
  presencePenalty?: number;
  timeout?: number;
  options?: unknown;
  /** Skill identifiers in injection order; replaces the attached list. */
  skills?: string[] | null;
  isActive?: boolean;
  hidden?: boolean;
  isDefault?: boolean;
  sorting?: number;
  /** The daily caps over all users (0 = none); an ADMIN's to set. */
  maxRequestsPerDay?: number;
  maxTokensPerDay?: number;
  maxCostPerDay?: number;
}

/** The daily caps: whole counts within `int(11)`, dollars within `decimal(10,2)`. */
const CAPS = {
  maxRequestsPerDay: { max: 2_147_483_647, whole: true },
  maxTokensPerDay: { max: 2_147_483_647, whole: true },
  maxCostPerDay: { max: 99_999_999.99, whole: false },
} as const;

const RANGES = {
  temperature: [0, 2],
  topP: [0, 1],
  frequencyPenalty: [-2, 2],
  presencePenalty: [-2, 2],
} as const;

/** Who writes: an ADMIN may set any `options` key; others only the EDITOR_OPTION_KEYS. */
export interface ConfigurationWriter {
  mayChangeAdminOptions: boolean;
}

const ADMIN: ConfigurationWriter = { mayChangeAdminOptions: true };

export class ConfigurationService {
  constructor(
    private readonly dataSource: DataSource,
    private readonly identifiers: IdentifierLock,
    private readonly history: PromptHistoryService,
    private readonly repository: ConfigurationRepository,
    private readonly cursors: PagingCursors,
  ) {}

  /**
   * One page of the non-deleted configurations that pass the filters, in list
   * order (sorting, then name, then uid), each with its model and provider,
   * after the position `after` names. `tags` match `snippetTags` by the tag rules.
   */
  async page(request: TaggedListPageRequest): Promise<KeysetPage<ListedConfiguration>> {
    const first = checkFirst(request.first);
    const source = this.repository.listed(taggedListFilterOf(request));
    return this.cursors.readPage(CONFIGURATION_LIST, CONFIGURATION_KEY_KINDS, source, first, request.after);
  }

  /** The non-deleted configurations with these uids (any order). */
  async findByUids(uids: readonly number[]): Promise<ConfigurationEntity[]> {
    return this.repository.findByUids(uids);
  }

  async list(page: Page): Promise<ConfigurationEntity[]> {
    const { limit, offset } = checkPage(page);
    return getEntities(this.dataSource, liveRowsInListOrder(this.dataSource, ConfigurationEntity, 'c').limit(limit).offset(offset));
  }

  /**
   * A page of configurations with their model and provider in one query (the
   * list view asks for them nearly always; the GraphQL layer primes its loaders).
   */
  async listWithModels(page: Page): Promise<{ configuration: ConfigurationEntity; model: ModelEntity | null; provider: ProviderEntity | null }[]> {
    const { limit, offset } = checkPage(page);
    const query = () =>
      liveRowsInListOrder(this.dataSource, ConfigurationEntity, 'c')
        .leftJoin(ModelEntity, 'm', 'm.uid = c.model_uid AND m.deleted = 0')
        .leftJoin(ProviderEntity, 'p', 'p.uid = m.provider_uid AND p.deleted = 0')
        .addSelect('m')
        .addSelect('p')
        .limit(limit)
        .offset(offset);
    const rows = await getPreparedEntityRows(this.dataSource, `configurations:page:${limit}:${offset}`, query, ['m', 'p']);
    return rows.map(({ main, joined: [model, provider] }) => ({
      configuration: main,
      model: (model as ModelEntity | null) ?? null,
      provider: (provider as ProviderEntity | null) ?? null,
    }));
  }

  async findByUid(uid: number): Promise<ConfigurationEntity | null> {
    return this.dataSource.getRepository(ConfigurationEntity).findOne({ where: { uid, deleted: false } });
  }

  /** The active default configuration (nr_llm's `findDefault`), used where a caller names none; null when there is none. */
  async findActiveDefault(): Promise<ConfigurationEntity | null> {
    return this.repository.findActiveDefault();
  }

  async findByIdentifier(identifier: string): Promise<ConfigurationEntity | null> {
    return this.dataSource
      .getRepository(ConfigurationEntity)
      .findOne({ where: { identifier: identifier.trim().toLowerCase(), deleted: false }, order: { uid: 'ASC' } });
  }

  /** The installation's default: the first active configuration marked as default (a conversation opened without one runs on it). */
  async findDefault(): Promise<ConfigurationEntity | null> {
    return this.dataSource.getRepository(ConfigurationEntity).findOne({ where: { isDefault: true, isActive: true, deleted: false }, order: { uid: 'ASC' } });
  }

  /** Skills attached to each configuration, in relation `sorting` order; one query for any number of configurations. */
  async skillsByConfiguration(configurationUids: readonly number[]): Promise<Map<number, SkillEntity[]>> {
    const result = new Map<number, SkillEntity[]>(configurationUids.map((uid) => [uid, []]));
    if (configurationUids.length === 0) return result;
    const rows = await this.dataSource
      .getRepository(ConfigurationSkillEntity)
      .createQueryBuilder('mm')
      .innerJoin(SkillEntity, 's', 's.uid = mm.uid_foreign AND s.deleted = 0')
      .select(['mm.uid_local AS configuration_uid', 'mm.sorting AS relation_sorting', 's.*'])
      .where('mm.uid_local IN (:...uids)', { uids: [...configurationUids] })
      .orderBy('mm.uid_local', 'ASC')
      .addOrderBy('mm.sorting', 'ASC')
      .getRawMany<Record<string, unknown>>();
    const skillRepository = this.dataSource.getRepository(SkillEntity);
    for (const raw of rows) {
      const skill = skillRepository.create({
        uid: Number(raw.uid),
        pid: Number(raw.pid),
        tstamp: Number(raw.tstamp),
        crdate: Number(raw.crdate),
        source: Number(raw.source ?? 0) || 0,
        identifier: String(raw.identifier ?? ''),
        name: String(raw.name ?? ''),
        description: raw.description === null || raw.description === undefined ? null : String(raw.description),
        body: String(raw.body ?? ''),
        bodyChecksum: String(raw.body_checksum ?? ''),
        supportStatus: String(raw.support_status ?? 'full'),
        enabled: Number(raw.enabled) !== 0,
        orphaned: Number(raw.orphaned) !== 0,
        hidden: Number(raw.hidden) !== 0,
        deleted: false,
      });
      result.get(Number(raw.configuration_uid))?.push(skill);
    }
    return result;
  }

  /** `author` is the token name behind the write; it is stored with the version. */
  async create(input: ConfigurationWrite, author: string | null = null, writer: ConfigurationWriter = ADMIN): Promise<ConfigurationEntity> {
    const identifier = normalizeIdentifier(input.identifier ?? '');
    const [saved, change] = await this.identifiers.transaction('tx_nrllm_configuration', async (manager) => {
        await assertIdentifierAvailable(manager, ConfigurationEntity, identifier, null, 'configuration');
        const now = unixNow();
        const row = manager.create(ConfigurationEntity, {
          ...newRecordColumns(now),
          description: null,
          modelUid: 0,
          systemPrompt: '',
          temperature: 0.7,
          maxTokens: 1000,
          topP: 1,
          frequencyPenalty: 0,
          presencePenalty: 0,
          timeout: 0,
          options: null,
          snippetTags: '',
          skills: 0,
          isActive: true,
          isDefault: false,
          sorting: 0,
        });
        const skillUids = await this.applyWrite(manager, row, { ...input, identifier }, true, writer);
        if (skillUids) row.skills = skillUids.length;
        const created = await manager.save(row);
        if (skillUids) await this.replaceSkills(manager, created.uid, skillUids);
        return [created, await this.recordVersion(manager, created, null, author)] as const;
      });
    this.history.announce(change);
    return saved;
  }

  async update(uid: number, input: ConfigurationWrite, author: string | null = null, writer: ConfigurationWriter = ADMIN): Promise<ConfigurationEntity> {
    const identifier = input.identifier === undefined ? undefined : normalizeIdentifier(input.identifier);
    return this.change(uid, author, async (manager, row) => {
      if (identifier !== undefined) await assertIdentifierAvailable(manager, ConfigurationEntity, identifier, uid, 'configuration');
      const skillUids = await this.applyWrite(manager, row, { ...input, identifier }, false, writer);
      if (skillUids) {
        row.skills = skillUids.length;
        await this.replaceSkills(manager, uid, skillUids);
      }
    });
  }

  /**
   * Writes a stored version's content back (the identifier stays); the result
   * is a new version. A model or skill deleted since cannot come back: CONFLICT.
   */
  async restore(uid: number, version: number, author: string | null = null): Promise<ConfigurationEntity> {
    const { state } = await this.history.version('configuration', uid, version);
    return this.change(uid, author, async (manager, row) => {
      if (state.modelUid && !(await manager.getRepository(ModelEntity).findOne({ where: { uid: state.modelUid, deleted: false } }))) {
        throw new ConflictError(`Version ${version} uses the model "${state.model}", which no longer exists`, 'version');
      }
      const skillUids: number[] = [];
      for (const skillUid of state.skillUids) {
        if (await manager.getRepository(SkillEntity).findOne({ where: { uid: skillUid, deleted: false } })) skillUids.push(skillUid);
      }
      const restored: Partial<ConfigurationState> = { ...state };
      delete restored.identifier;
      delete restored.model;
      delete restored.skillUids;
      delete restored.deleted;
      Object.assign(row, restored, { skills: skillUids.length });
      await this.replaceSkills(manager, uid, skillUids);
    });
  }

  async delete(uid: number, author: string | null = null): Promise<boolean> {
    await this.change(uid, author, async (_manager, row) => {
      row.deleted = true;
    });
    return true;
  }

  /** One write to a live row: lock, change, stamp, save, store the version; announced after commit. */
  private async change(uid: number, author: string | null, apply: (manager: EntityManager, row: ConfigurationEntity) => Promise<void>): Promise<ConfigurationEntity> {
    const [saved, change] = await this.identifiers.transaction('tx_nrllm_configuration', async (manager) => {
        const row = await findLiveOrFail(manager, ConfigurationEntity, uid, 'configuration');
        const previous = await this.history.configurationState(manager, row);
        await apply(manager, row);
        row.tstamp = unixNow();
        const updated = await manager.save(row);
        return [updated, await this.recordVersion(manager, updated, previous, author)] as const;
      });
    this.history.announce(change);
    return saved;
  }

  private async recordVersion(manager: EntityManager, row: ConfigurationEntity, previous: ConfigurationState | null, author: string | null) {
    const state = await this.history.configurationState(manager, row);
    return this.history.record(manager, { kind: 'configuration', uid: row.uid, state, previous, origin: { source: 'api', author } });
  }

  private async replaceSkills(manager: EntityManager, configurationUid: number, skillUids: number[]): Promise<void> {
    await manager.delete(ConfigurationSkillEntity, { uidLocal: configurationUid });
    if (skillUids.length === 0) return;
    await manager.insert(
      ConfigurationSkillEntity,
      skillUids.map((uidForeign, index) => ({ uidLocal: configurationUid, uidForeign, sorting: index + 1, sortingForeign: 0 })),
    );
  }

  /** Validates and applies; returns the skill uids when the skill list is being replaced. */
  private async applyWrite(manager: EntityManager, row: ConfigurationEntity, input: ConfigurationWrite, creating: boolean, writer: ConfigurationWriter): Promise<number[] | null> {
    const changes: Partial<ConfigurationEntity> = {};
    if (input.identifier !== undefined) changes.identifier = input.identifier;
    if (creating || input.name !== undefined) changes.name = requireName(input.name ?? '');
    if (input.description !== undefined) changes.description = optionalText(input.description, textLimitOf(ConfigurationEntity, 'description'), 'description') ?? null;
    if (input.systemPrompt !== undefined) changes.systemPrompt = optionalText(input.systemPrompt ?? '', textLimitOf(ConfigurationEntity, 'systemPrompt'), 'systemPrompt') ?? '';
    if (input.snippetTags !== undefined) {
      const tags = validateTagsForWrite(input.snippetTags ?? []);
      if (!tags.ok) throw new BadUserInputError(tags.message, 'snippetTags');
      // A configuration's selection keeps the first of repeated tags (behaviour.md §2).
      changes.snippetTags = parseSelectionTags(tags.csv).join(',');
    }
    for (const key of Object.keys(RANGES) as (keyof typeof RANGES)[]) {
      const value = input[key];
      if (value === undefined || value === null) continue;
      const [min, max] = RANGES[key];
      if (!Number.isFinite(value) || value < min || value > max) throw new BadUserInputError(`${key} must be between ${min} and ${max}`, key);
      changes[key] = Math.round(value * 100) / 100;
    }
    if (input.maxTokens !== undefined && input.maxTokens !== null) {
      if (!Number.isInteger(input.maxTokens) || input.maxTokens < 0) throw new BadUserInputError('maxTokens must be a whole number ≥ 0 (0 = unset)', 'maxTokens');
      changes.maxTokens = input.maxTokens;
    }
    if (input.timeout !== undefined && input.timeout !== null) {
      if (!Number.isInteger(input.timeout) || input.timeout < 0 || input.timeout > 3600) throw new BadUserInputError('timeout must be 0 to 3600 seconds (0 = the model\'s default)', 'timeout');
      changes.timeout = input.timeout;
    }
    if (input.options !== undefined) {
      if (input.options === null) changes.options = null;
      else {
        const options = parseMetadataForWrite(input.options);
        if (!options.ok) throw new BadUserInputError(options.message.replace(/^metadata/, 'options'), 'options');
        checkTextFits(options.json, textLimitOf(ConfigurationEntity, 'options'), 'options', 'options as JSON');
        const timeout = (JSON.parse(options.json) as Record<string, unknown>).timeout;
        // The same range as the timeout column: a value past it would make every call time out at once.
        if (timeout !== undefined && !(typeof timeout === 'number' && Number.isFinite(timeout) && timeout >= 0 && timeout <= 3600)) {
          throw new BadUserInputError('options.timeout must be a number of seconds from 0 to 3600 (0 = the model\'s default)', 'options');
        }
        changes.options = options.json;
      }
      if (!writer.mayChangeAdminOptions) {
        const key = adminOnlyOptionChanged(optionEntries(row.options), optionEntries(changes.options ?? null));
        if (key !== null) {
          throw new ForbiddenError(`options.${key} is set by an ADMIN only; an EDITOR may set ${EDITOR_OPTION_KEYS.join(', ')}`, 'options');
        }
      }
    }
    for (const key of Object.keys(CAPS) as (keyof typeof CAPS)[]) {
      const value = input[key];
      if (value === undefined || value === null) continue;
      const { max, whole } = CAPS[key];
      if (!Number.isFinite(value) || value < 0 || value > max || (whole && !Number.isInteger(value))) {
        throw new BadUserInputError(`${key} must be ${whole ? 'a whole number' : 'a number of US dollars'} from 0 to ${max} (0 = no cap)`, key);
      }
      const rounded = whole ? value : Math.round(value * 100) / 100;
      if (rounded !== Number(row[key] ?? 0) && !writer.mayChangeAdminOptions) throw new ForbiddenError(`${key} is a spending cap; only an ADMIN may set it`, key);
      changes[key] = rounded;
    }
    if (input.isActive !== undefined && input.isActive !== null) changes.isActive = input.isActive;
    if (input.hidden !== undefined && input.hidden !== null) changes.hidden = input.hidden;
    if (input.isDefault !== undefined && input.isDefault !== null) changes.isDefault = input.isDefault;
    if (input.sorting !== undefined && input.sorting !== null) {
      if (!Number.isInteger(input.sorting) || input.sorting < 0) throw new BadUserInputError('sorting must be 0 or more', 'sorting');
      changes.sorting = input.sorting;
    }
    if (input.model !== undefined) {
      changes.modelUid = input.model === null || input.model.trim() === '' ? 0 : (await findLiveByIdentifierOrFail(manager, ModelEntity, input.model, 'model', 'model')).uid;
    }
    let skillUids: number[] | null = null;
    if (input.skills !== undefined && input.skills !== null) {
      skillUids = [];
      for (const identifier of input.skills) {
        const skill = await findLiveByIdentifierOrFail(manager, SkillEntity, identifier, 'skill', 'skills');
        if (!skillUids.includes(skill.uid)) skillUids.push(skill.uid);
      }
    }
    Object.assign(row, changes);
    return skillUids;
  }
}

