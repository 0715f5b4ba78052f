/**
 * Notices rows that someone else (TYPO3, a script, a person with SQL) wrote
 * in the snippet, configuration and skill tables, and stores them as versions
 * with source "external".
 *
 * Cheap by design: each poll reads only the rows whose `tstamp` is at or after
 * the newest one seen before (TYPO3 stamps every change, soft deletes
 * included), compares their state's fingerprint with the latest stored
 * version, and writes only when they differ. The same second is read again on
 * the next poll, so two writes within one second are both seen. The first
 * poll after start reads everything once: rows never seen get their version 1
 * quietly; rows changed while the service was down are announced.
 *
 * With several instances on one Redis, one instance polls at a time (a lease
 * in Redis); without Redis each instance polls, and the unique version index
 * keeps a change from being numbered twice.
 */
import crypto from 'node:crypto';
import type Redis from 'ioredis';
import type { DataSource, EntityManager, ObjectLiteral, EntityTarget } from 'typeorm';
import { ConfigurationEntity } from '../configurations/configuration.entity';
import type { Logger } from '../logger';
import type { IdentifierLock } from '../db/identifier-lock';
import { SkillEntity } from '../skills/skill.entity';
import { PromptSnippetEntity } from '../snippets/snippet.entity';
import type { PromptChangeEvent } from './prompt-event-bus';
import type { PromptHistoryService } from './prompt-history.service';
import { skillStateOf, snippetStateOf } from './record-states';
import { type AnyState, fingerprintState, type VersionedKind } from './version-state';

interface WatchedTable {
  kind: VersionedKind;
  table: string;
  entity: EntityTarget<ObjectLiteral>;
  stateOf(manager: EntityManager, row: ObjectLiteral): Promise<AnyState>;
}

export interface DetectorLease {
  /** True while this instance may poll; acquires or renews the lease. */
  hold(): Promise<boolean>;
  release(): Promise<void>;
}

export interface PollResult {
  /** Rows read this poll. */
  scanned: number;
  /** Versions stored this poll. */
  stored: number;
}

export class PromptChangeDetector {
  private readonly watermarks = new Map<VersionedKind, number>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private firstPollDone = false;
  private readonly tables: WatchedTable[];

  constructor(
    private readonly dataSource: DataSource,
    private readonly history: PromptHistoryService,
    private readonly identifiers: IdentifierLock,
    private readonly logger: Logger,
    private readonly intervalMs: number,
    private readonly lease: DetectorLease | null = null,
  ) {
    this.tables = [
      { kind: 'snippet', table: 'tx_nrllm_promptsnippet', entity: PromptSnippetEntity, stateOf: async (_m, row) => snippetStateOf(row as PromptSnippetEntity) },
      { kind: 'configuration', table: 'tx_nrllm_configuration', entity: ConfigurationEntity, stateOf: (m, row) => this.history.configurationState(m, row as ConfigurationEntity) },
      { kind: 'skill', table: 'tx_nrllm_skill', entity: SkillEntity, stateOf: async (_m, row) => skillStateOf(row as SkillEntity) },
    ];
  }

  start(): void {
    const tick = () => {
      this.running = this.pollIfLeader()
        .catch((error: unknown) => this.logger.warn({ err: error }, 'prompt change detection failed; trying again next poll'))
        .finally(() => {
          this.running = null;
          if (this.timer) this.timer = setTimeout(tick, this.intervalMs);
        });
    };
    this.timer = setTimeout(tick, 0);
  }

  async stop(): Promise<void> {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.running;
    await this.lease?.release().catch(() => undefined);
  }

  private async pollIfLeader(): Promise<void> {
    if (this.lease && !(await this.lease.hold())) {
      // Another instance polls; start from scratch if this one takes over later.
      this.watermarks.clear();
      this.firstPollDone = false;
      return;
    }
    await this.poll();
  }

  /** One pass over the three tables. */
  async poll(): Promise<PollResult> {
    const announce = this.firstPollDone;
    const result: PollResult = { scanned: 0, stored: 0 };
    for (const table of this.tables) {
      const { scanned, events } = await this.pollTable(table, announce);
      result.scanned += scanned;
      result.stored += events.length;
      this.history.announce(...events.filter((event) => announce || (event.version ?? 0) > 1));
    }
    this.firstPollDone = true;
    return result;
  }

  private async pollTable(table: WatchedTable, announceNew: boolean): Promise<{ scanned: number; events: PromptChangeEvent[] }> {
    const watermark = this.watermarks.get(table.kind) ?? 0;
    const rows = await this.dataSource.getRepository(table.entity).createQueryBuilder('r').where('r.tstamp >= :watermark', { watermark }).getMany();
    if (rows.length === 0) return { scanned: 0, events: [] };
    const manager = this.dataSource.manager;
    const latest = await this.history.latestFingerprints(
      manager,
      table.kind,
      rows.map((row) => Number(row.uid)),
    );
    const changed: number[] = [];
    let newest = watermark;
    for (const row of rows) {
      newest = Math.max(newest, Number(row.tstamp));
      const known = latest.get(Number(row.uid));
      // A row deleted before the service ever saw it has no history to start.
      if (!known && row.deleted) continue;
      if (known !== fingerprintState(await table.stateOf(manager, row))) changed.push(Number(row.uid));
    }
    const events: PromptChangeEvent[] = [];
    for (const uid of changed) {
      const event = await this.recordExternal(table, uid, !announceNew);
      if (event) events.push(event);
    }
    this.watermarks.set(table.kind, newest);
    if (events.length > 0 && announceNew) this.logger.info({ table: table.table, changes: events.length }, 'noticed external changes');
    return { scanned: rows.length, events };
  }

  /** Re-reads the row under the table's write lock, so an API write in flight is never mistaken for an external one. */
  private async recordExternal(table: WatchedTable, uid: number, firstSight: boolean): Promise<PromptChangeEvent | null> {
    try {
      return await this.identifiers.transaction(table.table, async (manager) => {
          const row = await manager.getRepository(table.entity).findOne({ where: { uid } });
          if (!row) return null;
          const state = await table.stateOf(manager, row);
          const latest = await this.history.latestFingerprints(manager, table.kind, [uid]);
          if (latest.get(uid) === fingerprintState(state)) return null;
          return this.history.record(manager, { kind: table.kind, uid, state, origin: { source: 'external', author: null }, firstSight });
      });
    } catch (error) {
      // Another instance numbered this change first (unique index): nothing is lost.
      this.logger.debug({ err: error, table: table.table, uid }, 'external change already recorded elsewhere');
      return null;
    }
  }
}

/** One poller per cluster: a lease in Redis that the holder renews on every poll. */
export class RedisDetectorLease implements DetectorLease {
  private readonly owner = crypto.randomUUID();
  private readonly key: string;

  constructor(
    private readonly redis: Redis,
    databaseKey: string,
    private readonly ttlMs: number,
  ) {
    this.key = `promptwire:prompt-change-detector:${databaseKey}`;
  }

  async hold(): Promise<boolean> {
    const renewed = (await this.redis.eval(RENEW, 1, this.key, this.owner, String(this.ttlMs))) as number;
    if (renewed === 1) return true;
    return (await this.redis.set(this.key, this.owner, 'PX', this.ttlMs, 'NX')) === 'OK';
  }

  async release(): Promise<void> {
    await this.redis.eval(RELEASE, 1, this.key, this.owner);
  }
}

const RENEW = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end";
const RELEASE = "if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end";
