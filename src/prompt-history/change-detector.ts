/**
 * Notices rows that someone else (TYPO3, a script, a person with SQL) wrote
 * in the snippet, configuration and skill tables, and stores them as versions
 * with source "external".
 *
 * Cheap by design, on a library of any size:
 *
 * - **First sight** (the first poll after start, or after taking over from
 *   another instance) reads every row once, 100 at a time, giving the event
 *   loop a turn between reading a page and writing its versions and between
 *   pages. Rows without any version get their version 1 — the first state
 *   the service saw — in one insert per page:
 *   no change event, no webhook, no affected-configuration computation
 *   (they are the baseline, not changes). Rows whose state differs from
 *   their latest version changed while nobody watched: those are announced.
 * - **Later polls** read only what may have changed since: rows past the
 *   position — the newest (`tstamp`, `uid`) read, TYPO3 stamps every change,
 *   soft deletes included — and rows with a uid above the highest read (an
 *   insert stamped in the past). For a while after the position moved, the
 *   rows stamped in its last seconds are read again too: a second write in
 *   the same second keeps the stamp, and a request stamps its rows when it
 *   starts, not when it commits. Their fingerprints are kept in memory then,
 *   so reading them again costs no version lookup. An idle poll of a quiet
 *   library reads no rows.
 * - Each row read is compared by the fingerprint of its state with the
 *   latest version; only a difference is re-read and stored, under the
 *   table's write lock (an API write in flight is never taken for an
 *   external one).
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
import { unixNow } from '../shared/time';
import { SkillEntity } from '../skills/skill.entity';
import { TaskEntity } from '../tasks/task.entity';
import { PromptSnippetEntity } from '../snippets/snippet.entity';
import type { PromptChangeEvent } from './prompt-event-bus';
import type { ConfigurationTags, PromptHistoryService } from './prompt-history.service';
import { skillStateOf, snippetStateOf } from './record-states';
import { type AnyState, fingerprintState, type VersionedKind } from './version-state';

/** Rows read per query; reading a page and storing its versions each take one turn of the event loop. */
const PAGE_ROWS = 100;
/** Seconds before the position's stamp that are read again while the position is fresh. */
const LOOKBACK_SECONDS = 2;
/** How long after the position moved its last seconds are read again. */
const REREAD_MS = 10_000;

interface WatchedTable {
  kind: VersionedKind;
  table: string;
  entity: EntityTarget<ObjectLiteral>;
  /** The version states of rows read from the table, by uid. */
  statesOf(manager: EntityManager, rows: readonly ObjectLiteral[]): Promise<Map<number, AnyState>>;
}

interface Position {
  /** The newest (`tstamp`, `uid`) read. */
  tstamp: number;
  uid: number;
  /** The highest uid read. */
  maxUid: number;
  /** Until when (`performance.now()` ms) the rows stamped in the last seconds before `tstamp` are read again. */
  rereadUntil: number;
  /** Fingerprints of the rows the last poll read, by uid, while their last seconds are read again. */
  recent: Map<number, string>;
}

export interface DetectorLease {
  /** True while this instance may poll; acquires or renews the lease. */
  hold(): Promise<boolean>;
  release(): Promise<void>;
}

export interface PollResult {
  /** Rows read this poll. */
  scanned: number;
  /** Changes stored (and announced) this poll. */
  stored: number;
  /** Versions 1 stored quietly for rows seen for the first time (first sight only). */
  baselined: number;
}

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

export class PromptChangeDetector {
  /** Per table; none yet means the next poll is a first sight. */
  private readonly positions = new Map<VersionedKind, Position>();
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<unknown> | null = null;
  private readonly tables: WatchedTable[];

  constructor(
    private readonly dataSource: DataSource,
    private readonly history: PromptHistoryService,
    private readonly identifiers: IdentifierLock,
    private readonly logger: Logger,
    private readonly intervalMs: number,
    private readonly lease: DetectorLease | null = null,
  ) {
    const each =
      <T extends ObjectLiteral>(stateOf: (row: T) => AnyState) =>
      async (_manager: EntityManager, rows: readonly ObjectLiteral[]) =>
        new Map(rows.map((row) => [Number(row.uid), stateOf(row as T)]));
    this.tables = [
      { kind: 'snippet', table: 'tx_nrllm_promptsnippet', entity: PromptSnippetEntity, statesOf: each(snippetStateOf) },
      { kind: 'configuration', table: 'tx_nrllm_configuration', entity: ConfigurationEntity, statesOf: (m, rows) => this.history.configurationStates(m, rows as ConfigurationEntity[], 'detected') },
      { kind: 'skill', table: 'tx_nrllm_skill', entity: SkillEntity, statesOf: each(skillStateOf) },
      { kind: 'task', table: 'tx_nrllm_task', entity: TaskEntity, statesOf: (m, rows) => this.history.taskStates(m, rows as TaskEntity[], 'detected') },
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
      // Another instance polls; look at everything afresh if this one takes over later.
      this.positions.clear();
      return;
    }
    await this.poll();
  }

  /** One pass over the three tables. */
  async poll(): Promise<PollResult> {
    const result: PollResult = { scanned: 0, stored: 0, baselined: 0 };
    for (const table of this.tables) {
      const position = this.positions.get(table.kind);
      if (position) await this.readChanges(table, position, result);
      else this.positions.set(table.kind, await this.firstSight(table, result));
    }
    return result;
  }

  /** Every row, a page at a time by uid: the baseline of rows never seen, the changes of rows seen before. */
  private async firstSight(table: WatchedTable, result: PollResult): Promise<Position> {
    const position: Position = { tstamp: 0, uid: 0, maxUid: 0, rereadUntil: 0, recent: new Map() };
    let baselined = 0;
    let announced = 0;
    for (let after = 0; ; ) {
      const rows = await this.dataSource.getRepository(table.entity).createQueryBuilder('detected').where('detected.uid > :after', { after }).orderBy('detected.uid', 'ASC').take(PAGE_ROWS).getMany();
      if (rows.length === 0) break;
      after = Number(rows[rows.length - 1]!.uid);
      result.scanned += rows.length;
      const states = await table.statesOf(this.dataSource.manager, rows);
      const latest = await this.history.latestFingerprints(this.dataSource.manager, table.kind, [...states.keys()]);
      const unseen: { uid: number; state: AnyState }[] = [];
      const changed: number[] = [];
      for (const row of rows) {
        advance(position, row);
        const uid = Number(row.uid);
        const state = states.get(uid)!;
        const known = latest.get(uid);
        // A row deleted before the service ever saw it has no history to start.
        if (!known) {
          if (!row.deleted) unseen.push({ uid, state });
        } else if (known !== fingerprintState(state)) changed.push(uid);
      }
      if (unseen.length > 0) {
        await nextTurn();
        baselined += await this.identifiers.transaction(table.table, (manager) => this.history.recordBaseline(manager, table.kind, unseen));
      }
      announced += await this.recordChanges(table, changed);
      if (rows.length < PAGE_ROWS) break;
      await nextTurn();
    }
    result.baselined += baselined;
    result.stored += announced;
    // Rows stamped in the last seconds may still be written again within their second.
    if (position.tstamp >= unixNow() - LOOKBACK_SECONDS) position.rereadUntil = performance.now() + REREAD_MS;
    if (baselined > 0 || announced > 0) this.logger.info({ table: table.table, baseline: baselined, changes: announced }, 'read the table for the first time');
    return position;
  }

  /** The rows past the position (and, while it is fresh, those of its last seconds), a page at a time. */
  private async readChanges(table: WatchedTable, position: Position, result: PollResult): Promise<void> {
    const rereading = performance.now() < position.rereadUntil;
    // Fingerprints of the rows read by this poll: what the next one compares the re-read rows with.
    const read = new Map<number, string>();
    const since = { t: position.tstamp, u: position.uid, maxUid: position.maxUid, from: position.tstamp - LOOKBACK_SECONDS };
    const wanted = `(detected.tstamp > :t OR (detected.tstamp = :t AND detected.uid > :u) OR detected.uid > :maxUid${rereading ? ' OR detected.tstamp >= :from' : ''})`;
    let moved = false;
    let announced = 0;
    for (let cursor = { ct: -1, cu: 0 }; ; ) {
      const rows = await this.dataSource
        .getRepository(table.entity)
        .createQueryBuilder('detected')
        .where(wanted, since)
        .andWhere('(detected.tstamp > :ct OR (detected.tstamp = :ct AND detected.uid > :cu))', cursor)
        .orderBy('detected.tstamp', 'ASC')
        .addOrderBy('detected.uid', 'ASC')
        .take(PAGE_ROWS)
        .getMany();
      if (rows.length === 0) break;
      const last = rows[rows.length - 1]!;
      cursor = { ct: Number(last.tstamp), cu: Number(last.uid) };
      result.scanned += rows.length;
      const states = await table.statesOf(this.dataSource.manager, rows);
      const fingerprints = new Map([...states].map(([uid, state]) => [uid, fingerprintState(state)]));
      // A row stamped past the position was written since it was last read: its latest version says what is known.
      const stampedSince = new Set(rows.filter((row) => isPast(position, row)).map((row) => Number(row.uid)));
      const lookUp = [...fingerprints.keys()].filter((uid) => stampedSince.has(uid) || !position.recent.has(uid));
      const latest = lookUp.length > 0 ? await this.history.latestFingerprints(this.dataSource.manager, table.kind, lookUp) : new Map<number, string>();
      const changed: number[] = [];
      // The position moves past the page once its changes are stored (a failed poll reads them again).
      const next = { ...position };
      for (const row of rows) {
        moved = advance(next, row) || moved;
        const uid = Number(row.uid);
        const known = stampedSince.has(uid) ? latest.get(uid) : (position.recent.get(uid) ?? latest.get(uid));
        const fingerprint = fingerprints.get(uid)!;
        // A row deleted before the service ever saw it has no history to start.
        if (!(known === undefined && row.deleted) && known !== fingerprint) changed.push(uid);
        read.set(uid, fingerprint);
      }
      moved ||= changed.length > 0;
      announced += await this.recordChanges(table, changed);
      Object.assign(position, { tstamp: next.tstamp, uid: next.uid, maxUid: next.maxUid });
      if (rows.length < PAGE_ROWS) break;
      await nextTurn();
    }
    if (moved) position.rereadUntil = performance.now() + REREAD_MS;
    position.recent = performance.now() < position.rereadUntil ? read : new Map();
    result.stored += announced;
    if (announced > 0) this.logger.info({ table: table.table, changes: announced }, 'noticed external changes');
  }

  /** Stores and announces each change; returns how many were stored. */
  private async recordChanges(table: WatchedTable, uids: readonly number[]): Promise<number> {
    if (uids.length === 0) return 0;
    // A snippet change names the configurations it affects: read them once for the page, not once per row.
    const configurations = table.kind === 'snippet' ? await this.history.liveConfigurationTags(this.dataSource.manager) : undefined;
    let stored = 0;
    for (const uid of uids) {
      const event = await this.recordExternal(table, uid, configurations);
      if (!event) continue;
      stored += 1;
      this.history.announce(event);
    }
    return stored;
  }

  /** Re-reads the row under the table's write lock, so an API write in flight is never mistaken for an external one. */
  private async recordExternal(table: WatchedTable, uid: number, configurations: readonly ConfigurationTags[] | undefined): Promise<PromptChangeEvent | null> {
    try {
      return await this.identifiers.transaction(table.table, async (manager) => {
        const row = await manager.getRepository(table.entity).findOne({ where: { uid } });
        if (!row) return null;
        const state = (await table.statesOf(manager, [row])).get(uid)!;
        const latest = await this.history.latestFingerprints(manager, table.kind, [uid]);
        if (latest.get(uid) === fingerprintState(state)) return null;
        // A row deleted before the service ever saw it has no history to start.
        if (!latest.has(uid) && row.deleted) return null;
        return this.history.record(manager, { kind: table.kind, uid, state, origin: { source: 'external', author: null }, configurations });
      });
    } catch (error) {
      // Another instance numbered this change first (unique index): nothing is lost. Anything else is the poll's failure.
      if (!(await this.recordedElsewhere(table, uid))) throw error;
      this.logger.debug({ err: error, table: table.table, uid }, 'external change already recorded elsewhere');
      return null;
    }
  }

  /** Whether the row's state now is its latest version. */
  private async recordedElsewhere(table: WatchedTable, uid: number): Promise<boolean> {
    const manager = this.dataSource.manager;
    const row = await manager.getRepository(table.entity).findOne({ where: { uid } });
    if (!row) return true;
    const state = (await table.statesOf(manager, [row])).get(uid)!;
    return (await this.history.latestFingerprints(manager, table.kind, [uid])).get(uid) === fingerprintState(state);
  }
}

function isPast(position: Pick<Position, 'tstamp' | 'uid'>, row: ObjectLiteral): boolean {
  const tstamp = Number(row.tstamp);
  return tstamp > position.tstamp || (tstamp === position.tstamp && Number(row.uid) > position.uid);
}

/** Moves the position past the row; true when it moved. */
function advance(position: Pick<Position, 'tstamp' | 'uid' | 'maxUid'>, row: ObjectLiteral): boolean {
  const tstamp = Number(row.tstamp);
  const uid = Number(row.uid);
  position.maxUid = Math.max(position.maxUid, uid);
  if (!isPast(position, row)) return false;
  position.tstamp = tstamp;
  position.uid = uid;
  return true;
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
