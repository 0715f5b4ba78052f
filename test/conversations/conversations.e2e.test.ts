/**
 * Conversations end to end (nr_llm's ADR-083/121 rules): a real server, a
 * scripted OpenAI-compatible provider, GraphQL over HTTP, on SQLite and MySQL.
 */
import { testDialects } from '../support/databases';
import { collect, startTestServer, type TestServer } from '../support/server';
import { RunKit, expectWellFormedTrace } from '../runs/run-kit';
import { gate } from '../runs/scripted-provider';
import { waitUntil } from '../support/instances';
import { ConversationKit, GET, SEND, START, text } from './conversation-kit';

const wire = (body: Record<string, unknown>) => (body.messages as { role: string; content: string }[]).map((m) => `${m.role}:${m.content}`);

describe.each(testDialects)('conversations (%s)', (dialect) => {
  let ts: TestServer;
  const runs = new RunKit(() => ts);
  const chats = new ConversationKit(() => ts, runs);

  beforeAll(async () => {
    ts = await startTestServer(dialect);
  });
  afterAll(async () => {
    await ts?.stop();
    await runs.closeProviders();
  });

  async function tokenAs(role: 'ADMIN' | 'EDITOR' | 'VIEWER', beUser = 0): Promise<string> {
    const data = await ts.ok<{ createApiToken: { token: string } }>('mutation($n: String!, $r: Role!, $b: Int!) { createApiToken(name: $n, role: $r, beUser: $b) { token } }', {
      n: `${role} ${beUser} ${Math.random()}`,
      r: role,
      b: beUser,
    });
    return data.createApiToken.token;
  }

  test('startConversation opens a session; bad input is refused with nothing written', async () => {
    const setup = await runs.setup();
    const started = await chats.start({ configuration: setup.configuration, title: 't' });
    expect(started).toMatchObject({ title: 't', messageCount: 0, configurationIdentifier: setup.configuration, beUser: 0 });
    expect(started.id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);

    const count = async () => Number(((await ts.database.query('SELECT COUNT(*) AS n FROM tx_nrllm_ai_session')) as { n: number }[])[0]!.n);
    const before = await count();
    const unknown = await ts.gql(START, { input: { configuration: 'no_such_configuration' } });
    expect(unknown.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const long = await ts.gql(START, { input: { configuration: setup.configuration, title: text(256) } });
    expect(long.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    const viewer = await ts.gql(START, { input: { configuration: setup.configuration } }, await tokenAs('VIEWER'));
    expect(viewer.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    await ts.ok(`mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { isActive: false }) { uid } }`, { uid: setup.configurationUid });
    const inactive = await ts.gql(START, { input: { configuration: setup.configuration } });
    expect(inactive.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(await count()).toBe(before);
  });

  test('a turn stores the user message before the call and the reply at its END; turn 2 sends the history', async () => {
    const setup = await runs.setup({ systemPrompt: 'Be brief.' });
    const held = gate();
    setup.provider.script({ text: 'Hello!', usage: { prompt: 11, completion: 3 }, gate: held.promise }, { text: 'Fine.', usage: { prompt: 20, completion: 2 } });
    const conversation = await chats.start({ configuration: setup.configuration });

    const sent = await chats.send(conversation.id, 'hi');
    expect(sent.userMessage).toMatchObject({ id: `${conversation.id}:0`, sequence: 0, role: 'user', content: 'hi', model: '', promptTokens: 0, totalTokens: 0, droppedTurns: 0 });
    expect(['QUEUED', 'RUNNING']).toContain(sent.run.status);
    await setup.provider.waitForRequest(1);
    // The user message is stored while the provider has not answered yet.
    expect((await chats.messages(conversation.id)).map((m) => m.role)).toEqual(['user']);
    held.open();
    const first = await runs.waitForRun(sent.run.id);
    expect(first.status).toBe('COMPLETED');
    expectWellFormedTrace(first.steps);

    const after1 = await chats.get(conversation.id);
    expect(after1!.messageCount).toBe(2);
    expect(after1!.messages[1]).toMatchObject({ id: `${conversation.id}:1`, sequence: 1, role: 'assistant', content: first.finalContent, model: 'scripted-gpt', promptTokens: 11, completionTokens: 3, totalTokens: first.totalTokens, droppedTurns: null });

    const second = await chats.turn(conversation.id, 'how are you?');
    expect(second.userMessage.sequence).toBe(2);
    expect(second.ended.status).toBe('COMPLETED');
    // The system prompt again (never stored), the history, the new message; no tools offered.
    expect(wire(setup.provider.requests[1]!.body)).toEqual(['system:Be brief.', 'user:hi', 'assistant:Hello!', 'user:how are you?']);
    expect(setup.provider.requests[1]!.body.tools).toBeUndefined();
    expect((await chats.messages(conversation.id)).map((m) => `${m.sequence}:${m.role}`)).toEqual(['0:user', '1:assistant', '2:user', '3:assistant']);
  });

  test('with tools the loop runs and only the final answer is stored', async () => {
    const setup = await runs.setup();
    setup.provider.script({ toolCalls: [{ name: 'calculator', arguments: { expression: '6 * 7' } }], usage: { prompt: 5, completion: 5 } }, { text: '42.', usage: { prompt: 9, completion: 1 } });
    const conversation = await chats.start({ configuration: setup.configuration });
    const turn = await chats.turn(conversation.id, 'what is 6*7?', { tools: ['calculator'] });
    expect(turn.ended.finalContent).toBe('42.');
    expect((await chats.messages(conversation.id)).map((m) => `${m.role}:${m.content}`)).toEqual(['user:what is 6*7?', 'assistant:42.']);
  });

  test('the context fit drops whole oldest turns (never the first user message) and records them; storage is never trimmed', async () => {
    // Budget 1000 − 500 − 30 = 470; every message 350 bytes.
    const setup = await runs.setup({ contextLength: 1000, maxOutputTokens: 500 });
    const reply = (n: number) => ({ text: text(350, String.fromCharCode(65 + n)), usage: { prompt: 1, completion: 1 } });
    setup.provider.script(reply(0), reply(1), reply(2), reply(3));
    const conversation = await chats.start({ configuration: setup.configuration });
    const dropped: (number | null)[] = [];
    for (let turn = 0; turn < 4; turn += 1) {
      const sent = await chats.turn(conversation.id, text(350, String.fromCharCode(97 + turn)));
      expect(sent.ended.status).toBe('COMPLETED');
      dropped.push(sent.userMessage.droppedTurns);
      if (turn === 2) {
        const context = sent.ended.steps.find((step) => step.kind === 'CONTEXT')!.contextBudget!;
        expect(context).toMatchObject({ estimate: 374, budget: 470, droppedTurns: 1 });
      }
    }
    expect(dropped).toEqual([0, 0, 1, 2]);
    const sentAt = (index: number) => (setup.provider.requests[index]!.body.messages as { content: string }[]).map((m) => m.content[0]);
    expect(sentAt(2)).toEqual(['a', 'B', 'c']); // [u0, a1, u2]
    expect(sentAt(3)).toEqual(['a', 'C', 'd']); // [u0, a2, u3]
    expect(await chats.messages(conversation.id)).toHaveLength(8);
    expect((await chats.messages(conversation.id)).map((m) => m.droppedTurns)).toEqual([0, null, 0, null, 1, null, 2, null]);
  });

  test('a turn\'s REQUEST names the history it sent: stored without it, read back exactly as the provider got it; left out, with a warning, once the conversation is deleted', async () => {
    // As the fit test above: turn 3 drops one turn, turn 4 two.
    const setup = await runs.setup({ contextLength: 1000, maxOutputTokens: 500 });
    const reply = (n: number) => ({ text: text(350, String.fromCharCode(65 + n)), usage: { prompt: 1, completion: 1 } });
    setup.provider.script(reply(0), reply(1), reply(2), { toolCalls: [{ name: 'calculator', arguments: { expression: '6 * 7' } }], usage: { prompt: 1, completion: 1 } }, reply(3));
    const conversation = await chats.start({ configuration: setup.configuration });
    const runIds: string[] = [];
    for (let turn = 0; turn < 3; turn += 1) runIds.push((await chats.turn(conversation.id, text(350, String.fromCharCode(97 + turn)))).run.id);
    // Turn 4 waits for a person between its rounds: the run goes on from its stored steps.
    const held = await chats.send(conversation.id, text(350, 'd'), { tools: ['calculator'], approvalRequired: ['calculator'] });
    runIds.push(held.run.id);
    await waitUntil(async () => String((await runs.run(held.run.id)).status) === 'WAITING_FOR_APPROVAL', { what: 'the approval wait' });
    const calls = (await ts.ok<{ run: { steps: { kind: string; pendingToolCalls: { id: string }[] | null }[] } }>('query($id: ID!) { run(id: $id) { steps { kind pendingToolCalls { id } } } }', { id: held.run.id })).run.steps.find((step) => step.kind === 'APPROVAL')!.pendingToolCalls!;
    await ts.ok('mutation($runId: ID!, $decisions: [ToolDecisionInput!]!) { resolveToolApproval(runId: $runId, decisions: $decisions) { id } }', { runId: held.run.id, decisions: [{ toolCallId: calls[0]!.id, approve: true }] });
    expect((await runs.waitForRun(held.run.id)).status).toBe('COMPLETED');

    // Every REQUEST of every turn, read back, is what the provider received (in order: 5 calls).
    const readBack: string[][] = [];
    for (const id of runIds) {
      for (const step of (await runs.run(id)).steps) {
        if (step.kind === 'REQUEST') readBack.push(step.messagesSent!.map((m) => `${m.role}:${(m.content ?? '').slice(0, 1)}`));
      }
    }
    const received = setup.provider.requests.map((request) => (request.body.messages as { role: string; content: string | null }[]).map((m) => `${m.role}:${(m.content ?? '').slice(0, 1)}`));
    expect(readBack).toEqual(received);
    expect(received[2]).toEqual(['user:a', 'assistant:B', 'user:c']);
    // Whole texts too, not only their first letters.
    const last = (await runs.run(runIds[3]!)).steps.filter((step) => step.kind === 'REQUEST').at(-1)!;
    expect(last.messagesSent!.map((m) => m.content)).toEqual((setup.provider.requests[4]!.body.messages as { content: string | null }[]).map((m) => m.content));

    // Stored: turn 3's REQUEST holds its prompt, not the history's 350-byte messages.
    const payloadOf = async (runId: string) => {
      const rows = (await ts.database.query(`SELECT e.payload FROM tx_nrllm_agentrun_event e JOIN tx_nrllm_agentrun r ON r.uid = e.run WHERE r.uuid = ? AND e.kind = 'request' ORDER BY e.sequence`, [runId])) as { payload: string }[];
      return rows.map((row) => JSON.parse(row.payload) as { messagesSent: { content: string }[]; historySent?: unknown });
    };
    const [third] = await payloadOf(runIds[2]!);
    expect(third!.messagesSent.map((m) => m.content)).toEqual([text(350, 'c')]);
    expect(third!.historySent).toMatchObject({ count: 4, runs: [[0, 0, 1], [1, 3, 4]] });

    // The trace a watcher replays says the same.
    const client = ts.wsClient();
    const trace = collect<{ runTrace: { kind: string; messagesSent: { content: string }[] | null } }>(client, 'subscription($id: ID!) { runTrace(runId: $id) { kind messagesSent { content } } }', { id: runIds[2] });
    await trace.done;
    await client.dispose();
    expect(trace.errors).toEqual([]);
    expect(trace.events.find((event) => event.runTrace.kind === 'REQUEST')!.runTrace.messagesSent!.map((m) => m.content[0])).toEqual(['a', 'B', 'c']);

    // Deleted: the runs stay, their REQUESTs without the history, saying so.
    await ts.ok('mutation($id: ID!) { deleteConversation(id: $id) }', { id: conversation.id });
    const after = (await ts.ok<{ run: { steps: { kind: string; messagesSent: { content: string }[] | null; warnings: string[] | null }[] } }>('query($id: ID!) { run(id: $id) { steps { kind messagesSent { content } warnings } } }', { id: runIds[2] })).run.steps.find((step) => step.kind === 'REQUEST')!;
    expect(after.messagesSent!.map((m) => m.content)).toEqual([text(350, 'c')]);
    expect(after.warnings).toEqual([`The 2 message(s) of the conversation's history this request sent are left out: they are no longer stored as they were (the conversation or a message of it was deleted).`]);
  });

  test('a message over the budget on its own is still sent', async () => {
    const setup = await runs.setup({ contextLength: 1000, maxOutputTokens: 500 });
    setup.provider.script({ text: 'ok', usage: { prompt: 1, completion: 1 } });
    const conversation = await chats.start({ configuration: setup.configuration });
    const turn = await chats.turn(conversation.id, text(5000));
    expect(turn.ended).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed' });
    expect(setup.provider.requests).toHaveLength(1);
  });

  test('a second message while a turn runs is CONFLICT naming the busy run, and writes nothing; of 20 parallel sends one is taken', async () => {
    const setup = await runs.setup();
    const held = gate();
    setup.provider.script({ text: 'slow', gate: held.promise });
    const conversation = await chats.start({ configuration: setup.configuration });
    const first = await chats.send(conversation.id, 'one');
    const second = await ts.gql(SEND, { input: { conversationId: conversation.id, content: 'two' } });
    expect(second.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', runId: first.run.id });
    expect(await chats.messages(conversation.id)).toHaveLength(1);
    held.open();
    await runs.waitForRun(first.run.id);

    const idle = await chats.start({ configuration: setup.configuration });
    const hold = gate();
    setup.provider.script({ text: 'only', gate: hold.promise });
    const answers = await Promise.all(Array.from({ length: 20 }, (_, i) => ts.gql<{ sendMessage: { run: { id: string } } }>(SEND, { input: { conversationId: idle.id, content: `m${i}` } })));
    const accepted = answers.filter((answer) => !answer.errors);
    expect(accepted).toHaveLength(1);
    for (const refused of answers.filter((answer) => answer.errors)) expect(refused.errors![0]!.extensions?.code).toBe('CONFLICT');
    hold.open();
    await runs.waitForRun(accepted[0]!.data!.sendMessage.run.id);
    expect((await chats.messages(idle.id)).map((m) => m.sequence)).toEqual([0, 1]);
  });

  test('a failed turn keeps its user message without a reply; the next turn sends both user messages; a cancelled turn stores no reply', async () => {
    const setup = await runs.setup({ maxRetries: 0 });
    setup.provider.script({ status: 500, errorBody: '{"error":{"message":"down"}}' }, { text: 'back', usage: { prompt: 1, completion: 1 } });
    const conversation = await chats.start({ configuration: setup.configuration });
    const failed = await chats.turn(conversation.id, 'u0');
    expect(failed.ended.status).toBe('FAILED');
    expect((await chats.messages(conversation.id)).map((m) => m.role)).toEqual(['user']);
    const next = await chats.turn(conversation.id, 'u1');
    expect(next.ended.status).toBe('COMPLETED');
    expect(wire(setup.provider.requests[1]!.body)).toEqual(['user:u0', 'user:u1']);

    const held = gate();
    setup.provider.script({ text: 'never', gate: held.promise });
    const cancelled = await chats.send(conversation.id, 'u2');
    await setup.provider.waitForRequest(3);
    await ts.ok('mutation($id: ID!) { cancelRun(id: $id) { id } }', { id: cancelled.run.id });
    expect((await runs.waitForRun(cancelled.run.id)).status).toBe('CANCELLED');
    held.open();
    expect((await chats.messages(conversation.id)).map((m) => `${m.sequence}:${m.role}`)).toEqual(['0:user', '1:user', '2:assistant', '3:user']);
    // The conversation is idle again after the cancel.
    setup.provider.script({ text: 'again', usage: { prompt: 1, completion: 1 } });
    expect((await chats.turn(conversation.id, 'u3')).ended.status).toBe('COMPLETED');
  });

  test('a session TYPO3 opened, and messages TYPO3 writes or deletes between turns: every turn sends exactly what is stored', async () => {
    const setup = await runs.setup({});
    const answers = Array.from({ length: 5 }, (_, i) => ({ text: `a${i}`, usage: { prompt: 1, completion: 1 } }));
    setup.provider.script(...answers);
    const uuid = `c0ffee00-0000-4000-8000-${String(Date.now()).slice(-12).padStart(12, '0')}`;
    const now = Math.floor(Date.now() / 1000);
    await ts.database.query('INSERT INTO tx_nrllm_ai_session (pid, uuid, be_user, configuration_identifier, title, message_count, last_activity, tstamp, crdate) VALUES (0, ?, 0, ?, ?, 2, ?, ?, ?)', [uuid, setup.configuration, 'from TYPO3', now, now, now]);
    const sessionUid = Number(((await ts.database.query('SELECT uid FROM tx_nrllm_ai_session WHERE uuid = ?', [uuid])) as { uid: number }[])[0]!.uid);
    const message = (sequence: number, role: string, content: string) =>
      ts.database.query('INSERT INTO tx_nrllm_ai_session_message (pid, session, sequence, role, content, model, prompt_tokens, completion_tokens, total_tokens, crdate) VALUES (0, ?, ?, ?, ?, ?, 0, 0, 0, ?)', [sessionUid, sequence, role, content, '', now]);
    await message(0, 'user', 't0');
    await message(1, 'assistant', 't1');
    const lastWire = () => wire(setup.provider.requests[setup.provider.requests.length - 1]!.body);

    // The first turn of this service on it: its row is made, the user message lands after TYPO3's.
    const first = await chats.turn(uuid, 'p0');
    expect(first.userMessage.sequence).toBe(2);
    expect(lastWire()).toEqual(['user:t0', 'assistant:t1', 'user:p0']);
    // TYPO3 appends a turn of its own.
    await message(4, 'user', 't4');
    await message(5, 'assistant', 't5');
    const second = await chats.turn(uuid, 'p1');
    expect(second.userMessage.sequence).toBe(6);
    expect(lastWire()).toEqual(['user:t0', 'assistant:t1', 'user:p0', 'assistant:a0', 'user:t4', 'assistant:t5', 'user:p1']);
    // TYPO3 deletes that turn and writes another in its place: as many messages, other rows.
    await ts.database.query('DELETE FROM tx_nrllm_ai_session_message WHERE session = ? AND sequence IN (4, 5)', [sessionUid]);
    await message(4, 'user', 'T4');
    await message(5, 'assistant', 'T5');
    await chats.turn(uuid, 'p2');
    expect(lastWire()).toEqual(['user:t0', 'assistant:t1', 'user:p0', 'assistant:a0', 'user:T4', 'assistant:T5', 'user:p1', 'assistant:a1', 'user:p2']);
    // A message deleted from the middle is no longer sent.
    await ts.database.query('DELETE FROM tx_nrllm_ai_session_message WHERE session = ? AND sequence = 1', [sessionUid]);
    await chats.turn(uuid, 'p3');
    expect(lastWire()).toEqual(['user:t0', 'user:p0', 'assistant:a0', 'user:T4', 'assistant:T5', 'user:p1', 'assistant:a1', 'user:p2', 'assistant:a2', 'user:p3']);
    const stored = await chats.get(uuid);
    expect(stored!.messageCount).toBe(12);
    expect((await chats.messages(uuid)).map((m) => `${m.sequence}:${m.content}`)).toEqual(['0:t0', '2:p0', '3:a0', '4:T4', '5:T5', '6:p1', '7:a1', '8:p2', '9:a2', '10:p3', '11:a3']);
  });

  test('TYPO3 moves a session to another configuration, or makes it again under the same uuid, between turns: each turn runs on what is stored then', async () => {
    const a = await runs.setup({ systemPrompt: 'A.' });
    const b = await runs.setup({ systemPrompt: 'B.' });
    a.provider.script({ text: 'from a', usage: { prompt: 1, completion: 1 } });
    b.provider.script(...Array.from({ length: 3 }, (_, i) => ({ text: `from b${i}`, usage: { prompt: 1, completion: 1 } })));
    const conversation = await chats.start({ configuration: a.configuration });
    const lastWire = (setup: typeof a) => wire(setup.provider.requests[setup.provider.requests.length - 1]!.body);
    expect((await chats.turn(conversation.id, 'one')).ended.status).toBe('COMPLETED');
    expect(lastWire(a)).toEqual(['system:A.', 'user:one']);

    // This instance has seen the session on configuration a; TYPO3 moves it to b.
    await ts.database.query('UPDATE tx_nrllm_ai_session SET configuration_identifier = ? WHERE uuid = ?', [b.configuration, conversation.id]);
    expect((await chats.turn(conversation.id, 'two')).ended.status).toBe('COMPLETED');
    expect(lastWire(b)).toEqual(['system:B.', 'user:one', 'assistant:from a', 'user:two']);
    expect(a.provider.requests).toHaveLength(1);

    // b deactivated: refused as any unusable configuration, nothing written.
    await ts.ok(`mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { isActive: false }) { uid } }`, { uid: b.configurationUid });
    const refused = await ts.gql(SEND, { input: { conversationId: conversation.id, content: 'three' } });
    expect(refused.errors?.[0]?.message).toMatch(new RegExp(`^The configuration "${b.configuration}" this session was opened with is no longer usable: `));
    expect(await chats.messages(conversation.id)).toHaveLength(4);
    await ts.ok(`mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { isActive: true }) { uid } }`, { uid: b.configurationUid });

    // The session deleted and made again under the same uuid (a new uid), with a history of its own.
    const [old] = (await ts.database.query('SELECT uid FROM tx_nrllm_ai_session WHERE uuid = ?', [conversation.id])) as { uid: number }[];
    await ts.database.query('DELETE FROM tx_nrllm_ai_session_message WHERE session = ?', [old!.uid]);
    await ts.database.query('DELETE FROM tx_nrllm_ai_session WHERE uid = ?', [old!.uid]);
    const now = Math.floor(Date.now() / 1000);
    await ts.database.query('INSERT INTO tx_nrllm_ai_session (pid, uuid, be_user, configuration_identifier, title, message_count, last_activity, tstamp, crdate) VALUES (0, ?, 0, ?, ?, 2, ?, ?, ?)', [conversation.id, b.configuration, 'again', now, now, now]);
    const [made] = (await ts.database.query('SELECT uid FROM tx_nrllm_ai_session WHERE uuid = ?', [conversation.id])) as { uid: number }[];
    expect(Number(made!.uid)).not.toBe(Number(old!.uid));
    for (const [sequence, role, content] of [[0, 'user', 'new0'], [1, 'assistant', 'new1']] as const) {
      await ts.database.query('INSERT INTO tx_nrllm_ai_session_message (pid, session, sequence, role, content, model, prompt_tokens, completion_tokens, total_tokens, crdate) VALUES (0, ?, ?, ?, ?, ?, 0, 0, 0, ?)', [made!.uid, sequence, role, content, '', now]);
    }
    const fourth = await chats.turn(conversation.id, 'four');
    expect(fourth.userMessage.sequence).toBe(2);
    expect(lastWire(b)).toEqual(['system:B.', 'user:new0', 'assistant:new1', 'user:four']);
    expect((await chats.messages(conversation.id)).map((m) => m.content)).toEqual(['new0', 'new1', 'four', 'from b1']);
  });

  test('bad input: unknown conversation, empty or oversized text, a deactivated configuration; each writes nothing', async () => {
    const setup = await runs.setup();
    const conversation = await chats.start({ configuration: setup.configuration });
    const unknown = await ts.gql(SEND, { input: { conversationId: '00000000-0000-4000-8000-000000000000', content: 'x' } });
    expect(unknown.errors?.[0]).toMatchObject({ message: 'Unknown conversation "00000000-0000-4000-8000-000000000000".', extensions: { code: 'NOT_FOUND' } });
    for (const content of ['', '   ', text(1_000_001)]) {
      const refused = await ts.gql(SEND, { input: { conversationId: conversation.id, content } });
      expect(refused.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    }
    await ts.ok(`mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { isActive: false }) { uid } }`, { uid: setup.configurationUid });
    const disabled = await ts.gql(SEND, { input: { conversationId: conversation.id, content: 'hi' } });
    expect(disabled.errors?.[0]?.message).toMatch(new RegExp(`^The configuration "${setup.configuration}" this session was opened with is no longer usable: `));
    expect(disabled.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(await chats.messages(conversation.id)).toEqual([]);
    expect(setup.provider.requests).toHaveLength(0);
  });

  test('after a turn (the run is prepared while the session is still read): the refusals keep their order and write nothing', async () => {
    const setup = await runs.setup();
    const conversation = await chats.start({ configuration: setup.configuration });
    setup.provider.script({ text: 'reply 1' });
    await chats.turn(conversation.id, 'one');
    const stored = async () => (await chats.messages(conversation.id)).map((m) => m.content);
    const calls = setup.provider.requests.length;
    // Another token, with options the run refuses at once: the conversation is not found (nothing said of the options).
    const other = await tokenAs('EDITOR');
    for (const options of [{ temperature: 5 }, { tools: ['no_such_tool'] }]) {
      const foreign = await ts.gql(SEND, { input: { conversationId: conversation.id, content: 'x', ...options } }, other);
      expect(foreign.errors?.[0]).toMatchObject({ message: `Unknown conversation "${conversation.id}".`, extensions: { code: 'NOT_FOUND' } });
    }
    // The owner naming it: the run's own refusal.
    const tool = await ts.gql(SEND, { input: { conversationId: conversation.id, content: 'x', tools: ['no_such_tool'] } });
    expect(tool.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(tool.errors?.[0]?.message).toMatch(/no_such_tool/);
    // Busy, and the configuration deactivated meanwhile: busy comes first (nr_llm's order), then the configuration.
    const held = gate();
    setup.provider.script({ text: 'slow', gate: held.promise });
    const running = await chats.send(conversation.id, 'two');
    await ts.ok(`mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { isActive: false }) { uid } }`, { uid: setup.configurationUid });
    const busy = await ts.gql(SEND, { input: { conversationId: conversation.id, content: 'three' } });
    expect(busy.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', runId: running.run.id });
    held.open();
    await runs.waitForRun(running.run.id);
    const disabled = await ts.gql(SEND, { input: { conversationId: conversation.id, content: 'four' } });
    expect(disabled.errors?.[0]?.message).toMatch(new RegExp(`^The configuration "${setup.configuration}" this session was opened with is no longer usable: `));
    expect(await stored()).toEqual(['one', 'reply 1', 'two', 'slow']);
    expect(setup.provider.requests).toHaveLength(calls + 1);
  });

  test('a conversation belongs to its token or backend user: others get NOT_FOUND, ADMIN sees all; lists page without repeats', async () => {
    const setup = await runs.setup();
    const tokenA = await tokenAs('EDITOR');
    const tokenB = await tokenAs('EDITOR');
    const user7a = await tokenAs('EDITOR', 7);
    const user7b = await tokenAs('EDITOR', 7);
    const ofA = await chats.start({ configuration: setup.configuration, title: 'of A' }, tokenA);
    const of7 = await chats.start({ configuration: setup.configuration, title: 'of 7' }, user7a);
    expect(of7.beUser).toBe(7);

    expect(await chats.get(ofA.id, tokenB)).toBeNull();
    const foreignSend = await ts.gql(SEND, { input: { conversationId: ofA.id, content: 'x' } }, tokenB);
    expect(foreignSend.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    const foreignDelete = await ts.gql('mutation($id: ID!) { deleteConversation(id: $id) }', { id: ofA.id }, tokenB);
    expect(foreignDelete.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    expect((await chats.get(of7.id, user7b))?.title).toBe('of 7');
    expect(await chats.get(of7.id, tokenA)).toBeNull();
    expect((await chats.get(ofA.id))?.title).toBe('of A');

    const LIST = 'query($first: Int, $after: String) { conversationsConnection(first: $first, after: $after) { nodes { id } pageInfo { hasNextPage endCursor } } }';
    const listOf = async (token?: string) => (await ts.ok<{ conversationsConnection: { nodes: { id: string }[] } }>(LIST, { first: 500 }, token)).conversationsConnection.nodes.map((n) => n.id);
    expect(await listOf(tokenA)).toEqual([ofA.id]);
    expect(await listOf(user7b)).toEqual([of7.id]);
    const all = await listOf();
    expect(all).toEqual(expect.arrayContaining([ofA.id, of7.id]));

    const seen: string[] = [];
    let after: string | null = null;
    for (;;) {
      const page: { conversationsConnection: { nodes: { id: string }[]; pageInfo: { hasNextPage: boolean; endCursor: string | null } } } = await ts.ok(LIST, { first: 2, after });
      seen.push(...page.conversationsConnection.nodes.map((n) => n.id));
      if (!page.conversationsConnection.pageInfo.hasNextPage) break;
      after = page.conversationsConnection.pageInfo.endCursor;
    }
    expect(seen).toEqual(all);
  });

  test('deleteConversation removes the session and its messages', async () => {
    const setup = await runs.setup();
    setup.provider.script({ text: 'ok', usage: { prompt: 1, completion: 1 } });
    const conversation = await chats.start({ configuration: setup.configuration });
    await chats.turn(conversation.id, 'hi');
    expect(await ts.ok('mutation($id: ID!) { deleteConversation(id: $id) }', { id: conversation.id })).toEqual({ deleteConversation: true });
    expect((await ts.ok<{ conversation: unknown }>(GET, { id: conversation.id })).conversation).toBeNull();
    const rows = (await ts.database.query('SELECT COUNT(*) AS n FROM tx_nrllm_ai_session_message m WHERE NOT EXISTS (SELECT 1 FROM tx_nrllm_ai_session s WHERE s.uid = m.session)')) as { n: number }[];
    expect(Number(rows[0]!.n)).toBe(0);
  });
});
