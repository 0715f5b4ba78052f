/**
 * Subscriptions are bounded per graphql-ws connection and per token
 * (MAX_SUBSCRIPTIONS_PER_CONNECTION, MAX_SUBSCRIPTIONS_PER_TOKEN): one more is
 * refused with a graphql-ws error (BAD_USER_INPUT naming the variable), and a
 * slot is free again once its subscription ends, either way.
 */
import { testDialects } from '../support/databases';
import { RawGraphQLSocket, errorCode, type WsMessage } from '../support/raw-graphql-ws';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';

const TRACE = 'subscription($id: ID!) { runTrace(runId: $id) { sequence kind } }';

/** An admitted runTrace subscription of a held run replays its stored steps at once; a refused one gets an error. */
const answered = (id: string) => (message: WsMessage) => message.id === id && (message.type === 'next' || message.type === 'error');

describe.each(testDialects)('subscription limits (%s)', (dialect) => {
  describe('caps', () => {
    let t: TestServer;
    const kit = new RunKit(() => t);
    let run: { id: string; release: () => void };
    const sockets: RawGraphQLSocket[] = [];
    const connect = async (token: string) => {
      const socket = await RawGraphQLSocket.connect(t.server.wsUrl, token);
      sockets.push(socket);
      return socket;
    };

    beforeAll(async () => {
      t = await startTestServer(dialect, { env: { MAX_SUBSCRIPTIONS_PER_CONNECTION: '3', MAX_SUBSCRIPTIONS_PER_TOKEN: '5' } });
      run = await kit.startHeldToolRun();
    });
    afterAll(async () => {
      for (const socket of sockets) socket.close();
      run?.release();
      await t?.stop();
      await kit.closeProviders();
    });

    it('a connection holds at most MAX_SUBSCRIPTIONS_PER_CONNECTION; queries still run; a completed one frees its slot', async () => {
      const socket = await connect(await t.tokenFor('VIEWER'));
      for (const id of ['a', 'b', 'c', 'd']) {
        socket.subscribe(id, TRACE, { id: run.id });
        await socket.waitFor(answered(id));
      }
      for (const id of ['a', 'b', 'c']) expect(socket.of(id)[0]).toMatchObject({ type: 'next', payload: { data: { runTrace: { sequence: 1 } } } });
      const refused = socket.of('d');
      expect(refused).toHaveLength(1);
      expect(refused[0]!.type).toBe('error');
      expect(errorCode(refused[0])).toBe('BAD_USER_INPUT');
      expect(JSON.stringify(refused[0]!.payload)).toContain('MAX_SUBSCRIPTIONS_PER_CONNECTION');

      socket.subscribe('q', '{ viewer { role } }');
      await socket.waitFor((m) => m.id === 'q' && m.type === 'complete');
      expect(socket.of('q')[0]).toMatchObject({ type: 'next', payload: { data: { viewer: { role: 'VIEWER' } } } });

      socket.send({ type: 'complete', id: 'a' });
      socket.subscribe('e', TRACE, { id: run.id });
      await socket.waitFor(answered('e'));
      expect(socket.of('e')[0]!.type).toBe('next');
    });

    it('a token holds at most MAX_SUBSCRIPTIONS_PER_TOKEN over its connections; a closed connection frees its slots; other tokens are not affected', async () => {
      const token = await t.tokenFor('EDITOR');
      const first = await connect(token);
      const second = await connect(token);
      for (const id of ['1', '2', '3']) first.subscribe(id, TRACE, { id: run.id });
      await first.waitFor((m) => m.type === 'next' && ['1', '2', '3'].includes(m.id ?? ''), 3);
      for (const id of ['4', '5', '6']) {
        second.subscribe(id, TRACE, { id: run.id });
        await second.waitFor(answered(id));
      }
      expect(second.of('4')[0]!.type).toBe('next');
      expect(second.of('5')[0]!.type).toBe('next');
      expect(second.of('6')[0]!.type).toBe('error');
      expect(errorCode(second.of('6')[0])).toBe('BAD_USER_INPUT');
      expect(JSON.stringify(second.of('6')[0]!.payload)).toContain('MAX_SUBSCRIPTIONS_PER_TOKEN');

      // Another token has its own budget.
      const admin = await connect(await t.tokenFor('ADMIN'));
      admin.subscribe('x', TRACE, { id: run.id });
      await admin.waitFor(answered('x'));
      expect(admin.of('x')[0]!.type).toBe('next');

      first.close();
      await first.closed;
      // The server has seen the close once an operation sent after it on another socket is answered.
      await new Promise((resolve) => setTimeout(resolve, 100));
      second.subscribe('7', TRACE, { id: run.id });
      await second.waitFor(answered('7'));
      expect(second.of('7')[0]!.type).toBe('next');
    });
  });
});
