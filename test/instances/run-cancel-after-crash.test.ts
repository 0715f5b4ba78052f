/**
 * cancelRun of a run whose instance was killed (SIGKILL, no cleanup), asked
 * before anyone took the run over: right after a restart on the same
 * database, or on another live instance while the dead one's lease still
 * looks live. Nobody heard the cancel request, so the instance asked claims
 * the run and ends it CANCELLED at once: an END stored, the watchers told,
 * the provider not called again. A live owner that cannot stop the run in
 * time (frozen here) gets the request; the answer is then a CONFLICT saying
 * the run will end CANCELLED, and it does: by the owner when it goes on, or
 * by the instance that takes the run over if the owner dies first.
 */
import { testDialects } from '../support/databases';
import { Instances, waitForRunEnd, waitUntil, watchTrace } from '../support/instances';
import type { ServerProcess } from '../support/server-process';
import { createScriptedConfiguration, expectWellFormedTrace } from '../runs/run-kit';
import { gate, withTimeout, type ScriptedProvider } from '../runs/scripted-provider';

const redisUrl = process.env.TEST_REDIS_URL?.trim() || null;
/** Long enough that no takeover happens while a test cancels (the dead instance's lease stays live). */
const LONG_LEASE = { RUN_LEASE_SECONDS: '15' };
const CANCEL = 'mutation($id: ID!) { cancelRun(id: $id) { id status terminationReason } }';

interface Step {
  sequence: number;
  kind: string;
  round: number;
  status: string | null;
  terminationReason: string | null;
}
const STEP = 'sequence kind round status terminationReason';

/** A run whose first provider call is never answered; resolves once that call is in flight. */
async function startHeldRun(server: ServerProcess, provider: ScriptedProvider): Promise<string> {
  const configuration = await createScriptedConfiguration(server, provider);
  provider.script({ text: 'never sent', gate: gate().promise });
  const started = await server.ok<{ startRun: { id: string } }>('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration, prompt: 'hello', tools: [] } });
  await provider.waitForRequest(1);
  return started.startRun.id;
}

type Run = { status: string; terminationReason: string | null; steps: Step[] };
const RUN = `status terminationReason steps { ${STEP} }`;

async function runOf(server: ServerProcess, id: string): Promise<Run> {
  return (await server.ok<{ run: Run }>(`query($id: ID!) { run(id: $id) { ${RUN} } }`, { id })).run;
}

const waitForEnd = (server: ServerProcess, id: string, timeoutMs?: number) => waitForRunEnd<Run>(server, id, RUN, timeoutMs);

/** Cancels through `server` and checks what a client must get: CANCELLED, within 2 s, with its END stored and watched. */
async function expectCancelledAtOnce(server: ServerProcess, provider: ScriptedProvider, id: string): Promise<void> {
  const watcher = watchTrace<Step>(server.url, id, STEP);
  // The watcher has read the stored steps before the cancel.
  await waitUntil(() => watcher.steps.length >= 2, { timeoutMs: 10_000, intervalMs: 20, what: 'the watcher reading the stored steps' });
  const begun = Date.now();
  const answer = await server.gql<{ cancelRun: { status: string; terminationReason: string | null } }>(CANCEL, { id });
  const took = Date.now() - begun;
  expect(answer.errors).toBeUndefined();
  expect(answer.data?.cancelRun).toMatchObject({ status: 'CANCELLED', terminationReason: 'cancelled' });
  expect(took).toBeLessThan(2_000);

  const run = await runOf(server, id);
  expect(run).toMatchObject({ status: 'CANCELLED', terminationReason: 'cancelled' });
  expectWellFormedTrace(run.steps);
  expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'END']);
  await withTimeout(watcher.done, 10_000, 'the watcher did not receive the END');
  await watcher.client.dispose();
  expect(watcher.steps.map((s) => [s.sequence, s.kind, s.status])).toEqual([
    [1, 'CONTEXT', null],
    [2, 'REQUEST', null],
    [3, 'END', 'CANCELLED'],
  ]);
  // Ended, not taken over: the provider was not called again.
  expect(provider.requests).toHaveLength(1);
}

describe.each(testDialects)('cancelRun of a run whose instance was killed (%s)', (dialect) => {
  const instances = new Instances(dialect);
  afterEach(() => instances.stop(), 60_000);

  test('right after a restart on the same database: CANCELLED within 2 s, END stored and seen by a watcher, nothing sent again', async () => {
    const provider = await instances.provider();
    const first = await instances.start(LONG_LEASE);
    const id = await startHeldRun(first, provider);
    await first.kill();

    const second = await instances.start({ ...LONG_LEASE, RUN_MIGRATIONS: 'false' });
    await expectCancelledAtOnce(second, provider, id);
  }, 90_000);

  // Two live processes on one database: MySQL with Redis, as several instances run (defined there alone).
  if (dialect === 'mysql') {
    (redisUrl ? test : test.skip)('on another instance (mysql + Redis), before its takeover: CANCELLED within 2 s, END stored and seen by a watcher', async () => {
        const provider = await instances.provider();
      const env = { ...LONG_LEASE, REDIS_URL: redisUrl! };
      const owner = await instances.start(env);
      const other = await instances.start({ ...env, RUN_MIGRATIONS: 'false' });
      const id = await startHeldRun(owner, provider);
      await owner.kill();
      await expectCancelledAtOnce(other, provider, id);
    }, 90_000);

    (redisUrl ? test : test.skip)('an owner that is alive but frozen (mysql + Redis): a CONFLICT within 2 s saying the run will end CANCELLED; it does once the owner goes on', async () => {
        const provider = await instances.provider();
      const env = { ...LONG_LEASE, REDIS_URL: redisUrl! };
      const owner = await instances.start(env);
      const other = await instances.start({ ...env, RUN_MIGRATIONS: 'false' });
      const id = await startHeldRun(owner, provider);
      owner.pause();
      try {
        const begun = Date.now();
        const answer = await other.gql(CANCEL, { id });
        expect(Date.now() - begun).toBeLessThan(3_000);
        expect(answer.errors?.[0]?.extensions).toMatchObject({ code: 'CONFLICT', field: 'id' });
        expect(answer.errors?.[0]?.message).toContain('ends CANCELLED');
        expect((await runOf(other, id)).status).toBe('RUNNING');
      } finally {
        owner.resume();
      }
      const run = await waitForEnd(other, id, 15_000);
      expect(run).toMatchObject({ status: 'CANCELLED', terminationReason: 'cancelled' });
      expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'END']);
      expect(provider.requests).toHaveLength(1);
    }, 90_000);

    (redisUrl ? test : test.skip)('an owner asked to cancel that dies before it could (mysql + Redis): the instance that takes the run over ends it CANCELLED, not sends it again', async () => {
        const provider = await instances.provider();
      const env = { RUN_LEASE_SECONDS: '6', REDIS_URL: redisUrl! };
      const owner = await instances.start(env);
      const other = await instances.start({ ...env, RUN_MIGRATIONS: 'false' });
      const id = await startHeldRun(owner, provider);
      owner.pause();
      const answer = await other.gql(CANCEL, { id });
      expect(answer.errors?.[0]?.extensions?.code).toBe('CONFLICT');
      await owner.kill();
      const run = await waitForEnd(other, id, 30_000);
      expect(run).toMatchObject({ status: 'CANCELLED', terminationReason: 'cancelled' });
      expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'END']);
      expect(provider.requests).toHaveLength(1);
    }, 90_000);
  }
});
