/**
 * The retention purge end to end: conversations idle longer than
 * CONVERSATION_RETENTION_DAYS (by last_activity) are deleted with their
 * messages and this service's row when a server starts (then hourly), in
 * chunks of 500 (TYPO3's own sessions among them); younger ones stay whole.
 * On SQLite and MySQL.
 */
import crypto from 'node:crypto';
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { waitUntil } from '../support/instances';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';
import { ConversationKit } from './conversation-kit';

const DAY = 86_400;

describe.each(testDialects)('the conversation purge (%s)', (dialect) => {
  let database: TestDatabase;
  let ts: TestServer | null = null;
  const runs = new RunKit(() => ts!);
  const chats = new ConversationKit(() => ts!, runs);

  beforeAll(async () => {
    database = await createTestDatabase(dialect);
  });
  afterAll(async () => {
    await ts?.stop();
    await runs.closeProviders();
    await database?.drop();
  });

  const count = async (sql: string, params: unknown[] = []) => Number(((await database.query(sql, params)) as { n: number | string }[])[0]!.n);
  const sessionsNamed = (uuids: string[]) => count(`SELECT COUNT(*) AS n FROM tx_nrllm_ai_session WHERE uuid IN (${uuids.map(() => '?').join(', ')})`, uuids);
  const messagesOf = (uuid: string) => count('SELECT COUNT(*) AS n FROM tx_nrllm_ai_session_message m JOIN tx_nrllm_ai_session s ON s.uid = m.session WHERE s.uuid = ?', [uuid]);
  const idleFor = (uuid: string, days: number) => database.query('UPDATE tx_nrllm_ai_session SET last_activity = ? WHERE uuid = ?', [Math.floor(Date.now() / 1000) - days * DAY - 60, uuid]);

  test('sessions idle past the retention go with their messages, at each start; younger ones stay', async () => {
    ts = await startTestServer(dialect, { database, keepDatabase: true, env: { CONVERSATION_RETENTION_DAYS: '30' } });
    const setup = await runs.setup();
    setup.provider.script({ text: 'a' }, { text: 'b' }, { text: 'c' });
    const old = await chats.start({ configuration: setup.configuration, title: 'old' });
    const month = await chats.start({ configuration: setup.configuration, title: '29 days' });
    const fresh = await chats.start({ configuration: setup.configuration, title: 'fresh' });
    for (const conversation of [old, month, fresh]) await chats.turn(conversation.id, 'hi');
    await idleFor(old.id, 31);
    await idleFor(month.id, 29);
    // 600 sessions TYPO3 wrote and left idle for 40 days, one message each: more than one chunk of 500.
    const now = Math.floor(Date.now() / 1000);
    const typo3 = Array.from({ length: 600 }, () => crypto.randomUUID());
    const stale = now - 40 * DAY;
    await database.query(
      `INSERT INTO tx_nrllm_ai_session (pid, uuid, be_user, configuration_identifier, title, message_count, last_activity, tstamp, crdate) VALUES ${typo3.map(() => '(0, ?, 3, \'\', \'typo3\', 1, ?, ?, ?)').join(', ')}`,
      typo3.flatMap((uuid) => [uuid, stale, stale, stale]),
    );
    await database.query(
      `INSERT INTO tx_nrllm_ai_session_message (pid, session, sequence, role, content, model, prompt_tokens, completion_tokens, total_tokens, dropped_turns, crdate)
       SELECT 0, uid, 0, 'user', 'old question', '', 0, 0, 0, NULL, ? FROM tx_nrllm_ai_session WHERE title = 'typo3'`,
      [stale],
    );
    expect(await sessionsNamed(typo3)).toBe(600);
    await ts.stop();

    // A restart purges at once (it is not waited for: polled here).
    ts = await startTestServer(dialect, { database, keepDatabase: true, env: { CONVERSATION_RETENTION_DAYS: '30' } });
    await waitUntil(async () => (await sessionsNamed([old.id, ...typo3])) === 0, { what: 'the purge of the idle sessions' });
    expect(await count("SELECT COUNT(*) AS n FROM tx_nrllm_ai_session_message WHERE content = 'old question'")).toBe(0);
    expect(await messagesOf(old.id)).toBe(0);
    expect(await count('SELECT COUNT(*) AS n FROM promptwire_conversation o LEFT JOIN tx_nrllm_ai_session s ON s.uid = o.session_uid WHERE s.uid IS NULL')).toBe(0);
    expect(await chats.get(old.id)).toBeNull();
    // Younger than the retention: the session and its messages stay.
    for (const kept of [month, fresh]) {
      expect(await messagesOf(kept.id)).toBe(2);
      expect((await chats.messages(kept.id)).map((m) => m.role)).toEqual(['user', 'assistant']);
    }
    await ts.stop();

    // A shorter retention takes the 29-day-old one too.
    ts = await startTestServer(dialect, { database, keepDatabase: true, env: { CONVERSATION_RETENTION_DAYS: '7' } });
    await waitUntil(async () => (await sessionsNamed([month.id])) === 0, { what: 'the purge under a 7-day retention' });
    expect(await messagesOf(month.id)).toBe(0);
    expect(await messagesOf(fresh.id)).toBe(2);
  });
});
