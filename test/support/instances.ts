/**
 * What the multi-instance tests (test/instances) share: the database, server
 * processes and scripted providers of a test, all stopped and dropped after
 * it (Instances); waiting until a condition holds (waitUntil) or a run has
 * ended (waitForRunEnd); and a runTrace watcher over graphql-ws, as a
 * client subscribes (watchTrace).
 */
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { ScriptedProvider } from '../runs/scripted-provider';
import { createTestDatabase, type TestDatabase, type TestDialect } from './databases';
import { ADMIN_TOKEN } from './server';
import { startServerProcess, type ServerProcess } from './server-process';

export class Instances {
  private current: Promise<TestDatabase> | null = null;
  private readonly servers: ServerProcess[] = [];
  private readonly providers: ScriptedProvider[] = [];

  constructor(readonly dialect: TestDialect) {}

  /** The test's own database, created on first use. */
  database(): Promise<TestDatabase> {
    return (this.current ??= createTestDatabase(this.dialect));
  }

  /** A server process on the test's database (`env` over the defaults). */
  async start(env: Record<string, string> = {}): Promise<ServerProcess> {
    const server = await startServerProcess(await this.database(), env);
    this.servers.push(server);
    return server;
  }

  /** A scripted OpenAI-compatible provider on its own port. */
  async provider(): Promise<ScriptedProvider> {
    const provider = await ScriptedProvider.start();
    this.providers.push(provider);
    return provider;
  }

  /** Stops every server started so far; the database stays. */
  async stopServers(): Promise<void> {
    await Promise.all(this.servers.splice(0).map((server) => server.stop()));
  }

  /** Stops every server, closes every provider and drops the database; ready for the next test. */
  async stop(): Promise<void> {
    await this.stopServers();
    await Promise.all(this.providers.splice(0).map((provider) => provider.close()));
    const database = this.current;
    this.current = null;
    await (await database)?.drop();
  }
}

export interface WaitOptions {
  timeoutMs?: number;
  /** Milliseconds between two checks. */
  intervalMs?: number;
  /** Named in the error when the time is up (a function: read then). */
  what?: string | (() => string);
}

/** Checks until `check` gives a truthy value, and returns it; fails after `timeoutMs`. */
export async function waitUntil<T>(check: () => T | null | undefined | false | Promise<T | null | undefined | false>, options: WaitOptions = {}): Promise<T> {
  const { timeoutMs = 30_000, intervalMs = 100, what = 'the condition' } = options;
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`${typeof what === 'function' ? what() : what} did not hold within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, intervalMs));
  }
}

const ENDED = ['COMPLETED', 'FAILED', 'CANCELLED'];

/** Reads the run (`fields`: the selection inside `run`, `status` included) until it has ended, and returns it. */
export async function waitForRunEnd<R extends { status: string }>(server: Pick<ServerProcess, 'ok'>, id: string, fields: string, timeoutMs = 30_000): Promise<R> {
  let last = '';
  return waitUntil(
    async () => {
      const { run } = await server.ok<{ run: R }>(`query($id: ID!) { run(id: $id) { ${fields} } }`, { id });
      last = run.status;
      return ENDED.includes(run.status) ? run : null;
    },
    { timeoutMs, what: () => `the end of run ${id} (still ${last || 'unread'})` },
  );
}

export interface TraceWatcher<S> {
  client: Client;
  /** The steps received so far, in order. */
  steps: S[];
  /** Settles when the subscription completes or fails. */
  done: Promise<void>;
}

/** Subscribes to `runTrace` (`fields`: the step's selection) as an ADMIN client, from `afterSequence`. */
export function watchTrace<S>(url: string, id: string, fields: string, afterSequence = 0): TraceWatcher<S> {
  const client = createClient({ url: url.replace(/^http/, 'ws'), webSocketImpl: WebSocket, connectionParams: { authorization: `Bearer ${ADMIN_TOKEN}` }, retryAttempts: 0 });
  const steps: S[] = [];
  const done = new Promise<void>((resolve) => {
    client.subscribe<{ runTrace: S }>(
      { query: `subscription($id: ID!, $after: Int) { runTrace(runId: $id, afterSequence: $after) { ${fields} } }`, variables: { id, after: afterSequence } },
      { next: (value) => value.data && steps.push(value.data.runTrace), error: () => resolve(), complete: () => resolve() },
    );
  });
  return { client, steps, done };
}
