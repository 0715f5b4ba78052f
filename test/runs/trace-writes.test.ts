/**
 * How a run's live steps reach a watcher's socket, as the watcher's own TCP
 * reads show it. The server runs in its own process (in-process, the test's
 * client could read only once the server's whole chain of work had run, and
 * every chain would arrive in one read whatever the server wrote).
 */
import type { Socket } from 'node:net';
import { createTestDatabase, type TestDatabase } from '../support/databases';
import { RawGraphQLSocket } from '../support/raw-graphql-ws';
import { ADMIN_TOKEN } from '../support/server';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { uniqueIdentifier } from './run-kit';
import { ScriptedProvider, gate, withTimeout } from './scripted-provider';

const TRACE = 'subscription($runId: ID!) { runTrace(runId: $runId) { sequence kind round toolResult } }';

describe('live steps on a watcher\'s socket (a server process, sqlite)', () => {
  let database: TestDatabase;
  let server: ServerProcess;
  let provider: ScriptedProvider;
  let configuration: string;

  beforeAll(async () => {
    database = await createTestDatabase('sqlite');
    provider = await ScriptedProvider.start();
    server = await startServerProcess(database);
    const providerId = uniqueIdentifier('prov');
    const modelId = uniqueIdentifier('model');
    configuration = uniqueIdentifier('conf');
    await server.ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: providerId, name: 'Scripted', adapterType: 'custom', endpointUrl: provider.url, apiKey: 'test-key', maxRetries: 0 },
    });
    await server.ok('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', { input: { identifier: modelId, name: 'M', provider: providerId, modelId: 'scripted' } });
    await server.ok('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: configuration, name: 'C', model: modelId } });
  }, 90_000);

  afterAll(async () => {
    await server?.stop();
    await provider?.close();
    await database?.drop();
  }, 60_000);

  test('a single watcher gets each round\'s live steps (answer, tool result, context, request) in one TCP read, all of them, in order', async () => {
    const rounds = 5;
    const first = gate();
    // Answers 40 ms apart: what one read carries is one round's chain of work, not a backlog.
    provider.script(
      ...Array.from({ length: rounds }, (_unused, round) => ({
        toolCalls: [{ name: 'calculator', arguments: { expression: `${round} + 1` } }],
        usage: { prompt: 5, completion: 5 },
        delayMs: 40,
        ...(round === 0 ? { gate: first.promise } : {}),
      })),
      { text: 'Done.', usage: { prompt: 5, completion: 5 }, delayMs: 40 },
    );
    const started = await server.ok<{ startRun: { id: string } }>('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', {
      input: { configuration, prompt: 'count', tools: ['calculator'] },
    });
    const id = started.startRun.id;
    await provider.waitForRequest(1);
    const watcher = await RawGraphQLSocket.connect(server.url.replace(/^http/, 'ws'), ADMIN_TOKEN);
    try {
      watcher.subscribe('t', TRACE, { runId: id });
      // CONTEXT and REQUEST of round 1, replayed from the table: the live listener is attached after them.
      await watcher.waitFor((message) => message.type === 'next', 2);
      const replayed = watcher.of('t').length;
      let reads = 0;
      (watcher.socket as unknown as { _socket: Socket })._socket.prependListener('data', () => (reads += 1));
      first.open();
      await withTimeout(watcher.waitFor((message) => message.type === 'complete'), 15_000, 'the trace did not complete');

      const received = watcher.of('t').filter((message) => message.type === 'next').map((message) => (message.payload as { data: { runTrace: { sequence: number } } }).data.runTrace.sequence);
      const stored = (await server.ok<{ run: { steps: { sequence: number }[] } }>('query($id: ID!) { run(id: $id) { steps { sequence } } }', { id })).run.steps;
      expect(received).toEqual(stored.map((step) => step.sequence));
      const live = received.length - replayed;
      // Four live steps a tool round (LLM, TOOL, CONTEXT, REQUEST), then the last answer and END: one read a round, and the
      // completion. Written one by one, or the answer apart from the rest, they took two reads a round or more.
      expect(live).toBeGreaterThanOrEqual(4 * rounds);
      expect(reads).toBeLessThanOrEqual(rounds + 3);
    } finally {
      watcher.close();
    }
  }, 60_000);
});
