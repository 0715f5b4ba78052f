/**
 * Claiming orphaned runs is race-free with several instances on one database:
 * of any number of claimers racing for a run whose lease went stale, exactly
 * one wins, once per lease epoch (requeue_count counts the epochs); and an
 * instance whose lease was taken over cannot write into the new owner's
 * trace. First with eight claimers (each with its own connection pool, as
 * eight processes have) racing for many runs at once, then with real server
 * processes on MySQL + Redis racing to take over the runs of one killed with
 * SIGKILL.
 */
import crypto from 'node:crypto';
import type { DataSource } from 'typeorm';
import { createDataSource } from '../../src/db/data-source';
import type { LoopStep } from '../../src/runs/engine/loop-step';
import { LeaseLostError, RunStore } from '../../src/runs/run-store';
import { testDialects } from '../support/databases';
import { Instances, waitForRunEnd } from '../support/instances';
import type { ServerProcess } from '../support/server-process';
import { expectWellFormedTrace, uniqueIdentifier } from '../runs/run-kit';
import { gate } from '../runs/scripted-provider';

const CLAIMERS = 8;
const RUNS = 40;
const LEASE_SECONDS = 15;

const context: LoopStep = {
  kind: 'context',
  round: 1,
  durationMs: 0,
  contextBudget: { window: 8192, reserve: 1000, safety: 246, budget: 6946, estimate: 9, droppedTurns: 0, calibration: 1.15, fits: true },
};

function shuffled<T>(items: readonly T[]): T[] {
  const copy = [...items];
  for (let i = copy.length - 1; i > 0; i -= 1) {
    const j = crypto.randomInt(i + 1);
    [copy[i], copy[j]] = [copy[j]!, copy[i]!];
  }
  return copy;
}

describe.each(testDialects)('claiming orphaned runs, raced by several instances (%s)', (dialect) => {
  const suite = new Instances(dialect);
  const sources: DataSource[] = [];

  afterEach(async () => {
    await Promise.all(sources.splice(0).map((source) => source.destroy()));
    await suite.stop();
  }, 60_000);

  test(`${CLAIMERS} claimers race for ${RUNS} orphaned runs in three lease epochs: one owner per run and epoch, requeue_count = epochs, a former owner's writes are refused`, async () => {
    const database = await suite.database();
    for (let k = 0; k < CLAIMERS; k += 1) {
      const { dataSource } = await createDataSource({ database: database.config, schemaMode: 'own' });
      if (k === 0) await dataSource.runMigrations({ transaction: 'each' });
      sources.push(dataSource);
    }
    const stores = sources.map((source) => new RunStore(source));
    const instances = stores.map((_, k) => `instance-${k}`);

    // Runs left RUNNING by an instance that died without a trace of its lease.
    const runs: number[] = [];
    for (let i = 0; i < RUNS; i += 1) {
      const row = await stores[0]!.createRun({ uuid: crypto.randomUUID(), configurationUid: 1, configurationIdentifier: 'race' }, undefined, '{"request":{"configuration":"race","prompt":"x"},"startedBy":"test"}');
      await stores[0]!.markRunning(row.uid);
      runs.push(row.uid);
    }

    // A run waiting for approval holds no lease on purpose: it is nobody's orphan.
    const waiting = await stores[0]!.createRun({ uuid: crypto.randomUUID(), configurationUid: 1, configurationIdentifier: 'race' }, undefined, '{}');
    await database.query("UPDATE tx_nrllm_agentrun SET status = 'waiting_for_approval' WHERE uid = ?", [waiting.uid]);
    const orphans = (await stores[0]!.orphanedRuns(LEASE_SECONDS)).map((row) => row.uid);
    expect(orphans.sort((a, b) => a - b)).toEqual(runs);
    expect(await stores[1]!.claimOrphan(waiting.uid, instances[1]!, LEASE_SECONDS)).toBe(false);

    const ownerOf = async (): Promise<Map<number, string>> => {
      const rows = (await database.query('SELECT run_uid AS run, instance_id AS owner FROM promptwire_run_lease')) as { run: number | string; owner: string }[];
      return new Map(rows.map((row) => [Number(row.run), row.owner]));
    };
    const requeueCounts = async (): Promise<number[]> => {
      const rows = (await database.query('SELECT requeue_count AS n FROM promptwire_run_request WHERE run_uid <> ? ORDER BY run_uid', [waiting.uid])) as { n: number | string }[];
      return rows.map((row) => Number(row.n));
    };

    let previous = new Map<number, string>();
    for (let epoch = 1; epoch <= 3; epoch += 1) {
      // Every lease goes stale at once: the owner of the last epoch stopped renewing.
      if (epoch > 1) await database.query('UPDATE promptwire_run_lease SET heartbeat_at = 0');
      const wins = new Map<number, string[]>(runs.map((uid) => [uid, []]));
      // Passes until every run has an owner: a claimer that meets a lock conflict just loses that run this pass.
      for (let pass = 0; pass < 5 && [...wins.values()].some((winners) => winners.length === 0); pass += 1) {
        await Promise.all(
          stores.map((store, k) =>
            Promise.all(
              shuffled(runs).map(async (uid) => {
                if (await store.claimOrphan(uid, instances[k]!, LEASE_SECONDS)) wins.get(uid)!.push(instances[k]!);
              }),
            ),
          ),
        );
      }
      const owners = await ownerOf();
      for (const uid of runs) {
        expect([uid, wins.get(uid)!.length]).toEqual([uid, 1]);
        expect(owners.get(uid)).toBe(wins.get(uid)![0]);
      }
      expect(await requeueCounts()).toEqual(runs.map(() => epoch));

      // The fence: the owner of the last epoch can no longer write a step; the new owner can.
      const uid = runs[epoch]!;
      const owner = owners.get(uid)!;
      const store = stores[instances.indexOf(owner)]!;
      if (epoch > 1 && previous.get(uid) !== owner) {
        const former = stores[instances.indexOf(previous.get(uid)!)]!;
        await expect(former.appendStep(uid, epoch, context, {}, previous.get(uid)!)).rejects.toBeInstanceOf(LeaseLostError);
      }
      await store.appendStep(uid, epoch, context, {}, owner);
      previous = owners;
    }
    const steps = (await database.query('SELECT COUNT(*) AS n FROM tx_nrllm_agentrun_event')) as { n: number | string }[];
    expect(Number(steps[0]!.n)).toBe(3);

    // Live leases: nobody can claim anything.
    const late = await Promise.all(stores.flatMap((store, k) => runs.map((uid) => store.claimOrphan(uid, instances[k]!, LEASE_SECONDS))));
    expect(late.filter(Boolean)).toHaveLength(0);
    expect(await requeueCounts()).toEqual(runs.map(() => 3));
  }, 120_000);
});

const redisUrl = process.env.TEST_REDIS_URL;

// Real processes on MySQL + Redis only (CI requires every test named for MySQL to run, so it is not defined otherwise).
if (testDialects.includes('mysql')) describe('taking over the runs of a killed instance (mysql)', () => {
  const dialect = 'mysql' as const;
  const instances = new Instances(dialect);
  afterEach(() => instances.stop(), 60_000);

  (redisUrl ? test : test.skip)('three live instances on MySQL + Redis race for the runs of a fourth killed mid-call: each run is taken over once and finished once', async () => {
    const database = await instances.database();
    const provider = await instances.provider();
    const env = { RUN_LEASE_SECONDS: '3', REDIS_URL: redisUrl!, RATE_LIMIT_START_RUN: '0' };
    const owner = await instances.start(env);
    const survivors = await Promise.all([0, 1, 2].map(() => instances.start({ ...env, RUN_MIGRATIONS: 'false' })));

    const ok = <T>(server: ServerProcess, query: string, variables?: Record<string, unknown>): Promise<T> => server.ok<T>(query, variables);
    const providerId = uniqueIdentifier('prov');
    const modelId = uniqueIdentifier('model');
    const configuration = uniqueIdentifier('conf');
    await ok(owner, 'mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: providerId, name: 'Scripted', adapterType: 'custom', endpointUrl: provider.url, apiKey: 'test-key', maxRetries: 0 },
    });
    await ok(owner, 'mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', { input: { identifier: modelId, name: 'M', provider: providerId, modelId: 'scripted' } });
    await ok(owner, 'mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: configuration, name: 'C', model: modelId } });

    const count = 8;
    const held = gate();
    provider.script(
      ...Array.from({ length: count }, () => ({ text: 'never sent', gate: held.promise })),
      ...Array.from({ length: count }, () => ({ text: 'Finished after the takeover.', usage: { prompt: 3, completion: 4 } })),
    );
    const ids: string[] = [];
    for (let i = 0; i < count; i += 1) {
      const started = await ok<{ startRun: { id: string } }>(owner, 'mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration, prompt: `run ${i}`, tools: [], stream: false } });
      ids.push(started.startRun.id);
    }
    await provider.waitForRequest(count);
    await owner.kill();

    const fields = 'status terminationReason finalContent steps { sequence kind round resentAfterTakeover }';
    type Run = { status: string; terminationReason: string | null; finalContent: string | null; steps: { sequence: number; kind: string; round: number; resentAfterTakeover: boolean | null }[] };
    const finished: Run[] = [];
    for (const [i, id] of ids.entries()) finished.push(await waitForRunEnd<Run>(survivors[i % 3]!, id, fields, 60_000));
    for (const run of finished) {
      expect(run).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed', finalContent: 'Finished after the takeover.' });
      expectWellFormedTrace(run.steps);
      expect(run.steps.map((step) => [step.kind, step.resentAfterTakeover])).toEqual([
        ['CONTEXT', null],
        ['REQUEST', null],
        ['LLM', true],
        ['END', null],
      ]);
    }
    // Each run's call was made by the dead owner and once more by exactly one survivor.
    const prompts = provider.requests.map((request) => (request.body.messages as { role: string; content: string }[]).find((m) => m.role === 'user')!.content);
    expect(prompts.sort()).toEqual(ids.flatMap((_, i) => [`run ${i}`, `run ${i}`]).sort());
    const requeued = (await database.query('SELECT requeue_count AS n FROM promptwire_run_request')) as { n: number | string }[];
    expect(requeued.map((row) => Number(row.n))).toEqual(ids.map(() => 1));
  }, 240_000);
});
