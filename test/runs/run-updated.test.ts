/**
 * `runUpdated`: every run whose row changes, as it changes — started,
 * waiting for approval, going on after the decision, ended with its figures —
 * over graphql-ws, for lists that update live instead of asking again.
 */
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { RawGraphQLSocket, type WsMessage } from '../support/raw-graphql-ws';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { RunKit } from './run-kit';

const UPDATED = 'subscription { runUpdated { id status terminationReason totalTokens } }';

interface Updated {
  id: string;
  status: string;
  terminationReason: string | null;
  totalTokens: number;
}

const updatesOf = (socket: RawGraphQLSocket, runId: string): Updated[] =>
  socket
    .of('feed')
    .filter((m) => m.type === 'next')
    .map((m) => (m.payload as { data: { runUpdated: Updated } }).data.runUpdated)
    .filter((run) => run.id === runId);

describe.each(testDialects)('runUpdated (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);
  const sockets: RawGraphQLSocket[] = [];

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await t?.stop();
    await kit.closeProviders();
  });

  const watch = async () => {
    const socket = await RawGraphQLSocket.connect(t.server.wsUrl, await t.tokenFor('VIEWER'));
    sockets.push(socket);
    socket.subscribe('feed', UPDATED);
    // Subscribed once a query sent after it on the same socket is answered (messages are handled in order).
    socket.subscribe('ping', '{ __typename }');
    await socket.waitFor((m) => m.id === 'ping' && m.type === 'complete');
    return socket;
  };

  it('tells every watcher when a run starts and when it ends, with its final figures', async () => {
    const first = await watch();
    const second = await watch();
    const run = await kit.startHeldToolRun('2 + 2', 'Four.');
    const isUpdate = (status: string) => (m: WsMessage) =>
      m.id === 'feed' && m.type === 'next' && (m.payload as { data: { runUpdated: Updated } }).data.runUpdated.id === run.id && (m.payload as { data: { runUpdated: Updated } }).data.runUpdated.status === status;
    await first.waitFor(isUpdate("RUNNING"));
    run.release();
    await Promise.all([first.waitFor(isUpdate('COMPLETED')), second.waitFor(isUpdate('COMPLETED'))]);
    for (const socket of [first, second]) {
      const updates = updatesOf(socket, run.id);
      expect(updates.map((u) => u.status)).toEqual(['RUNNING', 'COMPLETED']);
      expect(updates[1]).toMatchObject({ terminationReason: 'completed', totalTokens: 20 });
    }
  });

  it('tells when a run waits for approval and when it goes on after the decision', async () => {
    const socket = await watch();
    const setup = await kit.setup();
    setup.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression: '6 * 7' } }], usage: { prompt: 5, completion: 5 } },
      { text: 'Forty-two.', usage: { prompt: 5, completion: 5 } },
    );
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: ['calculator'], approvalRequired: ['calculator'] });
    const has = (status: string) => (m: WsMessage) => m.id === 'feed' && m.type === 'next' && JSON.stringify(m.payload).includes(`"status":"${status}"`) && JSON.stringify(m.payload).includes(started.id);
    await socket.waitFor(has('WAITING_FOR_APPROVAL'));
    const waiting = await t.ok<{ run: { pendingToolCalls: { id: string }[] } }>('query($id: ID!) { run(id: $id) { pendingToolCalls { id } } }', { id: started.id });
    const call = waiting.run;
    await t.ok('mutation($runId: ID!, $decisions: [ToolDecisionInput!]!) { resolveToolApproval(runId: $runId, decisions: $decisions) { id } }', {
      runId: started.id,
      decisions: [{ toolCallId: call.pendingToolCalls[0]!.id, approve: true }],
    });
    await socket.waitFor(has('COMPLETED'));
    expect(updatesOf(socket, started.id).map((u) => u.status)).toEqual(['RUNNING', 'WAITING_FOR_APPROVAL', 'RUNNING', 'COMPLETED']);
  });
});

/**
 * Two real server processes on one MySQL database and one Redis: a watcher on
 * one instance hears of runs started and finished on the other.
 */
if (process.env.TEST_REDIS_URL && testDialects.includes('mysql')) {
  describe('runUpdated across two instances (mysql + redis)', () => {
    let database: TestDatabase;
    let a: ServerProcess;
    let b: ServerProcess;
    let watcher: RawGraphQLSocket | null = null;

    beforeAll(async () => {
      database = await createTestDatabase('mysql');
      const env = { REDIS_URL: process.env.TEST_REDIS_URL! };
      a = await startServerProcess(database, env);
      b = await startServerProcess(database, env);
    }, 120_000);
    afterAll(async () => {
      watcher?.close();
      await a?.stop();
      await b?.stop();
      await database?.drop();
    });

    it("a watcher on instance B sees a run that instance A starts and finishes", async () => {
      const ok = async (query: string, variables: Record<string, unknown>) => {
        const result = await a.gql(query, variables);
        expect(result.errors).toBeUndefined();
        return result.data!;
      };
      await ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', { input: { identifier: 'demo_feed', name: 'Demo', adapterType: 'demo' } });
      await ok('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', { input: { identifier: 'demo_feed', name: 'Demo', provider: 'demo_feed', modelId: 'demo' } });
      await ok('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: 'demo_feed', name: 'Demo', model: 'demo_feed' } });

      watcher = await RawGraphQLSocket.connect(b.url.replace(/^http/, 'ws'), ADMIN_TOKEN);
      watcher.subscribe('feed', UPDATED);
      watcher.subscribe('ping', '{ __typename }');
      await watcher.waitFor((m) => m.id === 'ping' && m.type === 'complete');

      const started = (await ok('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: 'demo_feed', prompt: 'Hello there.' } })) as { startRun: { id: string } };
      const id = started.startRun.id;
      await watcher.waitFor((m) => m.id === 'feed' && m.type === 'next' && JSON.stringify(m.payload).includes(id) && JSON.stringify(m.payload).includes('"status":"COMPLETED"'));
      expect(updatesOf(watcher, id).map((u) => u.status)).toEqual(['RUNNING', 'COMPLETED']);
    }, 60_000);
  });
}
