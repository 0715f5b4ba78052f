/**
 * A burst of subscriptions from one client does not hold the others: the
 * server (its own process, so that its event loop is not the test's) starts
 * graphql-ws messages a few per event-loop turn, one connection after
 * another, so a bystander's operation sent in the middle of a burst of 2,000
 * `runTrace` subscriptions is answered while most of the burst is still
 * waiting — before the fix it was answered after every subscription of the
 * burst had been started and had sent its first step. Every subscription of
 * the burst still gets its whole trace, once.
 */
import { testDialects } from '../support/databases';
import { Instances, waitForRunEnd } from '../support/instances';
import { RawGraphQLSocket, type WsMessage } from '../support/raw-graphql-ws';
import { ADMIN_TOKEN } from '../support/server';
import type { ServerProcess } from '../support/server-process';

jest.setTimeout(180_000);

const CONNECTIONS = 20;
const PER_CONNECTION = 100;
const TRACE = 'subscription($id: ID!) { runTrace(runId: $id) { sequence kind } }';

describe.each(testDialects)('a burst of subscriptions (%s)', (dialect) => {
  const instances = new Instances(dialect);
  let server: ServerProcess;
  let runId: string;
  let steps: number;
  const sockets: RawGraphQLSocket[] = [];

  beforeAll(async () => {
    server = await instances.start({
      SEED_EXAMPLES: 'true',
      UI: 'false',
      MAX_SUBSCRIPTIONS_PER_CONNECTION: String(PER_CONNECTION),
      MAX_SUBSCRIPTIONS_PER_TOKEN: String(CONNECTIONS * PER_CONNECTION + 10),
    });
    const started = await server.gql<{ startRun: { id: string } }>(
      'mutation($input: StartRunInput!) { startRun(input: $input) { id } }',
      { input: { configuration: 'demo-assistant', prompt: 'What is 6 * 7?' } },
    );
    runId = started.data!.startRun.id;
    steps = (await waitForRunEnd<{ status: string; steps: unknown[] }>(server, runId, 'status steps { sequence }')).steps.length;
  });
  afterAll(async () => {
    for (const socket of sockets) socket.close();
    await instances.stop();
  });

  it("answers a bystander's operation in the middle of the burst, and still delivers every trace whole", async () => {
    expect(steps).toBeGreaterThanOrEqual(3);
    const wsUrl = server.url.replace(/^http/, 'ws');
    const burst = await Promise.all(Array.from({ length: CONNECTIONS }, () => RawGraphQLSocket.connect(wsUrl, ADMIN_TOKEN)));
    const bystander = await RawGraphQLSocket.connect(wsUrl, ADMIN_TOKEN);
    sockets.push(...burst, bystander);

    const firstNext = Promise.race(burst.map((socket) => socket.waitFor((m) => m.type === 'next')));
    for (const [index, socket] of burst.entries()) {
      for (let i = 0; i < PER_CONNECTION; i += 1) socket.subscribe(`s${index}_${i}`, TRACE, { id: runId });
    }
    await firstNext;
    bystander.subscribe('q', '{ __typename }');
    await bystander.waitFor((m) => m.id === 'q' && m.type === 'next');
    const startedBeforeBystander = burst.reduce((sum, socket) => sum + new Set(socket.messages.filter((m) => m.type === 'next').map((m) => m.id)).size, 0);

    const isEnd = (m: WsMessage) => m.type === 'complete' || m.type === 'error';
    await Promise.all(burst.map((socket) => socket.waitFor(isEnd, PER_CONNECTION)));

    expect(bystander.of('q')[0]).toMatchObject({ type: 'next', payload: { data: { __typename: 'Query' } } });
    // Most of the burst had not even started when the bystander was answered.
    expect(startedBeforeBystander).toBeLessThan((CONNECTIONS * PER_CONNECTION) / 2);
    for (const [index, socket] of burst.entries()) {
      for (let i = 0; i < PER_CONNECTION; i += 1) {
        const messages = socket.of(`s${index}_${i}`);
        const sequences = messages.filter((m) => m.type === 'next').map((m) => (m.payload as { data: { runTrace: { sequence: number } } }).data.runTrace.sequence);
        expect(sequences).toEqual(Array.from({ length: steps }, (_, k) => k + 1));
        expect(messages[messages.length - 1]!.type).toBe('complete');
      }
    }
  });
});
