/**
 * Every statement of the conversations feature: TYPO3's
 * `tx_nrllm_ai_session` and `tx_nrllm_ai_session_message`, and this
 * service's `promptwire_conversation` beside them. Methods that take an
 * `EntityManager` run inside a caller's transaction (a turn's run being
 * stored, or its END).
 */
import type { DataSource, EntityManager, SelectQueryBuilder } from 'typeorm';
import type { Dialect } from '../db/data-source';
import { insertedId } from '../db/large-values';
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

/** A stored message as a turn replays it (its uid tells a remembered history from a rewritten one). */
export interface HistoryRow {
  uid: number;
  sequence: number;
  role: string;
  content: string;
}

/** A session's messages up to a sequence, in two figures. */
export interface MessagesSummary {
  count: number;
  uidSum: number;
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
  /** The statements of a turn, written once (they depend only on the dialect). */
  private readonly sql: TurnStatements;

  constructor(
    private readonly dataSource: DataSource,
    private readonly dialect: Dialect,
  ) {
    this.sql = turnStatements((name) => dataSource.driver.escape(name), dialect);
  }

  /** Stores a new session and this service's row for it, together. */
  async create(session: { uuid: string; beUser: number; configurationIdentifier: string; title: string; ownerToken: number }): Promise<AiSessionEntity> {
    const now = unixNow();
    return this.dataSource.transaction(async (manager) => {
      const values = { pid: 0, uuid: session.uuid, beUser: session.beUser, configurationIdentifier: session.configurationIdentifier, title: session.title, messageCount: 0, lastActivity: now, tstamp: now, crdate: now };
      const result = await manager.createQueryBuilder().insert().into(AiSessionEntity).values(values).updateEntity(false).execute();
      const uid = Number(result.identifiers[0]?.uid ?? insertedId(result.raw));
      await manager.createQueryBuilder().insert().into(ConversationOwnerEntity).values({ sessionUid: uid, ownerToken: session.ownerToken, activeRun: '', activeRunUid: 0 }).updateEntity(false).execute();
      return Object.assign(new AiSessionEntity(), { uid, ...values });
    });
  }

  /**
   * A session by its uuid, with this service's row (one query). Read as a
   * plain row: every turn and every read of a conversation starts here.
   */
  async findByUuid(uuid: string): Promise<StoredConversation | null> {
    const rows = (await this.dataSource.query(this.sql.findByUuid, [uuid])) as Record<string, unknown>[];
    return rows[0] ? storedOf(rows[0]) : null;
  }

  /**
   * `findByUuid` and `messagesSince(sessionUid, sequence)` in one statement
   * (one snapshot, one round trip): what a turn of a session whose history
   * is remembered reads first. The session found may be another than
   * `sessionUid`'s: the caller compares.
   */
  async findWithMessagesSince(uuid: string, sessionUid: number, sequence: number): Promise<{ stored: StoredConversation | null; through: MessagesSummary; after: HistoryRow[] }> {
    const rows = (await this.dataSource.query(this.sql.findWithMessagesSince, [sessionUid, sequence, sessionUid, sequence, uuid])) as Record<string, unknown>[];
    const sessionRow = rows.find((row) => Number(row.part) === 2);
    return { stored: sessionRow ? storedOf(sessionRow) : null, ...sinceOf(rows) };
  }

  /**
   * A session's messages after `afterSequence` (-1: all of them), in
   * sequence order, as a turn replays them (one query on the unique key).
   * Read as plain rows: a turn reads the history, and hydrating a thousand
   * entities cost more than the rest of the turn's reads together.
   */
  async messagesAfter(sessionUid: number, afterSequence: number): Promise<HistoryRow[]> {
    const rows = (await this.dataSource.query(this.sql.messagesAfter, [sessionUid, afterSequence])) as { uid: number | string; sequence: number | string; role: string | null; content: string | Buffer | null }[];
    return rows.map((row) => ({ uid: Number(row.uid), sequence: Number(row.sequence), role: row.role ?? '', content: row.content === null ? '' : String(row.content) }));
  }

  /**
   * In one statement (one snapshot, one round trip): how many messages a
   * session has up to and including `sequence` and the sum of their uids
   * (read from the unique key alone), and the messages after it.
   */
  async messagesSince(sessionUid: number, sequence: number): Promise<{ through: MessagesSummary; after: HistoryRow[] }> {
    return sinceOf((await this.dataSource.query(this.sql.messagesSince, [sessionUid, sequence, sessionUid, sequence])) as Record<string, unknown>[]);
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
   * Takes the conversation for a turn and touches the session for the
   * message about to be stored at `sequence`: its active run becomes `run`,
   * only if it still is `expected` ('' idle, or a run known to have ended).
   * A session opened in TYPO3 (`known` false) gets this service's row here,
   * already taken. False: another turn took it meanwhile, and nothing
   * changed. (A single statement per table: a read lock upgraded to a write
   * lock would deadlock two turns racing on MySQL. On MySQL the claim and
   * the touch are one statement.)
   */
  async claimTurn(manager: EntityManager, sessionUid: number, expected: string, run: { uid: number; uuid: string }, known: boolean, sequence: number): Promise<boolean> {
    if (!known) {
      try {
        await this.write(manager, this.sql.insertOwner, [sessionUid, 0, run.uuid, run.uid]);
      } catch (error) {
        if (isUniqueViolation(error)) return false;
        throw error;
      }
      await this.touch(manager, sessionUid, sequence + 1);
      return true;
    }
    const now = unixNow();
    if (this.dialect !== 'sqlite') return (await this.write(manager, this.sql.claimAndTouch, [run.uuid, run.uid, now, now, now, sequence + 1, sequence + 1, sessionUid, expected])) > 0;
    if ((await this.write(manager, this.sql.claim, [run.uuid, run.uid, sessionUid, expected])) === 0) return false;
    await this.touch(manager, sessionUid, sequence + 1);
    return true;
  }

  /**
   * The turn whose run `runUid` is: its session and the session's highest
   * sequence (-1: no message), in one indexed read; null when the run is no
   * conversation's turn, or no longer the active one.
   */
  async turnOfRun(manager: EntityManager, runUid: number): Promise<{ sessionUid: number; lastSequence: number } | null> {
    const rows = (await manager.query(this.sql.turnOfRun, [runUid])) as { session_uid: number | string; last_sequence: number | string | null }[];
    const row = rows[0];
    return row ? { sessionUid: Number(row.session_uid), lastSequence: row.last_sequence === null ? -1 : Number(row.last_sequence) } : null;
  }

  /**
   * In the END's transaction of run `runUid`: when it is a conversation's
   * active turn, its reply is stored at one past the session's highest
   * sequence, the session touched for it and the conversation left idle.
   * False (nothing written) when the run is no conversation's turn. Two
   * statements on MySQL, three on SQLite: the insert finds the turn and its
   * slot itself. A writer that takes the slot meanwhile makes the insert
   * fail on the unique key; the reply then goes the way of `appendMessage`.
   */
  async storeReplyOfRun(manager: EntityManager, runUid: number, reply: NewMessage): Promise<boolean> {
    try {
      const inserted = await this.write(manager, this.sql.insertReplyOfRun, [reply.role, reply.content, reply.model, reply.promptTokens, reply.completionTokens, reply.totalTokens, reply.droppedTurns, unixNow(), runUid]);
      if (inserted === 0) return false;
    } catch (error) {
      if (!isUniqueViolation(error)) throw error;
      const turn = await this.turnOfRun(manager, runUid);
      if (turn === null) return false;
      const stored = await this.appendMessage(manager, turn.sessionUid, reply, turn.lastSequence + 1);
      await this.releaseTurn(manager, turn.sessionUid, runUid, stored);
      return true;
    }
    const now = unixNow();
    if (this.dialect !== 'sqlite') {
      await this.write(manager, this.sql.touchAndReleaseRun, [now, now, now, runUid]);
      return true;
    }
    await this.write(manager, this.sql.touchRun, [now, now, now, runUid]);
    await this.releaseRun(manager, runUid);
    return true;
  }

  /** The conversation whose active turn run `runUid` is (if any) is idle again; nothing else changes. */
  async releaseRun(manager: EntityManager, runUid: number): Promise<void> {
    await this.write(manager, this.sql.releaseRun, [runUid]);
  }

  /**
   * The conversation is idle again once its turn's run ended; `stored`: the
   * sequence of the reply the END stored, to touch the session for (on MySQL
   * the release and the touch are one statement).
   */
  async releaseTurn(manager: EntityManager, sessionUid: number, runUid: number, stored: number | null): Promise<void> {
    if (stored !== null && this.dialect !== 'sqlite') {
      const now = unixNow();
      await this.write(manager, this.sql.touchAndRelease, [now, now, now, stored + 1, stored + 1, sessionUid, runUid]);
      return;
    }
    if (stored !== null) await this.touch(manager, sessionUid, stored + 1);
    await this.write(manager, this.sql.release, [sessionUid, runUid]);
  }

  /**
   * Appends a message at the session's next free sequence and returns that
   * sequence. `expected` is the slot the caller believes free (one past the
   * highest it read); when another writer took it, the unique key on
   * (session, sequence) refuses the insert and the next slot is read again
   * (one past the highest, 0 for an empty session), at most 5 attempts in
   * all (nr_llm's rule). On MySQL that read locks the session's range, so a
   * writer that read the same slot waits instead of colliding, and the next
   * read sees the other's row.
   */
  async appendMessage(manager: EntityManager, sessionUid: number, message: NewMessage, expected: number): Promise<number> {
    let sequence = expected;
    for (const attempt of nextSequenceAttempts()) {
      if (attempt > 1) sequence = await this.nextSequence(manager, sessionUid);
      try {
        await this.write(manager, this.sql.insertMessage, [0, sessionUid, sequence, message.role, message.content, message.model, message.promptTokens, message.completionTokens, message.totalTokens, message.droppedTurns, unixNow()]);
        return sequence;
      } catch (error) {
        if (!isUniqueViolation(error) || attempt === SEQUENCE_ATTEMPTS) throw isUniqueViolation(error) ? sequenceAllocationFailed(sessionUid) : error;
      }
    }
    throw sequenceAllocationFailed(sessionUid);
  }

  private async nextSequence(manager: EntityManager, sessionUid: number): Promise<number> {
    const rows = (await manager.query(this.sql.nextSequence, [sessionUid])) as { sequence: number | string }[];
    return rows.length === 0 ? 0 : Number(rows[0]!.sequence) + 1;
  }

  /** last_activity always moves forward; message_count only ever grows (nr_llm's `touch`). */
  async touch(manager: EntityManager, sessionUid: number, messageCount: number): Promise<void> {
    const now = unixNow();
    await this.write(manager, this.sql.touch, [now, now, now, messageCount, messageCount, sessionUid]);
  }

  /** Runs a write in the caller's transaction; the rows it changed. */
  private async write(manager: EntityManager, sql: string, parameters: unknown[]): Promise<number> {
    const runner = manager.queryRunner;
    if (!runner) throw new Error('a conversation write runs inside a transaction');
    return (await runner.query(sql, parameters, true)).affected ?? 0;
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

type TurnStatements = ReturnType<typeof turnStatements>;

/**
 * The statements a turn runs, as plain SQL: a turn runs about ten of them,
 * and building each through the query builder cost more than running it.
 */
function turnStatements(q: (name: string) => string, dialect: Dialect) {
  const session = q('tx_nrllm_ai_session');
  const messages = q('tx_nrllm_ai_session_message');
  const owner = q('promptwire_conversation');
  /** nr_llm's touch: the activity set to now (a parameter, three times) unless later, the count to `count` (by default a parameter, twice) unless higher. */
  const touchSet = (alias: string, count = '?') =>
    `${alias}${q('last_activity')} = CASE WHEN ${alias}${q('last_activity')} < ? THEN ? ELSE ${alias}${q('last_activity')} END, ${alias}${q('tstamp')} = ?, ` +
    `${alias}${q('message_count')} = CASE WHEN ${alias}${q('message_count')} < ${count} THEN ${count} ELSE ${alias}${q('message_count')} END`;
  /** One past a session's highest sequence (0 for none), read backwards on the unique key: MariaDB reads every row of the session for a correlated MAX(). */
  const nextSequenceOf = (sessionUid: string) => `COALESCE((SELECT m.${q('sequence')} FROM ${messages} m WHERE m.${q('session')} = ${sessionUid} ORDER BY m.${q('sequence')} DESC LIMIT 1), -1) + 1`;
  const messageColumns = ['pid', 'session', 'sequence', 'role', 'content', 'model', 'prompt_tokens', 'completion_tokens', 'total_tokens', 'dropped_turns', 'crdate'];
  const sessionColumns = ['uid', 'pid', 'uuid', 'be_user', 'configuration_identifier', 'title', 'message_count', 'last_activity', 'tstamp', 'crdate'];
  const ownerColumns = ['session_uid', 'owner_token', 'active_run', 'active_run_uid'];
  /** A part of the history check: 0 the messages after a sequence, 1 the summary up to it; `withSession`: padded for the session's columns. */
  const since = (part: 0 | 1, withSession = false) => {
    const pad = withSession ? [...sessionColumns, ...ownerColumns].map((column, index) => (part === 0 ? `NULL AS ${q(index < sessionColumns.length ? `s_${column}` : `o_${column}`)}` : 'NULL')).join(', ') : '';
    const columns =
      part === 0
        ? `0 AS ${q('part')}, ${q('uid')} AS ${q('uid')}, ${q('sequence')} AS ${q('sequence')}, ${q('role')} AS ${q('role')}, ${q('content')} AS ${q('content')}`
        : `1, COUNT(*), SUM(${q('uid')}), NULL, NULL`;
    return `SELECT ${columns}${pad ? `, ${pad}` : ''} FROM ${messages} WHERE ${q('session')} = ? AND ${q('sequence')} ${part === 0 ? '>' : '<='} ?`;
  };
  return {
    messagesAfter: `SELECT ${q('uid')} AS ${q('uid')}, ${q('sequence')} AS ${q('sequence')}, ${q('role')} AS ${q('role')}, ${q('content')} AS ${q('content')} FROM ${messages} WHERE ${q('session')} = ? AND ${q('sequence')} > ? ORDER BY ${q('sequence')}`,
    findByUuid: `SELECT ${[...sessionColumns.map((column) => `s.${q(column)} AS ${q(`s_${column}`)}`), ...ownerColumns.map((column) => `o.${q(column)} AS ${q(`o_${column}`)}`)].join(', ')} FROM ${session} s LEFT JOIN ${owner} o ON o.${q('session_uid')} = s.${q('uid')} WHERE s.${q('uuid')} = ?`,
    // The summary row (part 1) carries the count in `uid` and the uids' sum in `sequence`. Without ORDER BY
    // (MariaDB would sort the union in a temporary table: twice the time of the two parts); ordered by the caller.
    messagesSince: `${since(0)} UNION ALL ${since(1)}`,
    // The same, and the session's row (part 2) in the columns after those four, named as findByUuid names them.
    findWithMessagesSince:
      `${since(0, true)} UNION ALL ${since(1, true)} UNION ALL SELECT 2, NULL, NULL, NULL, NULL, ` +
      `${[...sessionColumns.map((column) => `s.${q(column)}`), ...ownerColumns.map((column) => `o.${q(column)}`)].join(', ')} FROM ${session} s LEFT JOIN ${owner} o ON o.${q('session_uid')} = s.${q('uid')} WHERE s.${q('uuid')} = ?`,
    nextSequence: `SELECT ${q('sequence')} AS ${q('sequence')} FROM ${messages} WHERE ${q('session')} = ? ORDER BY ${q('sequence')} DESC LIMIT 1${dialect === 'sqlite' ? '' : ' FOR UPDATE'}`,
    insertMessage: `INSERT INTO ${messages} (${messageColumns.map(q).join(', ')}) VALUES (${messageColumns.map(() => '?').join(', ')})`,
    insertOwner: `INSERT INTO ${owner} (${q('session_uid')}, ${q('owner_token')}, ${q('active_run')}, ${q('active_run_uid')}) VALUES (?, ?, ?, ?)`,
    touch: `UPDATE ${session} SET ${touchSet('')} WHERE ${q('uid')} = ?`,
    claim: `UPDATE ${owner} SET ${q('active_run')} = ?, ${q('active_run_uid')} = ? WHERE ${q('session_uid')} = ? AND ${q('active_run')} = ?`,
    release: `UPDATE ${owner} SET ${q('active_run')} = '', ${q('active_run_uid')} = 0 WHERE ${q('session_uid')} = ? AND ${q('active_run_uid')} = ?`,
    // MySQL and MariaDB only: the claim or the release and the session's touch in one statement.
    claimAndTouch: `UPDATE ${owner} o JOIN ${session} s ON s.${q('uid')} = o.${q('session_uid')} SET o.${q('active_run')} = ?, o.${q('active_run_uid')} = ?, ${touchSet('s.')} WHERE o.${q('session_uid')} = ? AND o.${q('active_run')} = ?`,
    touchAndRelease: `UPDATE ${session} s JOIN ${owner} o ON o.${q('session_uid')} = s.${q('uid')} SET ${touchSet('s.')}, o.${q('active_run')} = '', o.${q('active_run_uid')} = 0 WHERE s.${q('uid')} = ? AND o.${q('active_run_uid')} = ?`,
    // A turn's reply where its run is a conversation's active turn (else no row), at one past the highest sequence.
    insertReplyOfRun:
      `INSERT INTO ${messages} (${messageColumns.map(q).join(', ')}) SELECT 0, o.${q('session_uid')}, ${nextSequenceOf(`o.${q('session_uid')}`)}, ?, ?, ?, ?, ?, ?, ?, ? ` +
      `FROM ${owner} o WHERE o.${q('active_run_uid')} = ?`,
    touchRun: `UPDATE ${session} SET ${touchSet('', nextSequenceOf(`${session}.${q('uid')}`))} WHERE ${q('uid')} = (SELECT o.${q('session_uid')} FROM ${owner} o WHERE o.${q('active_run_uid')} = ?)`,
    releaseRun: `UPDATE ${owner} SET ${q('active_run')} = '', ${q('active_run_uid')} = 0 WHERE ${q('active_run_uid')} = ?`,
    // MySQL and MariaDB only.
    touchAndReleaseRun: `UPDATE ${session} s JOIN ${owner} o ON o.${q('session_uid')} = s.${q('uid')} SET ${touchSet('s.', nextSequenceOf(`s.${q('uid')}`))}, o.${q('active_run')} = '', o.${q('active_run_uid')} = 0 WHERE o.${q('active_run_uid')} = ?`,
    // The last sequence by the unique key read backwards (as nextSequenceOf).
    turnOfRun: `SELECT o.${q('session_uid')} AS ${q('session_uid')}, (SELECT m.${q('sequence')} FROM ${messages} m WHERE m.${q('session')} = o.${q('session_uid')} ORDER BY m.${q('sequence')} DESC LIMIT 1) AS ${q('last_sequence')} FROM ${owner} o WHERE o.${q('active_run_uid')} = ?`,
  };
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

/** A session row as findByUuid names its columns (`s_` the session's, `o_` the owner's), as the two. */
function storedOf(row: Record<string, unknown>): StoredConversation {
  const session = Object.assign(new AiSessionEntity(), {
    uid: Number(row.s_uid),
    pid: Number(row.s_pid),
    uuid: String(row.s_uuid),
    beUser: Number(row.s_be_user),
    configurationIdentifier: String(row.s_configuration_identifier ?? ''),
    title: String(row.s_title ?? ''),
    messageCount: Number(row.s_message_count),
    lastActivity: Number(row.s_last_activity),
    tstamp: Number(row.s_tstamp),
    crdate: Number(row.s_crdate),
  });
  const owner =
    row.o_session_uid === null || row.o_session_uid === undefined
      ? null
      : Object.assign(new ConversationOwnerEntity(), { sessionUid: Number(row.o_session_uid), ownerToken: Number(row.o_owner_token), activeRun: String(row.o_active_run ?? ''), activeRunUid: Number(row.o_active_run_uid) });
  return { session, owner };
}

/** The history check's rows (part 0: a message; part 1: the summary, its count in `uid` and its uids' sum in `sequence`), the messages in sequence order. */
function sinceOf(rows: readonly Record<string, unknown>[]): { through: MessagesSummary; after: HistoryRow[] } {
  const through: MessagesSummary = { count: 0, uidSum: 0 };
  const after: HistoryRow[] = [];
  for (const row of rows) {
    const part = Number(row.part);
    if (part === 1) {
      through.count = Number(row.uid ?? 0);
      through.uidSum = Number(row.sequence ?? 0);
    } else if (part === 0) {
      after.push({ uid: Number(row.uid), sequence: Number(row.sequence), role: row.role == null ? '' : String(row.role), content: row.content == null ? '' : String(row.content) });
    }
  }
  return { through, after: after.sort((a, b) => a.sequence - b.sequence) };
}
