import type { HistoryRow } from './conversation.repository';
import { HistoryCache, type HistorySource } from './history-cache';

/** A table of messages in memory, counting the reads a cache makes of it. */
function table() {
  const rows = new Map<number, HistoryRow[]>();
  let nextUid = 1;
  const reads = { whole: 0, after: 0, since: 0 };
  const source: HistorySource = {
    async messagesAfter(session, after) {
      if (after < 0) reads.whole += 1;
      else reads.after += 1;
      return (rows.get(session) ?? []).filter((row) => row.sequence > after).map((row) => ({ ...row }));
    },
    async messagesSince(session, sequence) {
      reads.since += 1;
      const list = rows.get(session) ?? [];
      const prefix = list.filter((row) => row.sequence <= sequence);
      return { through: { count: prefix.length, uidSum: prefix.reduce((sum, row) => sum + row.uid, 0) }, after: list.filter((row) => row.sequence > sequence).map((row) => ({ ...row })) };
    },
  };
  const append = (session: number, content: string) => {
    const list = rows.get(session) ?? [];
    list.push({ uid: nextUid++, sequence: list.length === 0 ? 0 : list[list.length - 1]!.sequence + 1, role: list.length % 2 === 0 ? 'user' : 'assistant', content });
    rows.set(session, list);
  };
  return { rows, reads, source, append };
}

const texts = (rows: readonly HistoryRow[]) => rows.map((row) => `${row.sequence}:${row.content}`);

describe('HistoryCache', () => {
  test('a remembered history is extended by the newer messages only, and cut at throughSequence', async () => {
    const t = table();
    t.append(1, 'a');
    t.append(1, 'b');
    const cache = new HistoryCache(t.source);
    expect(texts(await cache.read(1))).toEqual(['0:a', '1:b']);
    t.append(1, 'c');
    expect(texts(await cache.read(1))).toEqual(['0:a', '1:b', '2:c']);
    expect(t.reads).toEqual({ whole: 1, after: 0, since: 1 });
    expect(texts(await cache.read(1, 1))).toEqual(['0:a', '1:b']);
    expect(texts(await cache.read(1, -1))).toEqual([]);
    expect(cache.counts).toEqual({ kept: 3, readWhole: 1 });
  });

  test('a message deleted, or deleted and written again, makes the next read whole', async () => {
    const t = table();
    for (const text of ['a', 'b', 'c']) t.append(1, text);
    const cache = new HistoryCache(t.source);
    await cache.read(1);
    t.rows.set(1, t.rows.get(1)!.filter((row) => row.sequence !== 1));
    expect(texts(await cache.read(1))).toEqual(['0:a', '2:c']);
    t.rows.get(1)![1] = { uid: 99, sequence: 2, role: 'assistant', content: 'C' };
    expect(texts(await cache.read(1))).toEqual(['0:a', '2:C']);
    expect(cache.counts.readWhole).toBe(3);
    t.rows.delete(1);
    expect(await cache.read(1)).toEqual([]);
  });

  test('bounded: the least recently read sessions are forgotten past maxSessions or maxBytes', async () => {
    const t = table();
    for (let session = 1; session <= 3; session += 1) t.append(session, 'x'.repeat(100));
    const cache = new HistoryCache(t.source, { maxSessions: 2, maxBytes: 1_000 });
    await cache.read(1);
    await cache.read(2);
    await cache.read(1);
    await cache.read(3); // forgets 2, the least recently read
    const before = cache.counts.readWhole;
    await cache.read(1);
    await cache.read(3);
    expect(cache.counts.readWhole).toBe(before);
    await cache.read(2);
    expect(cache.counts.readWhole).toBe(before + 1);

    t.append(4, 'y'.repeat(2_000)); // larger than the whole cache: never remembered
    await cache.read(4);
    await cache.read(4);
    expect(cache.counts.readWhole).toBe(before + 3);
  });

  test('a remembered row is sent as the same message object on every turn; a row read again, as a new one', async () => {
    const t = table();
    for (const text of ['a', 'b']) t.append(1, text);
    t.rows.get(1)!.push({ uid: 50, sequence: 2, role: 'system', content: 'by hand' });
    const cache = new HistoryCache(t.source);
    const first = cache.replay(await cache.read(1));
    expect(first).toEqual([{ role: 'user', content: 'a' }, { role: 'assistant', content: 'b' }]);
    t.append(1, 'c');
    const second = cache.replay(await cache.read(1));
    expect(second).toHaveLength(3);
    expect(second[0]).toBe(first[0]);
    expect(second[1]).toBe(first[1]);
    // Deleted and written again: read whole, new rows, new messages with the same text.
    t.rows.get(1)![0] = { uid: 77, sequence: 0, role: 'user', content: 'a' };
    const third = cache.replay(await cache.read(1));
    expect(third[0]).toEqual(first[0]);
    expect(third[0]).not.toBe(first[0]);
  });

  test('kept: an answer read elsewhere goes on from the remembered history only while it is that history\'s', async () => {
    const t = table();
    for (const text of ['a', 'b']) t.append(1, text);
    const cache = new HistoryCache(t.source);
    expect(cache.since(1)).toBeNull();
    await cache.read(1);
    expect(cache.since(1)).toBe(1);
    t.append(1, 'c');
    const answer = await t.source.messagesSince(1, 1);
    // Asked for another sequence than the remembered end: not taken.
    expect(cache.kept(1, 0, answer)).toBeNull();
    expect(cache.kept(2, 1, answer)).toBeNull();
    expect(texts(cache.kept(1, 1, answer)!)).toEqual(['0:a', '1:b', '2:c']);
    expect(cache.since(1)).toBe(2);
    // The same answer again no longer matches the end remembered now.
    expect(cache.kept(1, 1, answer)).toBeNull();
    // A message deleted meanwhile: the summary differs, read whole.
    t.rows.set(1, t.rows.get(1)!.filter((row) => row.sequence !== 0));
    expect(cache.kept(1, 2, await t.source.messagesSince(1, 2))).toBeNull();
    expect(texts(await cache.read(1))).toEqual(['1:b', '2:c']);
  });
});
