/**
 * What a turn asks of nr_llm's conversation tables, counted from the
 * server's own statements, and the END's reply when another writer takes
 * its slot: on SQLite and MySQL through the running server.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';
import { gate } from '../runs/scripted-provider';
import { waitUntil } from '../support/instances';
import { ConversationKit } from './conversation-kit';

const CONVERSATION_TABLES = /tx_nrllm_ai_session|promptwire_conversation/;

describe.each(testDialects)('a turn\'s statements (%s)', (dialect) => {
  let ts: TestServer;
  let counting = false;
  let statements: string[] = [];
  const runs = new RunKit(() => ts);
  const chats = new ConversationKit(() => ts, runs);

  beforeAll(async () => {
    ts = await startTestServer(dialect, {
      server: {
        onQuery: (sql) => {
          if (counting && CONVERSATION_TABLES.test(sql)) statements.push(sql.replace(/\s+/g, ' ').trim());
        },
      },
    });
  });
  afterAll(async () => {
    await ts?.stop();
    await runs.closeProviders();
  });

  const counted = async <T>(work: () => Promise<T>): Promise<{ result: T; reads: string[]; writes: string[] }> => {
    statements = [];
    counting = true;
    try {
      const result = await work();
      return { result, reads: statements.filter((sql) => /^\(?SELECT/i.test(sql)), writes: statements.filter((sql) => /^(INSERT|UPDATE|DELETE)/i.test(sql)) };
    } finally {
      counting = false;
    }
  };

  test('a turn of a conversation this instance served reads its session and history in one statement; its END stores the reply in two statements (three on SQLite); a plain run\'s END asks once', async () => {
    const setup = await runs.setup();
    setup.provider.script(...Array.from({ length: 4 }, (_, i) => ({ text: `answer ${i}`, usage: { prompt: 2, completion: 2 } })));
    const conversation = await chats.start({ configuration: setup.configuration });
    // Sent and waited for by the run's status alone (reading its trace would read the history it sent).
    const turn = async (content: string) => {
      const sent = await chats.send(conversation.id, content);
      return waitUntil(async () => {
        const data = await ts.ok<{ run: { status: string } }>('query($id: ID!) { run(id: $id) { status } }', { id: sent.run.id });
        return data.run.status === 'COMPLETED' && data.run;
      }, { what: `run ${sent.run.id} to complete` });
    };
    // The first turns read their history whole (an empty one is not remembered); the third goes on from the second's.
    await turn('first');
    await turn('second');

    const third = await counted(() => turn('third'));
    expect(third.result.status).toBe('COMPLETED');
    // The session, its owner row, the history's check and the new messages: one statement.
    expect(third.reads).toHaveLength(1);
    expect(third.reads[0]).toMatch(/UNION ALL/);
    // Taken + touched and the user message (three on SQLite: the claim and the touch are two); the reply, the touch and the release.
    expect(third.writes).toHaveLength(dialect === 'sqlite' ? 6 : 4);
    expect((await chats.messages(conversation.id)).map((m) => `${m.sequence}:${m.role}:${m.content}`)).toEqual(['0:user:first', '1:assistant:answer 0', '2:user:second', '3:assistant:answer 1', '4:user:third', '5:assistant:answer 2']);
    const stored = await chats.get(conversation.id);
    expect(stored!.messageCount).toBe(6);

    // A run that is no turn: its END asks the conversation tables once, and finds nothing to do.
    const plain = await counted(async () => runs.waitForRun((await runs.startRun({ configuration: setup.configuration, prompt: 'alone' })).id));
    expect(plain.result.status).toBe('COMPLETED');
    expect(plain.reads.length + plain.writes.length).toBe(1);
    expect(await chats.messages(conversation.id)).toHaveLength(6);
  });

  /** A turn whose provider call waits for `held`, and a message stored at the slot after its user message as another program stores it. */
  const heldTurn = async () => {
    const setup = await runs.setup();
    const held = gate();
    setup.provider.script({ text: 'the reply', usage: { prompt: 2, completion: 2 }, gate: held.promise });
    const conversation = await chats.start({ configuration: setup.configuration });
    const sent = await chats.send(conversation.id, 'hello');
    await setup.provider.waitForRequest(1);
    const [session] = (await ts.database.query('SELECT uid FROM tx_nrllm_ai_session WHERE uuid = ?', [conversation.id])) as { uid: number }[];
    const storeAsTypo3 = () =>
      ts.database.query('INSERT INTO tx_nrllm_ai_session_message (pid, session, sequence, role, content, model, prompt_tokens, completion_tokens, total_tokens, crdate) VALUES (0, ?, 1, ?, ?, ?, 0, 0, 0, ?)', [session!.uid, 'user', 'from TYPO3', '', Math.floor(Date.now() / 1000)]);
    return { setup, held, conversation, sent, storeAsTypo3 };
  };

  test('a message another program stores while the turn waits for its answer: the reply goes after it, the count follows', async () => {
    const { setup, held, conversation, sent, storeAsTypo3 } = await heldTurn();
    await storeAsTypo3();
    held.open();
    expect((await runs.waitForRun(sent.run.id)).status).toBe('COMPLETED');
    expect((await chats.messages(conversation.id)).map((m) => `${m.sequence}:${m.content}`)).toEqual(['0:hello', '1:from TYPO3', '2:the reply']);
    const stored = await chats.get(conversation.id);
    expect(stored!.messageCount).toBe(3);
    // Idle again: the next turn is taken.
    setup.provider.script({ text: 'again', usage: { prompt: 2, completion: 2 } });
    expect((await chats.turn(conversation.id, 'next')).ended.status).toBe('COMPLETED');
  });

  // Only MySQL lets two writers overlap (SQLite has one writer at a time).
  if (dialect === 'mysql') test('a writer holding the reply\'s slot when the END stores it: the END waits, is refused by the unique key, and stores the reply at the next slot', async () => {
    const { held, conversation, sent, storeAsTypo3 } = await heldTurn();
    // Another program's transaction writes the slot after the user message, and has not committed.
    await ts.database.query('START TRANSACTION');
    await storeAsTypo3();
    held.open();
    // The END's insert waits on that row's lock.
    await waitUntil(async () => ((await ts.database.query('SELECT COUNT(*) AS n FROM information_schema.INNODB_LOCK_WAITS')) as { n: number }[])[0]!.n > 0, { timeoutMs: 10_000, what: 'the END waiting on the slot' });
    await ts.database.query('COMMIT');
    expect((await runs.waitForRun(sent.run.id)).status).toBe('COMPLETED');
    expect((await chats.messages(conversation.id)).map((m) => `${m.sequence}:${m.content}`)).toEqual(['0:hello', '1:from TYPO3', '2:the reply']);
    expect((await chats.get(conversation.id))!.messageCount).toBe(3);
  });
});
