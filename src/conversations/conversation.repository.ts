/**
 * Every statement of the conversations feature: TYPO3's
 * `tx_nrllm_ai_session` and `tx_nrllm_ai_session_message`, and this
 * service's `promptwire_conversation` beside them. Methods that take an
 * `EntityManager` run inside a caller's transaction (a turn's run being
 * stored, or its END).
 */
import type { DataSource, EntityManager, SelectQueryBuilder } from 'typeorm';
import type { Dialect } from '../db/data-source';
import { afterPosition, atOrBeforePosition, type KeyColumn, type KeyKind, type KeysetSource, positionOf, type SqlCondition } from '../db/keyset';
import { searchCondition } from '../db/list-filters';
import { unixNow } from '../shared/time';
import { AiSessionMessageEntity } from './ai-session-message.entity';
import { AiSessionEntity } from './ai-session.entity';
import { ConversationOwnerEntity } from './conversation-owner.entity';
import { isUniqueViolation, nextSequenceAttempts, SEQUENCE_ATTEMPTS, sequenceAllocationFailed, type MessageRole } from './conversation-rules';

/** A session as the service reads it: TYPO3's row and this service's, if any. */
export interface StoredConversation {
  session: AiSessionEntity;
  /** Null for a session no turn of this service touched yet (opened in TYPO3). */
  owner: ConversationOwnerEntity | null;
}

/** A stored message as a turn replays it. */
export interface HistoryRow {
  sequence: number;
  role: string;
  content: string;
}

export interface NewMessage {
  role: MessageRole;
  content: string;
  model: string;
  promptTokens: number;
  completionTokens: number;
  totalTokens: number;
  droppedTurns: number | null;
}

/** Whose conversations a list shows. */
export interface ConversationScope {
  /** Every session (ADMIN). */
  all: boolean;
  /** The backend user's sessions (0: none). */
  beUser: number;
  /** Sessions this token opened without a backend user. */
  tokenUid: number;
}

export interface ConversationListFilter {
  configuration?: string | null;
  search?: string | null;
}

export const CONVERSATION_LIST = 'conversations';
/** Newest activity first, then uid. */
const CONVERSATION_ORDER: readonly KeyColumn[] = [
  { column: 's.last_activity', direction: 'DESC' },
  { column: 's.uid', direction: 'DESC' },
];
export const CONVERSATION_KEY_KINDS: readonly KeyKind[] = ['value', 'integer'];

/** Sessions deleted per statement by the retention purge (as nr_llm's). */
const PURGE_CHUNK = 500;

export class ConversationRepository {
  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
  ) {}

  /** Stores a new session and this service's row for it, together. */
  async create(session: { uuid: string; beUser: number; configurationIdentifier: string; title: string; ownerToken: number }): Promise<AiSessionEntity> {
    const now = unixNow();
    return this.dataSource.transaction(async (manager) => {
      const values = { pid: 0, uuid: session.uuid, beUser: session.beUser, configurationIdentifier: session.configurationIdentifier, title: session.title, messageCount: 0, lastActivity: now, tstamp: now, crdate: now };
      const result = await manager.createQueryBuilder().insert().into(AiSessionEntity).values(values).updateEntity(false).execute();
      const uid = insertedUid(result.identifiers, result.raw);
      await manager.createQueryBuilder().insert().into(ConversationOwnerEntity).values({ sessionUid: uid, ownerToken: session.ownerToken, activeRun: '', activeRunUid: 0 }).updateEntity(false).execute();
      return Object.assign(new AiSessionEntity(), { uid, ...values });
    });
  }

  /**
   * A session by its uuid, with this service's row (one query). Read as a
   * plain row: every turn and every read of a conversation starts here.
   */
  async findByUuid(uuid: string): Promise<StoredConversation | null> {
    const q = (name: string) => this.dataSource.driver.escape(name);
    const sessionColumns = ['uid', 'pid', 'uuid', 'be_user', 'configuration_identifier', 'title', 'message_count', 'last_activity', 'tstamp', 'crdate'].map((column) => `s.${q(column)} AS ${q(column)}`);
    const ownerColumns = [['session_uid', 'o_session_uid'], ['owner_token', 'o_owner_token'], ['active_run', 'o_active_run'], ['active_run_uid', 'o_active_run_uid']].map(([column, alias]) => `o.${q(column!)} AS ${q(alias!)}`);
    const rows = (await this.dataSource.query(
      `SELECT ${[...sessionColumns, ...ownerColumns].join(', ')} FROM ${q('tx_nrllm_ai_session')} s LEFT JOIN ${q('promptwire_conversation')} o ON o.${q('session_uid')} = s.${q('uid')} WHERE s.${q('uuid')} = ? LIMIT 1`,
      [uuid],
    )) as Record<string, unknown>[];
    const row = rows[0];
    if (!row) return null;
    const session = Object.assign(new AiSessionEntity(), {
      uid: Number(row.uid),
      pid: Number(row.pid),
      uuid: String(row.uuid),
      beUser: Number(row.be_user),
      configurationIdentifier: String(row.configuration_identifier ?? ''),
      title: String(row.title ?? ''),
      messageCount: Number(row.message_count),
      lastActivity: Number(row.last_activity),
      tstamp: Number(row.tstamp),
      crdate: Number(row.crdate),
    });
    const owner =
      row.o_session_uid === null || row.o_session_uid === undefined
        ? null
        : Object.assign(new ConversationOwnerEntity(), { sessionUid: Number(row.o_session_uid), ownerToken: Number(row.o_owner_token), activeRun: String(row.o_active_run ?? ''), activeRunUid: Number(row.o_active_run_uid) });
    return { session, owner };
  }

  /**
   * What a turn replays of a session: its messages' sequence, role and text,
   * in sequence order, all of them or those up to and including
   * `throughSequence` (one query on the unique key). Read as plain rows: a
   * turn reads the whole history, and hydrating a thousand entities cost
   * more than the rest of the turn's reads together.
   */
  async history(sessionUid: number, throughSequence?: number): Promise<HistoryRow[]> {
    const q = (name: string) => this.dataSource.driver.escape(name);
    const through = throughSequence === undefined ? '' : ` AND ${q('sequence')} <= ?`;
    const rows = (await this.dataSource.query(
      `SELECT ${q('sequence')} AS ${q('sequence')}, ${q('role')} AS ${q('role')}, ${q('content')} AS ${q('content')} FROM ${q('tx_nrllm_ai_session_message')} WHERE ${q('session')} = ?${through} ORDER BY ${q('sequence')}`,
      throughSequence === undefined ? [sessionUid] : [sessionUid, throughSequence],
    )) as { sequence: number | string; role: string | null; content: string | Buffer | null }[];
    return rows.map((row) => ({ sequence: Number(row.sequence), role: row.role ?? '', content: row.content === null ? '' : String(row.content) }));
  }

  /** A page of a session's messages after `afterSequence` (-1: from the start), in sequence order. */
  async messagePage(sessionUid: number, afterSequence: number, limit: number): Promise<AiSessionMessageEntity[]> {
    return this.dataSource
      .getRepository(AiSessionMessageEntity)
      .createQueryBuilder('m')
      .where('m.session = :sessionUid AND m.sequence > :afterSequence', { sessionUid, afterSequence })
      .orderBy('m.sequence', 'ASC')
      .limit(limit)
      .getMany();
  }

  /**
   * Takes the conversation for a turn: its active run becomes `run`, only if
   * it still is `expected` ('' idle, or a run known to have ended). A
   * session opened in TYPO3 (`known` false) gets this service's row here,
   * already taken. False: another turn took it meanwhile. (One statement
   * either way: a read lock upgraded to a write lock would deadlock two
   * turns racing on MySQL.)
   */
  async claimTurn(manager: EntityManager, sessionUid: number, expected: string, run: { uid: number; uuid: string }, known: boolean): Promise<boolean> {
    if (!known) {
      try {
        await manager.createQueryBuilder().insert().into(ConversationOwnerEntity).values({ sessionUid, ownerToken: 0, activeRun: run.uuid, activeRunUid: run.uid }).updateEntity(false).execute();
        return true;
      } catch (error) {
        if (isUniqueViolation(error)) return false;
        throw error;
      }
    }
    const result = await manager
      .createQueryBuilder()
      .update(ConversationOwnerEntity)
      .set({ activeRun: run.uuid, activeRunUid: run.uid })
      .where('session_uid = :sessionUid AND active_run = :expected', { sessionUid, expected })
      .execute();
    return (result.affected ?? 0) > 0;
  }

  /** The session whose turn `runUid` is (null: not a conversation turn, or no longer the active one). */
  async turnOfRun(manager: EntityManager, runUid: number): Promise<number | null> {
    const row = await manager.getRepository(ConversationOwnerEntity).createQueryBuilder('o').select('o.session_uid', 'session_uid').where('o.active_run_uid = :runUid', { runUid }).getRawOne<{ session_uid: number | string }>();
    return row ? Number(row.session_uid) : null;
  }

  /** The conversation is idle again once its turn's run ended. */
  async releaseTurn(manager: EntityManager, sessionUid: number, runUid: number): Promise<void> {
    await manager
      .createQueryBuilder()
      .update(ConversationOwnerEntity)
      .set({ activeRun: '', activeRunUid: 0 })
      .where('session_uid = :sessionUid AND active_run_uid = :runUid', { sessionUid, runUid })
      .execute();
  }

  /**
   * Appends a message at the session's next free sequence (one past the
   * highest, 0 for an empty session) and returns that sequence. The unique
   * key on (session, sequence) decides a race: on a collision the next slot
   * is read again, at most 5 times (nr_llm's rule). On MySQL the read locks
   * the session's range, so a writer that read the same slot waits instead
   * of colliding, and the next read sees the other's row.
   */
  async appendAtNextSequence(manager: EntityManager, sessionUid: number, message: NewMessage): Promise<number> {
    for (const attempt of nextSequenceAttempts()) {
      const sequence = await this.nextSequence(manager, sessionUid);
      try {
        await manager
          .createQueryBuilder()
          .insert()
          .into(AiSessionMessageEntity)
          .values({ pid: 0, session: sessionUid, sequence, ...message, crdate: unixNow() })
          .updateEntity(false)
          .execute();
        return sequence;
      } catch (error) {
        if (!isUniqueViolation(error) || attempt === SEQUENCE_ATTEMPTS) throw isUniqueViolation(error) ? sequenceAllocationFailed(sessionUid) : error;
      }
    }
    throw sequenceAllocationFailed(sessionUid);
  }

  private async nextSequence(manager: EntityManager, sessionUid: number): Promise<number> {
    const q = (name: string) => this.dataSource.driver.escape(name);
    const lock = this.dialect === 'mysql' ? ' FOR UPDATE' : '';
    const rows = (await manager.query(
      `SELECT ${q('sequence')} AS ${q('sequence')} FROM ${q('tx_nrllm_ai_session_message')} WHERE ${q('session')} = ? ORDER BY ${q('sequence')} DESC LIMIT 1${lock}`,
      [sessionUid],
    )) as { sequence: number | string }[];
    return rows.length === 0 ? 0 : Number(rows[0]!.sequence) + 1;
  }

  /** last_activity always moves forward; message_count only ever grows (nr_llm's `touch`). */
  async touch(manager: EntityManager, sessionUid: number, messageCount: number): Promise<void> {
    const now = unixNow();
    await manager
      .createQueryBuilder()
      .update(AiSessionEntity)
      .set({ lastActivity: () => `CASE WHEN last_activity < ${now} THEN ${now} ELSE last_activity END`, tstamp: now, messageCount: () => `CASE WHEN message_count < ${messageCount} THEN ${messageCount} ELSE message_count END` })
      .where('uid = :sessionUid', { sessionUid })
      .execute();
  }

  /** The sessions in `scope` that pass `filter`, newest activity first, read by keyset. */
  listed(scope: ConversationScope, filter: ConversationListFilter): KeysetSource<StoredConversation> {
    const conditions = scopeConditions(scope);
    if (filter.configuration != null) conditions.push({ sql: 's.configuration_identifier = :configuration', parameters: { configuration: filter.configuration } });
    if (filter.search != null && filter.search !== '') conditions.push(searchCondition(['s.title'], filter.search, 'search'));
    const base = (): SelectQueryBuilder<AiSessionEntity> => {
      const query = this.dataSource.getRepository(AiSessionEntity).createQueryBuilder('s').leftJoinAndMapOne('s.owner', ConversationOwnerEntity, 'o', 'o.session_uid = s.uid');
      for (const condition of conditions) query.andWhere(condition.sql, condition.parameters);
      return query;
    };
    return {
      read: async (after, limit) => {
        const query = base();
        if (after) {
          const condition = afterPosition(CONVERSATION_ORDER, after, 'after');
          query.andWhere(condition.sql, condition.parameters);
        }
        for (const { column, direction } of CONVERSATION_ORDER) query.addOrderBy(column, direction);
        const { entities, raw } = await query.limit(limit).getRawAndEntities<{ s_last_activity: unknown; s_uid: unknown }>();
        return entities.map((entity, index) => ({ row: splitOwner(entity), position: positionOf([raw[index]?.s_last_activity, raw[index]?.s_uid]) }));
      },
      count: () => base().getCount(),
      existsAtOrBefore: async (position) => {
        const condition = atOrBeforePosition(CONVERSATION_ORDER, position, 'before');
        return (await base().andWhere(condition.sql, condition.parameters).limit(1).getCount()) > 0;
      },
    };
  }

  /** Deletes a session, its messages and this service's row; false when it was gone already. */
  async delete(sessionUid: number): Promise<boolean> {
    return this.dataSource.transaction(async (manager) => {
      await manager.createQueryBuilder().delete().from(AiSessionMessageEntity).where('session = :sessionUid', { sessionUid }).execute();
      await manager.createQueryBuilder().delete().from(ConversationOwnerEntity).where('session_uid = :sessionUid', { sessionUid }).execute();
      const result = await manager.createQueryBuilder().delete().from(AiSessionEntity).where('uid = :sessionUid', { sessionUid }).execute();
      return (result.affected ?? 0) > 0;
    });
  }

  /** Deletes the sessions whose last activity is before `cutoff` (unix seconds), with their messages, 500 at a time; how many. */
  async purgeInactiveSince(cutoff: number): Promise<number> {
    let deleted = 0;
    for (;;) {
      const rows = await this.dataSource
        .getRepository(AiSessionEntity)
        .createQueryBuilder('s')
        .select('s.uid', 'uid')
        .where('s.last_activity < :cutoff', { cutoff })
        .limit(PURGE_CHUNK)
        .getRawMany<{ uid: number | string }>();
      if (rows.length === 0) return deleted;
      const uids = rows.map((row) => Number(row.uid));
      await this.dataSource.transaction(async (manager) => {
        await manager.createQueryBuilder().delete().from(AiSessionMessageEntity).where('session IN (:...uids)', { uids }).execute();
        await manager.createQueryBuilder().delete().from(ConversationOwnerEntity).where('session_uid IN (:...uids)', { uids }).execute();
        await manager.createQueryBuilder().delete().from(AiSessionEntity).where('uid IN (:...uids)', { uids }).execute();
      });
      deleted += uids.length;
      if (rows.length < PURGE_CHUNK) return deleted;
    }
  }
}

/** A session read with its owner row mapped onto it, as the two. */
function splitOwner(entity: AiSessionEntity): StoredConversation {
  const session = entity as AiSessionEntity & { owner?: ConversationOwnerEntity | null };
  const owner = session.owner ?? null;
  delete session.owner;
  return { session, owner };
}

/** A backend user's sessions, or the sessions a token opened without one; everything for ADMIN. */
function scopeConditions(scope: ConversationScope): SqlCondition[] {
  if (scope.all) return [];
  if (scope.beUser > 0) return [{ sql: 's.be_user = :beUser', parameters: { beUser: scope.beUser } }];
  return [{ sql: 's.be_user = 0 AND o.owner_token = :tokenUid', parameters: { tokenUid: scope.tokenUid } }];
}

function insertedUid(identifiers: readonly Record<string, unknown>[], raw: unknown): number {
  const fromIdentifiers = identifiers[0]?.uid;
  if (fromIdentifiers !== undefined) return Number(fromIdentifiers);
  // better-sqlite3 answers the new rowid itself, mysql2 an object with insertId.
  if (typeof raw === 'number' || typeof raw === 'bigint') return Number(raw);
  return Number((raw as { insertId?: unknown } | null)?.insertId);
}
