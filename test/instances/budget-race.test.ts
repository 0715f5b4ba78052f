/**
 * Two server processes on one database spend against one configuration's
 * daily request cap at the same time. Every run's provider call is held at
 * the provider until every run has either reached it or been refused, so
 * all the checks race while no call has been booked yet: the provider still
 * sees at most the cap plus one call, the refused runs end
 * `budget_exhausted`, and the ledger's request_count sum is exactly the
 * calls made.
 */
import { testDialects } from '../support/databases';
import { Instances, waitForRunEnd, waitUntil } from '../support/instances';
import type { ServerProcess } from '../support/server-process';
import { gate } from '../runs/scripted-provider';
import { uniqueIdentifier } from '../runs/run-kit';

const CAP = 5;
const RUNS_PER_INSTANCE = 8;
const redisUrl = process.env.TEST_REDIS_URL;

interface EndedRun {
  id: string;
  status: string;
  terminationReason: string | null;
  error: string | null;
}

describe.each(testDialects)('a daily request cap spent by two instances at once (%s)', (dialect) => {
  const instances = new Instances(dialect);

  afterEach(async () => {
    await instances.stop();
  }, 60_000);

  test(`${2 * RUNS_PER_INSTANCE} runs on two instances against a cap of ${CAP}: at most ${CAP + 1} provider calls, the rest refused, the ledger counts exactly the calls made`, async () => {
    const provider = await instances.provider();
    const env: Record<string, string> = { USAGE_TIMEZONE: 'UTC', RATE_LIMIT_START_RUN: '0', ...(dialect === 'mysql' && redisUrl ? { REDIS_URL: redisUrl } : {}) };
    const first = await instances.start(env);
    const second = await instances.start({ ...env, RUN_MIGRATIONS: 'false' });

    const providerId = uniqueIdentifier('prov');
    const modelId = uniqueIdentifier('model');
    const configuration = uniqueIdentifier('conf');
    await first.ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: providerId, name: 'Scripted', adapterType: 'custom', endpointUrl: provider.url, apiKey: 'test-key', maxRetries: 0 },
    });
    await first.ok('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', { input: { identifier: modelId, name: 'M', provider: providerId, modelId: 'scripted' } });
    const created = await first.ok<{ createConfiguration: { uid: number } }>('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', {
      input: { identifier: configuration, name: 'C', model: modelId, maxRequestsPerDay: CAP },
    });
    const configurationUid = created.createConfiguration.uid;

    // Every answer waits for one gate: no call is booked before every check has been made.
    const held = gate();
    for (let i = 0; i < 2 * RUNS_PER_INSTANCE; i += 1) provider.script({ text: `Answer ${i}.`, usage: { prompt: 10, completion: 2 }, gate: held.promise });

    const start = (server: ServerProcess) => server.ok<{ startRun: { id: string } }>('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration, prompt: 'Go.' } });
    const started = await Promise.all(
      Array.from({ length: RUNS_PER_INSTANCE }, () => [start(first), start(second)]).flat(),
    );
    const ids = started.map((data) => data.startRun.id);
    const serverOf = (index: number) => (index % 2 === 0 ? first : second);

    // Wait until each run has either reached the provider or ended refused.
    const ended = async () => {
      const runs = await Promise.all(ids.map((id, index) => serverOf(index).ok<{ run: EndedRun }>('query($id: ID!) { run(id: $id) { id status terminationReason error } }', { id })));
      return runs.map((data) => data.run).filter((run) => run.status === 'COMPLETED' || run.status === 'FAILED' || run.status === 'CANCELLED');
    };
    await waitUntil(async () => provider.requests.length + (await ended()).length === ids.length, {
      timeoutMs: 60_000,
      intervalMs: 50,
      what: () => `every run reaching the provider or ending (${provider.requests.length} at the provider)`,
    });
    const callsMade = provider.requests.length;
    held.open();

    const runs = await Promise.all(ids.map((id, index) => waitForRunEnd<EndedRun>(serverOf(index), id, 'id status terminationReason error', 60_000)));
    expect(callsMade).toBeGreaterThanOrEqual(CAP);
    expect(callsMade).toBeLessThanOrEqual(CAP + 1);
    const refused = runs.filter((run) => run.terminationReason === 'budget_exhausted');
    expect(refused).toHaveLength(ids.length - callsMade);
    for (const run of refused) {
      expect(run.status).toBe('COMPLETED');
      expect(run.error).toMatch(/^AI budget exhausted: configuration daily request count is at \d+ of 5$/);
    }
    expect(runs.filter((run) => run.terminationReason === 'completed')).toHaveLength(callsMade);

    const database = await instances.database();
    const [sums] = (await database.query('SELECT SUM(request_count) AS requests, SUM(tokens_used) AS tokens FROM tx_nrllm_service_usage WHERE configuration_uid = ?', [configurationUid])) as Record<string, unknown>[];
    expect({ requests: Number(sums!.requests), tokens: Number(sums!.tokens) }).toEqual({ requests: callsMade, tokens: 12 * callsMade });
    // Nothing is left held once every call was booked.
    const [holds] = (await database.query('SELECT COUNT(*) AS n FROM promptwire_usage_hold')) as Record<string, unknown>[];
    expect(Number(holds!.n)).toBe(0);
  }, 180_000);
});
