/**
 * GET /metrics through the running server: who may scrape, and what the
 * counters say after real runs against the scripted provider — equal to what
 * the stored steps say.
 */
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { RunKit, type RunWithSteps } from '../runs/run-kit';
import { parsePrometheusText, sampleValue, type Sample } from '../support/prometheus-text';

describe.each(testDialects)('Prometheus metrics (%s)', (dialect) => {
  let ts: TestServer;
  const kit = new RunKit(() => ts);

  beforeAll(async () => {
    ts = await startTestServer(dialect);
  });
  afterAll(async () => {
    await ts?.stop();
    await kit.closeProviders();
  });

  const metricsUrl = () => new URL('/metrics', ts.url).toString();

  async function scrape(token: string | null = ADMIN_TOKEN): Promise<{ status: number; contentType: string | null; text: string; samples: Sample[] }> {
    const response = await fetch(metricsUrl(), { headers: token ? { authorization: `Bearer ${token}` } : {} });
    const text = await response.text();
    return { status: response.status, contentType: response.headers.get('content-type'), text, samples: response.status === 200 ? parsePrometheusText(text) : [] };
  }

  /** Polls /metrics until `check` holds (a gauge follows events that arrive over another connection). */
  async function scrapeUntil(check: (samples: Sample[]) => boolean): Promise<Sample[]> {
    const deadline = Date.now() + 10_000;
    for (;;) {
      const { samples } = await scrape();
      if (check(samples)) return samples;
      if (Date.now() > deadline) throw new Error('the metrics never reached the expected state');
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
  }

  // First in this file: the process metrics start collecting at the first scrape, when
  // the event-loop histogram holds no sample yet (its mean is NaN, written `NaN`).
  test('every line of the first scrapes after start parses as Prometheus text, NaN written NaN', async () => {
    for (let scrapeNumber = 0; scrapeNumber < 2; scrapeNumber += 1) {
      const response = await fetch(metricsUrl(), { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
      expect(response.status).toBe(200);
      const text = await response.text();
      expect(text).not.toMatch(/ Nan$/m);
      const samples = parsePrometheusText(text);
      expect(samples.some((sample) => sample.name === 'nodejs_eventloop_lag_mean_seconds')).toBe(true);
      expect(samples.some((sample) => sample.name === 'promptwire_runs_total')).toBe(true);
    }
  });

  test('a scrape needs a token of any role; without one it is 401', async () => {
    const anonymous = await scrape(null);
    expect(anonymous.status).toBe(401);
    expect(anonymous.text).toMatch(/Bearer/);
    expect((await scrape('not-a-valid-token-0000000000')).status).toBe(401);

    const viewer = await scrape(await ts.tokenFor('VIEWER'));
    expect(viewer.status).toBe(200);
    expect(viewer.contentType).toMatch(/^text\/plain; version=0\.0\.4/);
  });

  test("Node's process metrics are there beside the service's", async () => {
    const { samples } = await scrape();
    const names = new Set(samples.map((sample) => sample.name));
    for (const name of ['process_cpu_user_seconds_total', 'process_resident_memory_bytes', 'nodejs_eventloop_lag_seconds', 'nodejs_heap_size_used_bytes']) {
      expect(names).toContain(name);
    }
    for (const status of ['completed', 'failed', 'cancelled']) expect(samples.some((s) => s.name === 'promptwire_runs_total' && s.labels.status === status)).toBe(true);
    for (const tokenClass of ['input', 'output']) expect(samples.some((s) => s.name === 'promptwire_run_tokens_total' && s.labels.class === tokenClass)).toBe(true);
  });

  test('runs, tokens, cost, tool calls and provider call durations match the stored steps', async () => {
    const before = (await scrape()).samples;

    const priced = await kit.setup({ costInput: 250_000, costOutput: 1_000_000 });
    priced.provider.script(
      { toolCalls: [{ id: 'call_calc', name: 'calculator', arguments: { expression: '6 * 7' } }], usage: { prompt: 10, completion: 5 } },
      { text: 'It is 42.', usage: { prompt: 12, completion: 3 } },
    );
    const completed = await kit.waitForRun((await kit.startRun({ configuration: priced.configuration, prompt: 'What is 6*7?', tools: ['calculator'] })).id);
    expect(completed.status).toBe('COMPLETED');

    const failing = await kit.setup();
    failing.provider.script({ status: 500, errorBody: '{"error":{"message":"upstream broke"}}' });
    const failed = await kit.waitForRun((await kit.startRun({ configuration: failing.configuration, prompt: 'x', tools: [] })).id);
    expect(failed).toMatchObject({ status: 'FAILED', terminationReason: 'provider_failed' });

    const after = (await scrape()).samples;
    const delta = (name: string, labels: Record<string, string> = {}) => sampleValue(after, name, labels) - sampleValue(before, name, labels);
    const llmSteps = (run: RunWithSteps) => run.steps.filter((step) => step.kind === 'LLM');
    const stored = [completed, failed].flatMap(llmSteps);

    expect(delta('promptwire_runs_total', { status: 'completed' })).toBe(1);
    expect(delta('promptwire_runs_total', { status: 'failed' })).toBe(1);
    expect(delta('promptwire_run_tokens_total', { class: 'input' })).toBe(stored.reduce((sum, step) => sum + (step.promptTokens ?? 0), 0));
    expect(delta('promptwire_run_tokens_total', { class: 'output' })).toBe(stored.reduce((sum, step) => sum + (step.completionTokens ?? 0), 0));
    expect(delta('promptwire_run_tokens_total', { class: 'input' })).toBe(22);
    expect(delta('promptwire_run_cost_dollars_total')).toBeCloseTo(completed.estimatedCost ?? NaN, 9);
    expect(delta('promptwire_tool_calls_total', { outcome: 'ok' })).toBe(1);
    expect(delta('promptwire_provider_request_duration_seconds_count', { provider: 'custom', outcome: 'ok' })).toBe(2);
    expect(delta('promptwire_provider_request_duration_seconds_count', { provider: 'custom', outcome: 'error' })).toBe(1);
    const storedSeconds = llmSteps(completed).reduce((sum, step) => sum + step.durationMs / 1000, 0);
    expect(delta('promptwire_provider_request_duration_seconds_sum', { provider: 'custom', outcome: 'ok' })).toBeCloseTo(storedSeconds, 4);
    expect(sampleValue(after, 'promptwire_runs_in_progress')).toBe(0);
  });

  test('promptwire_runs_open counts the runs waiting for approval (and queued, running) from the run table', async () => {
    const setup = await kit.setup();
    setup.provider.script({ toolCalls: [{ id: 'call_wait', name: 'calculator', arguments: { expression: '1 + 1' } }], usage: { prompt: 1, completion: 1 } });
    const before = sampleValue((await scrape()).samples, 'promptwire_runs_open', { state: 'waiting_for_approval' });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: ['calculator'], approvalRequired: ['calculator'] });
    expect((await kit.waitForRun(started.id)).status).toBe('WAITING_FOR_APPROVAL');
    const samples = (await scrape()).samples;
    expect(sampleValue(samples, 'promptwire_runs_open', { state: 'waiting_for_approval' })).toBe(before + 1);
    expect(samples.some((s) => s.name === 'promptwire_runs_open' && s.labels.state === 'queued')).toBe(true);
    await ts.ok('mutation($id: ID!) { cancelRun(id: $id) { status } }', { id: started.id });
    expect(sampleValue((await scrape()).samples, 'promptwire_runs_open', { state: 'waiting_for_approval' })).toBe(before);
  });

  test('GraphQL requests are timed by operation type and root field, and no run id or free text becomes a label', async () => {
    const setup = await kit.setup();
    setup.provider.script({ text: 'Fine.', usage: { prompt: 1, completion: 1 } });
    const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'a prompt nobody else sends', tools: [] })).id);
    await ts.ok('query OperationNameChosenByTheClient { viewer { name } }');
    await ts.gql('query { notAField }');

    const { text, samples } = await scrape();
    const count = (labels: Record<string, string>) => sampleValue(samples, 'promptwire_graphql_request_duration_seconds_count', labels);
    expect(count({ type: 'mutation', operation: 'startRun' })).toBeGreaterThanOrEqual(1);
    expect(count({ type: 'query', operation: 'viewer' })).toBeGreaterThanOrEqual(1);
    expect(count({ type: 'unknown', operation: 'unknown' })).toBeGreaterThanOrEqual(1);
    for (const forbidden of [run.id, 'OperationNameChosenByTheClient', 'a prompt nobody else sends', setup.configuration, setup.modelIdentifier, 'notAField', ADMIN_TOKEN]) {
      expect(text).not.toContain(forbidden);
    }
    const labelValues = new Set(samples.flatMap((sample) => Object.values(sample.labels)));
    for (const value of labelValues) expect(value).toMatch(/^[A-Za-z0-9_.+:-]*$/);
  });

  test('an open runTrace subscription counts as active until it completes', async () => {
    const held = await kit.startHeldToolRun();
    const client = ts.wsClient();
    const base = sampleValue((await scrape()).samples, 'promptwire_active_subscriptions');
    const done = new Promise<void>((resolve, reject) => {
      client.subscribe({ query: 'subscription($id: ID!) { runTrace(runId: $id) { sequence kind } }', variables: { id: held.id } }, { next: () => undefined, error: reject, complete: resolve });
    });
    await scrapeUntil((samples) => sampleValue(samples, 'promptwire_active_subscriptions') === base + 1);
    held.release();
    await done;
    await scrapeUntil((samples) => sampleValue(samples, 'promptwire_active_subscriptions') === base);

    // A subscription whose socket goes away is no longer counted either.
    const second = await kit.startHeldToolRun();
    const leaving = ts.wsClient();
    leaving.subscribe({ query: 'subscription($id: ID!) { runTrace(runId: $id) { sequence } }', variables: { id: second.id } }, { next: () => undefined, error: () => undefined, complete: () => undefined });
    await scrapeUntil((samples) => sampleValue(samples, 'promptwire_active_subscriptions') === base + 1);
    await leaving.dispose();
    await scrapeUntil((samples) => sampleValue(samples, 'promptwire_active_subscriptions') === base);
    second.release();
    await kit.waitForRun(second.id);
  });
});

describe('Prometheus metrics with METRICS_PUBLIC=true', () => {
  let ts: TestServer;
  beforeAll(async () => {
    ts = await startTestServer('sqlite', { env: { METRICS_PUBLIC: 'true' } });
  });
  afterAll(async () => {
    await ts?.stop();
  });

  test('a scrape needs no token', async () => {
    const response = await fetch(new URL('/metrics', ts.url));
    expect(response.status).toBe(200);
    expect(await response.text()).toContain('promptwire_runs_total');
  });
});
