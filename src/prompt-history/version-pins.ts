/**
 * "Which version is this?" for states just read from the tables, as a
 * release or a run must record them. Normally the latest stored version is
 * the state read. A row someone changed in the table that the change
 * detector has not read yet has no version of its state: it is stored now,
 * as the detector would store it (source external), so a release never
 * points at a version whose text differs from what it froze.
 */
import type { DataSource, EntityManager } from 'typeorm';
import { ConfigurationEntity } from '../configurations/configuration.entity';
import type { IdentifierLock } from '../db/identifier-lock';
import { SkillEntity } from '../skills/skill.entity';
import { TaskEntity } from '../tasks/task.entity';
import { PromptSnippetEntity } from '../snippets/snippet.entity';
import type { PromptHistoryService } from './prompt-history.service';
import { skillStateOf, snippetStateOf } from './record-states';
import { fingerprintState, type AnyState, type StateOf, type VersionedKind } from './version-state';

export interface PinnedState<K extends VersionedKind> {
  uid: number;
  state: StateOf[K];
}

const TABLES: { [K in VersionedKind]: string } = {
  snippet: 'tx_nrllm_promptsnippet',
  configuration: 'tx_nrllm_configuration',
  skill: 'tx_nrllm_skill',
  task: 'tx_nrllm_task',
};

export class VersionPins {
  constructor(
    private readonly dataSource: DataSource,
    private readonly history: PromptHistoryService,
    private readonly identifiers: IdentifierLock,
  ) {}

  /**
   * The version number of each record's state, by uid. Null when a row no
   * longer holds the state read (it changed meanwhile): the caller reads
   * again.
   */
  async pin<K extends VersionedKind>(kind: K, records: readonly PinnedState<K>[]): Promise<Map<number, number> | null> {
    const result = new Map<number, number>();
    if (records.length === 0) return result;
    const latest = await this.history.latestVersions(this.dataSource.manager, kind, records.map((record) => record.uid));
    for (const record of records) {
      const fingerprint = fingerprintState(record.state);
      const known = latest.get(record.uid);
      const version = known && known.fingerprint === fingerprint ? known.version : await this.storeUnseen(kind, record.uid, fingerprint);
      if (version === null) return null;
      result.set(record.uid, version);
    }
    return result;
  }

  /** Under the table's write lock, so an API write in flight is never taken for an external one. */
  private async storeUnseen(kind: VersionedKind, uid: number, fingerprint: string): Promise<number | null> {
    const attempt = () =>
      this.identifiers.transaction(TABLES[kind], async (manager) => {
        const state = await this.readState(manager, kind, uid);
        if (!state || fingerprintState(state) !== fingerprint) return { version: null, event: null };
        const known = (await this.history.latestVersions(manager, kind, [uid])).get(uid);
        if (known && known.fingerprint === fingerprint) return { version: known.version, event: null };
        const event = await this.history.record(manager, { kind, uid, state, origin: { source: 'external', author: null } });
        return { version: event.version, event };
      });
    let outcome: Awaited<ReturnType<typeof attempt>>;
    try {
      outcome = await attempt();
    } catch (error) {
      // Another instance's change detector numbered the same change first (unique index): read its number.
      const known = (await this.history.latestVersions(this.dataSource.manager, kind, [uid])).get(uid);
      if (known && known.fingerprint === fingerprint) return known.version;
      throw error;
    }
    if (outcome.event) this.history.announce(outcome.event);
    return outcome.version;
  }

  private async readState(manager: EntityManager, kind: VersionedKind, uid: number): Promise<AnyState | null> {
    switch (kind) {
      case 'snippet': {
        const row = await manager.getRepository(PromptSnippetEntity).findOne({ where: { uid } });
        return row ? snippetStateOf(row) : null;
      }
      case 'configuration': {
        const row = await manager.getRepository(ConfigurationEntity).findOne({ where: { uid } });
        return row ? this.history.configurationState(manager, row) : null;
      }
      case 'skill': {
        const row = await manager.getRepository(SkillEntity).findOne({ where: { uid } });
        return row ? skillStateOf(row) : null;
      }
      case 'task': {
        const row = await manager.getRepository(TaskEntity).findOne({ where: { uid } });
        return row ? ((await this.history.taskStates(manager, [row])).get(uid) ?? null) : null;
      }
    }
  }
}
