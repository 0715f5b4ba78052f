/**
 * The client library's watchConversation against the real server: every
 * stored message after `afterSequence` once and in order, the state as it
 * changes, the end when the conversation is deleted, and a refusal for a
 * conversation that is not the token's.
 */
import WebSocket from 'ws';
import { watchConversation, type ConversationEvent } from '../../src/client';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';
import { ConversationKit } from './conversation-kit';

describe.each(testDialects)('watchConversation (%s)', (dialect) => {
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

  test('yields the messages after afterSequence once each, in order, as turns are stored; ends when the conversation is deleted', async () => {
    const setup = await runs.setup();
    setup.provider.script({ text: 'A0', usage: { prompt: 1, completion: 1 } }, { text: 'A1', usage: { prompt: 1, completion: 1 } }, { text: 'A2', usage: { prompt: 1, completion: 1 } });
    const conversation = await chats.start({ configuration: setup.configuration });
    await chats.turn(conversation.id, 'U0');

    const events: ConversationEvent[] = [];
    const watching = (async () => {
      for await (const event of watchConversation({ url: ts.url, token: ADMIN_TOKEN, conversationId: conversation.id, afterSequence: 0, webSocketImpl: WebSocket })) events.push(event);
    })();
    const messages = () => events.flatMap((event) => (event.kind === 'message' ? [`${event.message.sequence}:${event.message.content}`] : []));
    const until = async (count: number) => {
      const deadline = Date.now() + 10_000;
      while (messages().length < count) {
        if (Date.now() > deadline) throw new Error(`only ${JSON.stringify(messages())}`);
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    await until(1);
    await chats.turn(conversation.id, 'U1');
    await until(3);
    await chats.turn(conversation.id, 'U2');
    await until(5);
    await ts.ok('mutation($id: ID!) { deleteConversation(id: $id) }', { id: conversation.id });
    await watching;
    expect(messages()).toEqual(['1:A0', '2:U1', '3:A1', '4:U2', '5:A2']);
    const states = events.flatMap((event) => (event.kind === 'state' ? [event.conversation.activeRunId] : []));
    expect(states.some((active) => active !== null)).toBe(true);
    expect(states.at(-1)).toBeNull();
  });

  test('a conversation that is not the token\'s is refused with WatchConversationError NOT_FOUND', async () => {
    const setup = await runs.setup();
    const conversation = await chats.start({ configuration: setup.configuration });
    const other = await ts.ok<{ createApiToken: { token: string } }>('mutation { createApiToken(name: "other client", role: EDITOR) { token } }');
    const watching = (async () => {
      for await (const _event of watchConversation({ url: ts.url, token: other.createApiToken.token, conversationId: conversation.id, webSocketImpl: WebSocket })) {
        // nothing is yielded
      }
    })();
    await expect(watching).rejects.toMatchObject({ name: 'WatchConversationError', code: 'NOT_FOUND' });
  });
});
