/**
 * Versions of snippets, configurations and skills, and the change events they
 * raise. Writers call `record` inside the transaction of their write (so a
 * version exists exactly when the write committed) and `announce` after it.
 */
import type { DataSource, EntityManager } from 'typeorm';
import { ConfigurationSkillEntity } from '../configurations/configuration-skill.entity';
import { ConfigurationEntity } from '../configurations/configuration.entity';
import { ModelEntity } from '../providers/model.entity';
import { checkPage, MAX_PAGE_SIZE } from '../db/record-rules';
import { BadUserInputError, NotFoundError } from '../shared/errors';
import { unixNow } from '../shared/time';
import { parseSelectionTags, parseTags } from '../prompt/tags';
import type { PromptChangeEvent, PromptEventBus } from './prompt-event-bus';
import type { WebhookOutbox } from '../webhooks';
import { PromptVersionEntity } from './prompt-version.entity';
import { configurationStateOf, taskStateOf } from './record-states';
import { TaskExtensionEntity } from '../tasks/task-extension.entity';
import { TaskSkillEntity } from '../tasks/task-skill.entity';
import type { TaskEntity } from '../tasks/task.entity';
import {
  type AnyState,
  type ConfigurationState,
  diffFields,
  type FieldChange,
  fingerprintState,
  serializeState,
  type SnippetState,
  type StateOf,
  type TaskState,
  TEXT_FIELD,
  unifiedDiff,
  type VersionedKind,
  type VersionSource,
} from './version-state';

/** Rows per insert statement of a baseline (well under SQLite's and MySQL's parameter limits). */
const BASELINE_INSERT_ROWS = 250;

export interface StoredVersion<K extends VersionedKind = VersionedKind> {
  kind: K;
  recordUid: number;
  version: number;
  state: StateOf[K];
  fingerprint: string;
  source: VersionSource;
  author: string | null;
  createdAt: number;
}

/** A page of versions: the newest `limit` (older than `before`, when set). */
export interface VersionPage {
  limit: number;
  before: number | null;
}

/** Versions a page holds when the client does not say. */
export const DEFAULT_VERSION_PAGE = 20;

export const VERSIONS_DESCRIPTION = `Newest first (version 1 is the first state the service saw), ${DEFAULT_VERSION_PAGE} at a time unless \`limit\` says otherwise (at most ${MAX_PAGE_SIZE}); pass the last version of a page as \`before\` for the next one.`;

/** A client's page of versions, checked: `limit` like every page, `before` a version number (1 or more) when given. */
export function versionPage(limit: number | null | undefined, before: number | null | undefined): VersionPage {
  const { limit: checked } = checkPage({ limit: limit ?? DEFAULT_VERSION_PAGE, offset: 0 });
  if (before !== null && before !== undefined && (!Number.isInteger(before) || before < 1)) {
    throw new BadUserInputError('before must be a version number (1 or more): pass the last version of the page you have', 'before');
  }
  return { limit: checked, before: before ?? null };
}

export interface ChangeOrigin {
  source: VersionSource;
  author: string | null;
}

export interface VersionDiff {
  from: number;
  to: number;
  fields: FieldChange[];
  /** Unified diff of the main text (snippet text, system prompt, skill body); "" when it is unchanged. */
  textDiff: string;
}

export interface RecordInput<K extends VersionedKind> {
  kind: K;
  uid: number;
  state: StateOf[K];
  /** The state before the write, stored as version 1 when the row has no version yet (a row the service had not seen). */
  previous?: StateOf[K] | null;
  origin: ChangeOrigin;
  /**
   * The live configurations' identifiers and tags in uid order, when the
   * caller records many snippet changes and read them once for all (see
   * `liveConfigurationTags`); read in the transaction otherwise.
   */
  configurations?: readonly ConfigurationTags[];
}

export interface ConfigurationTags {
  identifier: string;
  snippetTags: string;
}

export class PromptHistoryService {
  private readonly localListeners = new Set<(event: PromptChangeEvent) => void>();

  constructor(
    private readonly dataSource: DataSource,
    private readonly events: PromptEventBus,
    private readonly outbox: WebhookOutbox | null = null,
  ) {}

  /**
   * Stores the state as the record's next version and returns the change
   * event to announce once the transaction committed.
   */
  async record<K extends VersionedKind>(manager: EntityManager, input: RecordInput<K>): Promise<PromptChangeEvent> {
    let latest = await this.latestVersion(manager, input.kind, input.uid);
    if (!latest && input.previous) {
      await this.insert(manager, input.kind, input.uid, 1, input.previous, { source: 'external', author: null });
      latest = { version: 1, state: input.previous };
    }
    const version = (latest?.version ?? 0) + 1;
    await this.insert(manager, input.kind, input.uid, version, input.state, input.origin);
    const event: PromptChangeEvent = {
      kind: input.kind,
      uid: input.uid,
      identifier: input.state.identifier,
      version,
      source: input.origin.source,
      affectedConfigurations: await this.affectedConfigurations(manager, input.kind, input.uid, input.state, latest?.state ?? null, input.configurations),
      at: Date.now(),
    };
    // In the write's transaction: the webhook delivery exists exactly when the change committed.
    if (this.outbox) {
      const { kind, uid, identifier, source, affectedConfigurations } = event;
      await this.outbox.enqueue(manager, 'prompt.changed', { kind, uid, identifier, version, source, author: input.origin.author, affectedConfigurations, deleted: input.state.deleted }, event.at);
    }
    return event;
  }

  /** Publishes committed changes to every instance's `promptChanged` subscribers. */
  announce(...events: PromptChangeEvent[]): void {
    for (const event of events) {
      for (const listener of this.localListeners) listener(event);
      this.events.publish(event);
    }
  }

  /**
   * Called for every change: at once for this instance's own, and when the bus
   * delivers another instance's (so own changes may arrive twice).
   */
  onChange(listener: (event: PromptChangeEvent) => void): () => void {
    this.localListeners.add(listener);
    const unsubscribe = this.events.subscribe(listener);
    return () => {
      this.localListeners.delete(listener);
      unsubscribe();
    };
  }

  subscribe(listener: (event: PromptChangeEvent) => void): () => void {
    return this.events.subscribe(listener);
  }

  /** Newest first. */
  async versions<K extends VersionedKind>(kind: K, uid: number): Promise<StoredVersion<K>[]> {
    const rows = await this.dataSource.getRepository(PromptVersionEntity).find({ where: { kind, recordUid: uid }, order: { version: 'DESC' } });
    return rows.map((row) => toStored<K>(row));
  }

  /** The versions of each record, newest first, in one query (a list's `versions`). */
  /**
   * One page of each record's versions, newest first: at most `page.limit`,
   * only those older than `page.before` when given. The page is chosen on the
   * versions' numbers first, so a record with hundreds of long versions
   * costs what the page holds, not its whole history.
   */
  async versionsOf<K extends VersionedKind>(kind: K, uids: readonly number[], page: VersionPage): Promise<Map<number, StoredVersion<K>[]>> {
    const result = new Map<number, StoredVersion<K>[]>(uids.map((uid) => [uid, []]));
    if (uids.length === 0 || page.limit === 0) return result;
    const keys = this.dataSource
      .getRepository(PromptVersionEntity)
      .createQueryBuilder('v')
      .select('v.id', 'id')
      .addSelect('v.recordUid', 'recordUid')
      .where('v.kind = :kind', { kind })
      .andWhere('v.recordUid IN (:...uids)', { uids: [...new Set(uids)] })
      .orderBy('v.recordUid', 'ASC')
      .addOrderBy('v.version', 'DESC');
    if (page.before !== null) keys.andWhere('v.version < :before', { before: page.before });
    const taken = new Map<number, number>();
    const ids: number[] = [];
    for (const key of await keys.getRawMany<{ id: number | string; recordUid: number | string }>()) {
      const recordUid = Number(key.recordUid);
      const count = taken.get(recordUid) ?? 0;
      if (count >= page.limit) continue;
      taken.set(recordUid, count + 1);
      ids.push(Number(key.id));
    }
    if (ids.length === 0) return result;
    const rows = await this.dataSource
      .getRepository(PromptVersionEntity)
      .createQueryBuilder('v')
      .whereInIds(ids)
      .orderBy('v.recordUid', 'ASC')
      .addOrderBy('v.version', 'DESC')
      .getMany();
    for (const row of rows) result.get(row.recordUid)?.push(toStored<K>(row));
    return result;
  }

  async version<K extends VersionedKind>(kind: K, uid: number, version: number, field = 'version'): Promise<StoredVersion<K>> {
    const row = await this.dataSource.getRepository(PromptVersionEntity).findOne({ where: { kind, recordUid: uid, version } });
    if (!row) throw new NotFoundError(`The ${kind} ${uid} has no version ${version}`, field);
    return toStored<K>(row);
  }

  async diff(kind: VersionedKind, uid: number, from: number, to: number): Promise<VersionDiff> {
    const [before, after] = await Promise.all([this.version(kind, uid, from, 'from'), this.version(kind, uid, to, 'to')]);
    const textField = TEXT_FIELD[kind] as keyof AnyState;
    return {
      from,
      to,
      fields: diffFields(before.state, after.state),
      textDiff: unifiedDiff(String(before.state[textField] ?? ''), String(after.state[textField] ?? ''), `${kind} ${uid} version ${from}`, `${kind} ${uid} version ${to}`),
    };
  }

  /** The latest stored version of each given record, for the change detector. */
  async latestFingerprints(manager: EntityManager, kind: VersionedKind, uids: readonly number[]): Promise<Map<number, string>> {
    const latest = await this.latestVersions(manager, kind, uids);
    return new Map([...latest].map(([uid, { fingerprint }]) => [uid, fingerprint]));
  }

  /** The number and fingerprint of the latest stored version of each given record. */
  async latestVersions(manager: EntityManager, kind: VersionedKind, uids: readonly number[]): Promise<Map<number, { version: number; fingerprint: string }>> {
    const result = new Map<number, { version: number; fingerprint: string }>();
    for (let start = 0; start < uids.length; start += 500) {
      const chunk = uids.slice(start, start + 500);
      const rows = await manager
        .getRepository(PromptVersionEntity)
        .createQueryBuilder('v')
        .select(['v.recordUid', 'v.version', 'v.fingerprint'])
        .where('v.kind = :kind AND v.record_uid IN (:...uids)', { kind, uids: chunk })
        .andWhere('v.version = (SELECT MAX(l.version) FROM promptwire_prompt_version l WHERE l.kind = v.kind AND l.record_uid = v.record_uid)')
        .getMany();
      for (const row of rows) result.set(row.recordUid, { version: row.version, fingerprint: row.fingerprint });
    }
    return result;
  }

  /** The configuration state of a row: its columns, its model's identifier and its skills. */
  async configurationState(manager: EntityManager, row: ConfigurationEntity) {
    return (await this.configurationStates(manager, [row])).get(row.uid)!;
  }

  /**
   * The configuration states of many rows by uid, in two queries (models,
   * skill relations) whatever their number. `alias` names the tables in
   * those queries (the change detector's reads say `detected`).
   */
  async configurationStates(manager: EntityManager, rows: readonly ConfigurationEntity[], alias = 'versioned'): Promise<Map<number, ConfigurationState>> {
    const result = new Map<number, ConfigurationState>();
    if (rows.length === 0) return result;
    const modelUids = [...new Set(rows.map((row) => row.modelUid).filter((uid) => uid))];
    const [models, relations] = await Promise.all([
      modelUids.length > 0
        ? manager.getRepository(ModelEntity).createQueryBuilder(alias).select([`${alias}.uid`, `${alias}.identifier`]).where(`${alias}.uid IN (:...uids)`, { uids: modelUids }).getMany()
        : [],
      manager
        .getRepository(ConfigurationSkillEntity)
        .createQueryBuilder(alias)
        .where(`${alias}.uid_local IN (:...uids)`, { uids: rows.map((row) => row.uid) })
        .orderBy(`${alias}.uid_local`, 'ASC')
        .addOrderBy(`${alias}.sorting`, 'ASC')
        .getMany(),
    ]);
    const modelIdentifier = new Map(models.map((model) => [model.uid, model.identifier]));
    const skillUids = new Map<number, number[]>();
    for (const relation of relations) {
      const list = skillUids.get(relation.uidLocal);
      if (list) list.push(relation.uidForeign);
      else skillUids.set(relation.uidLocal, [relation.uidForeign]);
    }
    for (const row of rows) result.set(row.uid, configurationStateOf(row, (row.modelUid && modelIdentifier.get(row.modelUid)) || '', skillUids.get(row.uid) ?? []));
    return result;
  }

  /** The task states of many rows by uid, in two queries (skill relations, extension rows) whatever their number. */
  async taskStates(manager: EntityManager, rows: readonly TaskEntity[], alias = 'versioned'): Promise<Map<number, TaskState>> {
    const result = new Map<number, TaskState>();
    if (rows.length === 0) return result;
    const uids = rows.map((row) => row.uid);
    const [relations, extensions] = await Promise.all([
      manager.getRepository(TaskSkillEntity).createQueryBuilder(alias).where(`${alias}.uid_local IN (:...uids)`, { uids }).orderBy(`${alias}.uid_local`, 'ASC').addOrderBy(`${alias}.sorting`, 'ASC').getMany(),
      manager.getRepository(TaskExtensionEntity).createQueryBuilder(alias).where(`${alias}.task_uid IN (:...uids)`, { uids }).getMany(),
    ]);
    const extensionOf = new Map(extensions.map((extension) => [extension.taskUid, extension]));
    for (const row of rows) {
      const skillUids = relations.filter((relation) => relation.uidLocal === row.uid).map((relation) => relation.uidForeign);
      result.set(row.uid, taskStateOf(row, skillUids, extensionOf.get(row.uid) ?? null));
    }
    return result;
  }

  /**
   * Version 1 of rows the service has never seen (the change detector's
   * first reading of a table): one insert for all of them, no change event,
   * no webhook — they are the baseline, not changes. Rows that meanwhile got
   * a version (an API write, another instance) are left alone. Call inside
   * the table's write lock. Returns how many versions were stored.
   */
  async recordBaseline(manager: EntityManager, kind: VersionedKind, rows: readonly { uid: number; state: AnyState }[]): Promise<number> {
    if (rows.length === 0) return 0;
    const known = await this.latestVersions(
      manager,
      kind,
      rows.map((row) => row.uid),
    );
    const createdAt = unixNow();
    const values = rows
      .filter((row) => !known.has(row.uid))
      .map(({ uid, state }) => ({ kind, recordUid: uid, version: 1, state: serializeState(state), fingerprint: fingerprintState(state), source: 'external', author: null, createdAt }));
    for (let start = 0; start < values.length; start += BASELINE_INSERT_ROWS) {
      await manager.createQueryBuilder().insert().into(PromptVersionEntity).values(values.slice(start, start + BASELINE_INSERT_ROWS)).updateEntity(false).execute();
    }
    return values.length;
  }

  private async latestVersion(manager: EntityManager, kind: VersionedKind, uid: number): Promise<{ version: number; state: AnyState } | null> {
    const row = await manager.getRepository(PromptVersionEntity).findOne({ where: { kind, recordUid: uid }, order: { version: 'DESC' } });
    return row ? { version: row.version, state: JSON.parse(row.state) as AnyState } : null;
  }

  private async insert(manager: EntityManager, kind: VersionedKind, uid: number, version: number, state: AnyState, origin: ChangeOrigin): Promise<void> {
    await manager.insert(PromptVersionEntity, {
      kind,
      recordUid: uid,
      version,
      state: serializeState(state),
      fingerprint: fingerprintState(state),
      source: origin.source,
      author: origin.author,
      createdAt: unixNow(),
    });
  }

  /**
   * Configurations whose prompt the change may alter: for a snippet, those
   * selecting one of its tags before or after the change; for a skill, those
   * it is attached to; for a configuration, itself.
   */
  private async affectedConfigurations(
    manager: EntityManager,
    kind: VersionedKind,
    uid: number,
    state: AnyState,
    previous: AnyState | null,
    configurations?: readonly ConfigurationTags[],
  ): Promise<string[]> {
    if (kind === 'configuration') return [state.identifier];
    // A task is not part of any configuration's prompt.
    if (kind === 'task') return [];
    if (kind === 'skill') {
      const rows = await manager
        .getRepository(ConfigurationEntity)
        .createQueryBuilder('c')
        .select(['c.uid', 'c.identifier'])
        .innerJoin(ConfigurationSkillEntity, 'mm', 'mm.uid_local = c.uid')
        .where('mm.uid_foreign = :uid AND c.deleted = 0', { uid })
        .orderBy('c.uid')
        .getMany();
      return rows.map((row) => row.identifier);
    }
    const tags = new Set([...parseTags((state as SnippetState).tags), ...(previous ? parseTags((previous as SnippetState).tags) : [])]);
    if (tags.size === 0) return [];
    const rows = configurations ?? (await this.liveConfigurationTags(manager));
    return rows.filter((row) => parseSelectionTags(row.snippetTags).some((tag) => tags.has(tag))).map((row) => row.identifier);
  }

  /** Every live configuration's identifier and tags, in uid order: what a snippet change's affected configurations are picked from. */
  async liveConfigurationTags(manager: EntityManager): Promise<ConfigurationTags[]> {
    return manager.getRepository(ConfigurationEntity).createQueryBuilder('c').select(['c.uid', 'c.identifier', 'c.snippetTags']).where('c.deleted = 0').orderBy('c.uid').getMany();
  }
}

function toStored<K extends VersionedKind>(row: PromptVersionEntity): StoredVersion<K> {
  return {
    kind: row.kind as K,
    recordUid: row.recordUid,
    version: row.version,
    state: JSON.parse(row.state) as StateOf[K],
    fingerprint: row.fingerprint,
    source: row.source as VersionSource,
    author: row.author,
    createdAt: row.createdAt,
  };
}
