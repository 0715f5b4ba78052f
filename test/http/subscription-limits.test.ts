/**
 * Subscriptions are bounded per graphql-ws connection and per token
 * (MAX_SUBSCRIPTIONS_PER_CONNECTION, MAX_SUBSCRIPTIONS_PER_TOKEN): one more is
 * refused with a graphql-ws error (BAD_USER_INPUT naming the variable), and a
 * slot is free again once its subscription ends, either way. A burst of
 * 5,000 subscribe messages on one socket is worked off in turns: another
 * client's message is handled while most of the burst still waits.
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

  describe('a burst of 5,000 subscribe messages', () => {
    let t: TestServer;
    const kit = new RunKit(() => t);

    beforeAll(async () => {
      t = await startTestServer(dialect, { env: { MAX_SUBSCRIPTIONS_PER_CONNECTION: '5000', MAX_SUBSCRIPTIONS_PER_TOKEN: '300' } });
    });
    afterAll(async () => {
      await t?.stop();
      await kit.closeProviders();
    });

    it('does not keep another client waiting until it is worked off, and every message is answered once', async () => {
      const run = await kit.startHeldToolRun();
      const token = await t.tokenFor('VIEWER');
      const burst = await RawGraphQLSocket.connect(t.server.wsUrl, token);
      const other = await RawGraphQLSocket.connect(t.server.wsUrl, token);
      const count = 5000;
      for (let i = 0; i < count; i += 1) burst.subscribe(`b${i}`, TRACE, { id: run.id });
      await burst.flushed();
      // The server is working on the burst once its first answer arrives; now the other client asks.
      await burst.waitFor((m) => m.type === 'next' || m.type === 'error');
      other.subscribe('mine', TRACE, { id: run.id });
      await other.waitFor(answered('mine'));

      // Handled in turns, the burst had taken far fewer than the token's 300 slots when the other
      // client's subscription came in; handled all at once, it would have taken them all first.
      expect(other.of('mine')[0]).toMatchObject({ type: 'next', payload: { data: { runTrace: { sequence: 1 } } } });

      await burst.waitFor((m) => m.type === 'error' || (m.type === 'next' && (m.payload as { data: { runTrace: { sequence: number } } }).data.runTrace.sequence === 1), count);
      const firstAnswers = new Map<string, string>();
      for (const message of burst.messages) if (message.id && !firstAnswers.has(message.id)) firstAnswers.set(message.id, message.type);
      expect(firstAnswers.size).toBe(count);
      const admitted = [...firstAnswers.values()].filter((type) => type === 'next').length;
      expect(admitted).toBe(299);
      const refusals = burst.messages.filter((m) => m.type === 'error');
      expect(refusals).toHaveLength(count - admitted);
      expect(refusals.every((m) => errorCode(m) === 'BAD_USER_INPUT')).toBe(true);
      burst.close();
      other.close();
      run.release();
      // Working off 5,000 subscribes (300 of them replaying a trace) takes a while on a loaded machine; nothing here waits on a clock.
    }, 240_000);
  });
});
