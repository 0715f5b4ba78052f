/**
 * conversationUpdated: the conversation now, then each change (a turn taken,
 * its reply stored), over graphql-ws; it ends when the conversation is deleted.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';
import { gate } from '../runs/scripted-provider';
import { ConversationKit } from './conversation-kit';

const WATCH = 'subscription($id: ID!) { conversationUpdated(id: $id) { id messageCount activeRunId messages(afterSequence: -1, first: 500) { sequence role content } } }';

interface Update {
  conversationUpdated: { id: string; messageCount: number; activeRunId: string | null; messages: { sequence: number; role: string; content: string }[] };
}

describe.each(testDialects)('conversationUpdated (%s)', (dialect) => {
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

  async function until(updates: Update[], predicate: (update: Update['conversationUpdated']) => boolean): Promise<void> {
    const deadline = Date.now() + 10_000;
    while (!updates.some((update) => predicate(update.conversationUpdated))) {
      if (Date.now() > deadline) throw new Error(`no such update in ${JSON.stringify(updates)}`);
      await new Promise((resolve) => setTimeout(resolve, 10));
    }
  }

  test('the current state, a turn taken, its reply stored; the watch ends when the conversation is deleted', async () => {
    const setup = await runs.setup();
    const held = gate();
    setup.provider.script({ text: 'Hello!', usage: { prompt: 2, completion: 1 }, gate: held.promise });
    const conversation = await chats.start({ configuration: setup.configuration });

    const updates: Update[] = [];
    const errors: unknown[] = [];
    const client = ts.wsClient();
    const done = new Promise<void>((resolve) => {
      client.subscribe<Update>({ query: WATCH, variables: { id: conversation.id } }, { next: (value) => (value.data ? updates.push(value.data as Update) : errors.push(value.errors)), error: (error) => (errors.push(error), resolve()), complete: resolve });
    });
    await until(updates, (u) => u.messageCount === 0 && u.activeRunId === null);

    const sent = await chats.send(conversation.id, 'hi');
    await until(updates, (u) => u.activeRunId === sent.run.id && u.messages.length === 1);
    held.open();
    await until(updates, (u) => u.activeRunId === null && u.messageCount === 2);
    expect(updates.at(-1)!.conversationUpdated.messages.map((m) => `${m.role}:${m.content}`)).toEqual(['user:hi', 'assistant:Hello!']);

    await ts.ok('mutation($id: ID!) { deleteConversation(id: $id) }', { id: conversation.id });
    await done;
    expect(errors).toEqual([]);
  });

  test('another token cannot watch a conversation that is not its own: NOT_FOUND', async () => {
    const setup = await runs.setup();
    const conversation = await chats.start({ configuration: setup.configuration });
    const other = await ts.ok<{ createApiToken: { token: string } }>('mutation { createApiToken(name: "other watcher", role: EDITOR) { token } }');
    const errors: { extensions?: { code?: string } }[] = [];
    await new Promise<void>((resolve) => {
      ts.wsClient(other.createApiToken.token).subscribe({ query: WATCH, variables: { id: conversation.id } }, { next: (value) => errors.push(...((value.errors ?? []) as never[])), error: (error) => (errors.push(...(Array.isArray(error) ? error : [error])), resolve()), complete: resolve });
    });
    expect(errors[0]?.extensions?.code).toBe('NOT_FOUND');
  });
});
