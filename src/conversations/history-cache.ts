/**
 * The performance trick of conversations: a session's history remembered
 * between its turns, so a turn reads only the messages stored since the
 * last one instead of the whole conversation again.
 *
 * A remembered history is used only while it still is what is stored: each
 * read asks the database how many messages the session has up to the last
 * remembered sequence and the sum of their uids (read from the unique key,
 * in the statement that reads the newer messages). nr_llm only ever appends messages
 * and deletes them physically, so a message deleted, or deleted and written
 * again (a new uid), changes the two figures, and the history is then read
 * whole. Every instance keeps its own; nothing is shared or invalidated
 * across processes, since every read checks.
 *
 * Bounded: the least recently read sessions are forgotten first, once more
 * than `maxSessions` are remembered or their texts pass `maxBytes`.
 *
 * A remembered row also keeps the message it is sent as (`replay`), so a
 * conversation's messages are the same objects from turn to turn and the
 * run's token estimate, which remembers its measures by message object
 * (engine/estimate-memo), measures each of them once; a history that
 * extends the last one replayed replays only its new rows (prefix-memo).
 */
import type { ChatMessage } from '../providers/adapters/types';
import type { HistoryRow, MessagesSummary } from './conversation.repository';
import { PrefixMemo } from '../shared/prefix-memo';
import { replayedMessage } from './conversation-rules';

export interface HistorySource {
  /** The session's messages after `afterSequence` (-1: all), in sequence order. */
  messagesAfter(sessionUid: number, afterSequence: number): Promise<HistoryRow[]>;
  /** At once: how many messages the session has up to and including `sequence` and their uids' sum, and the messages after it. */
  messagesSince(sessionUid: number, sequence: number): Promise<{ through: MessagesSummary; after: HistoryRow[] }>;
}

export interface HistoryCacheLimits {
  maxSessions: number;
  /** UTF-16 code units of message text, over all sessions. */
  maxBytes: number;
}

const DEFAULT_LIMITS: HistoryCacheLimits = { maxSessions: 500, maxBytes: 32 * 1024 * 1024 };

interface Remembered {
  rows: readonly HistoryRow[];
  uidSum: number;
  size: number;
}

export class HistoryCache {
  private readonly sessions = new Map<number, Remembered>();
  /** Each row's message as sent (null: left out); forgotten with the row. */
  private readonly replayed = new WeakMap<HistoryRow, ChatMessage | null>();
  private readonly replays = new PrefixMemo<HistoryRow, ChatMessage[]>({
    empty: () => [],
    copy: (messages) => messages.slice(),
    add: (messages, row) => {
      let message = this.replayed.get(row);
      if (message === undefined) this.replayed.set(row, (message = replayedMessage(row)));
      if (message) messages.push(message);
    },
  });
  private size = 0;
  /** How the reads went (tests and diagnostics): remembered and still valid, read whole. */
  readonly counts = { kept: 0, readWhole: 0 };

  constructor(
    private readonly source: HistorySource,
    private readonly limits: HistoryCacheLimits = DEFAULT_LIMITS,
  ) {}

  /** The session's messages in sequence order: all of them, or those up to and including `throughSequence`. */
  async read(sessionUid: number, throughSequence?: number): Promise<readonly HistoryRow[]> {
    const rows = await this.current(sessionUid);
    if (throughSequence === undefined) return rows;
    let end = rows.length;
    while (end > 0 && rows[end - 1]!.sequence > throughSequence) end -= 1;
    return rows.slice(0, end);
  }

  /**
   * The rows as the model gets them again (`replayedMessage`; rows it leaves
   * out are left out), each row's message made once; a list that extends one
   * replayed before replays only the rows it adds (prefix-memo).
   */
  replay(rows: readonly HistoryRow[]): ChatMessage[] {
    return this.replays.of(rows);
  }

  /** Forgets a session (deleted). */
  forget(sessionUid: number): void {
    const remembered = this.sessions.get(sessionUid);
    if (!remembered) return;
    this.sessions.delete(sessionUid);
    this.size -= remembered.size;
  }

  /**
   * The sequence a remembered history of the session ends at (null: none):
   * what a caller reading other rows in the same statement asks
   * `messagesSince` of, to hand the answer to `kept`.
   */
  since(sessionUid: number): number | null {
    const rows = this.sessions.get(sessionUid)?.rows;
    return rows && rows.length > 0 ? rows[rows.length - 1]!.sequence : null;
  }

  /**
   * The history, when what `messagesSince(sessionUid, sequence)` answered
   * shows the remembered one is still what is stored (null: read it whole,
   * with `read`). One rule for every read that goes on from a remembered history.
   */
  kept(sessionUid: number, sequence: number, answer: { through: MessagesSummary; after: readonly HistoryRow[] }): readonly HistoryRow[] | null {
    const remembered = this.sessions.get(sessionUid);
    if (!remembered || remembered.rows.length === 0 || remembered.rows[remembered.rows.length - 1]!.sequence !== sequence) return null;
    const { through: summary, after: newer } = answer;
    if (summary.count !== remembered.rows.length || summary.uidSum !== remembered.uidSum) return null;
    this.counts.kept += 1;
    const rows = newer.length === 0 ? remembered.rows : remembered.rows.concat(newer);
    this.remember(sessionUid, rows, remembered.uidSum + uidSumOf(newer), remembered.size + sizeOf(newer));
    return rows;
  }

  private async current(sessionUid: number): Promise<readonly HistoryRow[]> {
    const since = this.since(sessionUid);
    if (since !== null) {
      const rows = this.kept(sessionUid, since, await this.source.messagesSince(sessionUid, since));
      if (rows) return rows;
    }
    this.counts.readWhole += 1;
    const rows = await this.source.messagesAfter(sessionUid, -1);
    this.remember(sessionUid, rows, uidSumOf(rows), sizeOf(rows));
    return rows;
  }

  private remember(sessionUid: number, rows: readonly HistoryRow[], uidSum: number, size: number): void {
    this.forget(sessionUid);
    if (rows.length === 0 || size > this.limits.maxBytes) return;
    // Map order is insertion order: re-inserted, the session is now the most recently read.
    this.sessions.set(sessionUid, { rows, uidSum, size });
    this.size += size;
    for (const [uid, oldest] of this.sessions) {
      if (this.sessions.size <= this.limits.maxSessions && this.size <= this.limits.maxBytes) break;
      this.sessions.delete(uid);
      this.size -= oldest.size;
    }
  }
}

function uidSumOf(rows: readonly HistoryRow[]): number {
  let sum = 0;
  for (const row of rows) sum += row.uid;
  return sum;
}

function sizeOf(rows: readonly HistoryRow[]): number {
  let size = 0;
  for (const row of rows) size += row.content.length + 64;
  return size;
}
