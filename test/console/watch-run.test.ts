/**
 * The client library's watchRun: every step exactly once, in order, ending
 * after END, across a SUBSCRIBER_LAGGED answer, a replayed duplicate and a
 * dropped connection; refusals surface as WatchRunError. The misbehaviour is
 * scripted on a graphql-ws server built from the real schema.graphql; the
 * last test watches a real run on the real server.
 */
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { buildSchema, GraphQLError, type GraphQLFieldConfig } from 'graphql';
import { useServer } from 'graphql-ws/use/ws';
import WebSocket, { WebSocketServer } from 'ws';
import { toWebSocketUrl, watchRun, WatchRunError, type RunStep } from '../../src/client';
import { testDialects } from '../support/databases';
import { startTestServer } from '../support/server';

type Emit = { step: number; kind?: string } | { lagged: true } | { drop: true };
type Attempt = (afterSequence: number) => Emit[] | GraphQLError;
/** What the HTTP endpoint answers: pages of stored steps, a GraphQL refusal, or a broken answer (none: 404 without a GraphQL body). */
type Http = { stored: { step: number; kind?: string }[] } | { code: string } | 'broken';

interface FakeServer {
  url: string;
  requested: number[];
  /** afterSequence and limit of each HTTP request. */
  pagesRequested: [number, number][];
  close(): Promise<void>;
}

/**
 * A graphql-ws server whose n-th runTrace subscription plays the n-th attempt,
 * and whose HTTP endpoint answers run.steps pages as `http` says.
 */
async function fakeServer(attempts: Attempt[], acceptToken = 'good', httpAnswer: Http | null = null): Promise<FakeServer> {
  const schema = buildSchema(fs.readFileSync(path.resolve(__dirname, '../../schema.graphql'), 'utf8'));
  const field = schema.getSubscriptionType()!.getFields().runTrace as unknown as GraphQLFieldConfig<unknown, { extra: { socket: WebSocket } }, { afterSequence: number }>;
  const requested: number[] = [];
  field.subscribe = (_root, args, context) => {
    requested.push(args.afterSequence);
    const attempt = attempts[requested.length - 1];
    if (!attempt) throw new GraphQLError('no more attempts scripted');
    const plan = attempt(args.afterSequence);
    if (plan instanceof GraphQLError) throw plan;
    return (async function* () {
      for (const emit of plan) {
        if ('drop' in emit) {
          context.extra.socket.terminate();
          return;
        }
        yield emit;
        await new Promise((resolve) => setTimeout(resolve, 2));
      }
    })();
  };
  field.resolve = (payload: unknown) => {
    const emit = payload as Emit;
    if ('lagged' in emit) throw new GraphQLError('The watcher fell behind; resubscribe with afterSequence: 2', { extensions: { code: 'SUBSCRIBER_LAGGED' } });
    if ('drop' in emit) return null;
    return { sequence: emit.step, kind: emit.kind ?? 'TOOL', round: 1, durationMs: 1 };
  };
  const pagesRequested: [number, number][] = [];
  const server = http.createServer((request, response) => {
    let text = '';
    request.on('data', (chunk: Buffer) => (text += chunk.toString()));
    request.on('end', () => {
      const { variables } = JSON.parse(text) as { variables: { afterSequence: number; limit: number } };
      pagesRequested.push([variables.afterSequence, variables.limit]);
      if (httpAnswer === null || httpAnswer === 'broken') {
        response.writeHead(httpAnswer === null ? 404 : 502).end('not GraphQL');
        return;
      }
      const body =
        'stored' in httpAnswer
          ? {
              data: {
                run: {
                  id: 'r1',
                  status: 'RUNNING',
                  steps: httpAnswer.stored
                    .filter((emit) => emit.step > variables.afterSequence)
                    .slice(0, variables.limit)
                    .map((emit) => ({ sequence: emit.step, kind: emit.kind ?? 'TOOL', round: 1, durationMs: 1 })),
                },
              },
            }
          : { errors: [{ message: `refused: ${httpAnswer.code}`, extensions: { code: httpAnswer.code } }], data: null };
      response.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(body));
    });
  });
  const wss = new WebSocketServer({ server, path: '/graphql' });
  const cleanup = useServer({ schema, context: (ctx) => ctx, onConnect: (ctx) => ctx.connectionParams?.authorization === `Bearer ${acceptToken}` }, wss);
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}/graphql`,
    requested,
    pagesRequested,
    close: async () => {
      await cleanup.dispose();
      for (const client of wss.clients) client.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      server.closeAllConnections();
      await new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

async function collect<T = RunStep>(iterable: AsyncIterable<T>): Promise<T[]> {
  const steps: T[] = [];
  for await (const step of iterable) steps.push(step);
  return steps;
}

describe('toWebSocketUrl', () => {
  it.each([
    ['http://127.0.0.1:4000/graphql', 'ws://127.0.0.1:4000/graphql'],
    ['https://example.test/graphql', 'wss://example.test/graphql'],
    ['ws://a/graphql', 'ws://a/graphql'],
    ['wss://a/graphql', 'wss://a/graphql'],
  ])('%s → %s', (url, expected) => {
    expect(toWebSocketUrl(url)).toBe(expected);
  });
});

describe('watchRun against a server that lags, repeats and drops', () => {
  it('yields 1..END exactly once, resubscribing after the last sequence it yielded', async () => {
    const server = await fakeServer([
      () => [{ step: 1 }, { step: 2 }, { lagged: true }],
      () => [{ step: 2 }, { step: 3 }, { step: 4 }, { drop: true }],
      () => [{ step: 5 }, { step: 6, kind: 'END' }, { step: 7 }],
    ]);
    const reconnects: { afterSequence: number; reason: string }[] = [];
    try {
      const steps = await collect(watchRun({ url: server.url, token: 'good', runId: 'r1', webSocketImpl: WebSocket, onReconnect: (event) => reconnects.push(event) }));
      expect(steps.map((step) => step.sequence)).toEqual([1, 2, 3, 4, 5, 6]);
      expect(steps[5]?.kind).toBe('END');
      expect(server.requested).toEqual([0, 2, 4]);
      expect(reconnects.map((event) => event.afterSequence)).toEqual([2, 4]);
      expect(reconnects[0]?.reason).toBe('SUBSCRIBER_LAGGED');
    } finally {
      await server.close();
    }
  });

  it('starts after afterSequence and resubscribes when a step would leave a hole', async () => {
    const server = await fakeServer([() => [{ step: 4 }, { step: 6 }], () => [{ step: 5 }, { step: 6, kind: 'END' }]]);
    try {
      const steps = await collect(watchRun({ url: server.url, token: 'good', runId: 'r1', afterSequence: 3, webSocketImpl: WebSocket, maxRetryDelayMs: 10 }));
      expect(steps.map((step) => step.sequence)).toEqual([4, 5, 6]);
      expect(server.requested).toEqual([3, 4]);
    } finally {
      await server.close();
    }
  });

  it('ends a subscription the server closed before END by resubscribing, not by ending', async () => {
    const server = await fakeServer([() => [{ step: 1 }], () => [{ step: 2, kind: 'END' }]]);
    try {
      expect((await collect(watchRun({ url: server.url, token: 'good', runId: 'r1', webSocketImpl: WebSocket }))).map((step) => step.sequence)).toEqual([1, 2]);
    } finally {
      await server.close();
    }
  });

  it('reports a refused subscription and a refused token as WatchRunError, without retrying', async () => {
    const server = await fakeServer([() => new GraphQLError('No run with id "nope"', { extensions: { code: 'NOT_FOUND' } })]);
    try {
      const refused = collect(watchRun({ url: server.url, token: 'good', runId: 'nope', webSocketImpl: WebSocket }));
      await expect(refused).rejects.toBeInstanceOf(WatchRunError);
      await expect(refused).rejects.toMatchObject({ code: 'NOT_FOUND' });
      const forbidden = collect(watchRun({ url: server.url, token: 'bad', runId: 'r1', webSocketImpl: WebSocket }));
      await expect(forbidden).rejects.toMatchObject({ name: 'WatchRunError', code: '4403' });
      expect(server.requested).toEqual([0]);
    } finally {
      await server.close();
    }
  });

  it('reads stored steps over HTTP page by page, then subscribes after the last of them', async () => {
    const server = await fakeServer([() => [{ step: 4 }, { step: 5, kind: 'END' }]], 'good', { stored: [{ step: 1 }, { step: 2 }, { step: 3 }] });
    try {
      const steps = await collect(watchRun({ url: server.url, token: 'good', runId: 'r1', webSocketImpl: WebSocket, replayPageSize: 2 }));
      expect(steps.map((step) => step.sequence)).toEqual([1, 2, 3, 4, 5]);
      // After a full first page the next ones are asked for ahead, each a page further on.
      const asked = server.pagesRequested.map(([after]) => after).sort((a, b) => a - b);
      expect(asked.slice(0, 2)).toEqual([0, 2]);
      expect(asked.every((after) => [0, 2, 4, 6].includes(after))).toBe(true);
      expect(server.pagesRequested.every(([, limit]) => limit === 2)).toBe(true);
      expect(server.requested).toEqual([3]);
    } finally {
      await server.close();
    }
  });

  it('asks for one page only when the first is short', async () => {
    const server = await fakeServer([() => [{ step: 2, kind: 'END' }]], 'good', { stored: [{ step: 1 }] });
    try {
      expect((await collect(watchRun({ url: server.url, token: 'good', runId: 'r1', webSocketImpl: WebSocket }))).map((step) => step.sequence)).toEqual([1, 2]);
      expect(server.pagesRequested).toEqual([[0, 200]]);
      expect(server.requested).toEqual([1]);
    } finally {
      await server.close();
    }
  });

  it('does not subscribe at all when the stored steps end with END, and leaves a page with a hole to the subscription', async () => {
    const finished = await fakeServer([], 'good', { stored: [{ step: 1 }, { step: 2, kind: 'END' }] });
    const holed = await fakeServer([() => [{ step: 2 }, { step: 3, kind: 'END' }]], 'good', { stored: [{ step: 1 }, { step: 3 }] });
    try {
      expect((await collect(watchRun({ url: finished.url, token: 'good', runId: 'r1', webSocketImpl: WebSocket }))).map((step) => step.sequence)).toEqual([1, 2]);
      expect(finished.requested).toEqual([]);
      expect((await collect(watchRun({ url: holed.url, token: 'good', runId: 'r1', webSocketImpl: WebSocket }))).map((step) => step.sequence)).toEqual([1, 2, 3]);
      expect(holed.requested).toEqual([1]);
    } finally {
      await finished.close();
      await holed.close();
    }
  });

  it('reports a refusal over HTTP as WatchRunError without subscribing; a broken HTTP answer falls back to the subscription', async () => {
    const refusing = await fakeServer([() => [{ step: 1, kind: 'END' }]], 'good', { code: 'UNAUTHENTICATED' });
    const broken = await fakeServer([() => [{ step: 1, kind: 'END' }]], 'good', 'broken');
    try {
      await expect(collect(watchRun({ url: refusing.url, token: 'good', runId: 'r1', webSocketImpl: WebSocket }))).rejects.toMatchObject({ name: 'WatchRunError', code: 'UNAUTHENTICATED' });
      expect(refusing.requested).toEqual([]);
      expect((await collect(watchRun({ url: broken.url, token: 'good', runId: 'r1', webSocketImpl: WebSocket }))).map((step) => step.sequence)).toEqual([1]);
      expect(broken.requested).toEqual([0]);
    } finally {
      await refusing.close();
      await broken.close();
    }
  });

  it('gives up after maxRetries reconnections without progress', async () => {
    const server = await fakeServer([]);
    await server.close();
    await expect(collect(watchRun({ url: server.url, token: 'good', runId: 'r1', webSocketImpl: WebSocket, maxRetries: 2, maxRetryDelayMs: 5 }))).rejects.toThrow(/after 2 reconnections/);
  });
});

describe.each(testDialects)('watchRun on the real server (%s)', (dialect) => {
  it('pages run.steps with limit, and refuses a page above the largest', async () => {
    const t = await startTestServer(dialect, { env: { SEED_EXAMPLES: 'true' } });
    try {
      const started = await t.ok<{ startRun: { id: string } }>('mutation { startRun(input: {configuration: "demo-assistant", prompt: "What is 17 * 23?", tools: ["calculator"]}) { id } }');
      await collect(watchRun({ url: t.url, token: await t.tokenFor('VIEWER'), runId: started.startRun.id, webSocketImpl: WebSocket }));
      const page = await t.ok<{ run: { steps: { sequence: number }[] } }>(`{ run(id: "${started.startRun.id}") { steps(afterSequence: 2, limit: 2) { sequence } } }`);
      expect(page.run.steps.map((step) => step.sequence)).toEqual([3, 4]);
      const refused = await t.gql(`{ run(id: "${started.startRun.id}") { steps(limit: 501) { sequence } } }`);
      expect(refused.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    } finally {
      await t.stop();
    }
  });

  it("yields a demo run's stored trace in order, the same as run.steps", async () => {
    const t = await startTestServer(dialect, { env: { SEED_EXAMPLES: 'true' } });
    try {
      const started = await t.ok<{ startRun: { id: string } }>('mutation { startRun(input: {configuration: "demo-assistant", prompt: "What is 17 * 23?", tools: ["calculator"]}) { id } }');
      const steps = await collect(watchRun({ url: t.url, token: (await t.tokenFor('VIEWER')), runId: started.startRun.id, webSocketImpl: WebSocket }));
      const stored = await t.ok<{ run: { steps: { sequence: number; kind: string; toolResult: string | null }[] } }>(`{ run(id: "${started.startRun.id}") { steps { sequence kind toolResult } } }`);
      expect(steps.map((step) => [step.sequence, step.kind, step.toolResult])).toEqual(stored.run.steps.map((step) => [step.sequence, step.kind, step.toolResult]));
      expect(steps.map((step) => step.sequence)).toEqual(steps.map((_, index) => index + 1));
      expect(steps.at(-1)).toMatchObject({ kind: 'END', status: 'COMPLETED' });
      expect(steps.find((step) => step.kind === 'TOOL')?.toolResult).toBe('391');
      // The same steps when the subscription replays them, and when HTTP pages are small.
      const viaSocket = await collect(watchRun({ url: t.url, token: await t.tokenFor('VIEWER'), runId: started.startRun.id, webSocketImpl: WebSocket, replayOverHttp: false }));
      const inPages = await collect(watchRun({ url: t.url, token: await t.tokenFor('VIEWER'), runId: started.startRun.id, webSocketImpl: WebSocket, replayPageSize: 2 }));
      expect(viaSocket).toEqual(steps);
      expect(inPages).toEqual(steps);
      // messagesSent: false, over HTTP and over the subscription: the same steps without messagesSent, REQUESTs counting them.
      const withoutMessages = steps.map(({ messagesSent: _messages, ...rest }) => rest);
      expect(steps.filter((step) => step.kind === 'REQUEST').map((step) => step.messageCount)).toEqual(steps.filter((step) => step.kind === 'REQUEST').map((step) => step.messagesSent!.length));
      expect(steps.filter((step) => step.kind !== 'REQUEST').every((step) => step.messageCount === null)).toBe(true);
      for (const replayOverHttp of [true, false]) {
        const light = await collect(watchRun({ url: t.url, token: await t.tokenFor('VIEWER'), runId: started.startRun.id, webSocketImpl: WebSocket, replayOverHttp, messagesSent: false }));
        expect(light).toEqual(withoutMessages);
      }
    } finally {
      await t.stop();
    }
  });
});
