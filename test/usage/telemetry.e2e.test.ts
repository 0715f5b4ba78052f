/**
 * Every provider call of a run appends one content-free row to nr_llm's
 * `tx_nrllm_telemetry`: correlated by the run's uuid, with the call's own
 * tokens (streamed calls too) and cost (NULL when unpriced), a failure with
 * its error's class only, and never a prompt or an answer.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier } from '../runs/run-kit';

type Row = Record<string, unknown>;

describe.each(testDialects)('telemetry of provider calls (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });

  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
  });

  const rowsOf = async (runId: string): Promise<Row[]> =>
    (await t.database.query('SELECT * FROM tx_nrllm_telemetry WHERE correlation_id = ? ORDER BY uid', [runId])) as Row[];

  const token = async (beUser: number, source: string) =>
    (await t.ok<{ createApiToken: { token: string } }>('mutation($name: String!, $beUser: Int, $source: String) { createApiToken(name: $name, role: EDITOR, beUser: $beUser, source: $source) { token } }', {
      name: uniqueIdentifier('tok'),
      beUser,
      source,
    })).createApiToken.token;

  const numberOrNull = (value: unknown) => (value === null ? null : Number(value));

  test('a 3-round streamed run with tools leaves one row per call: the run uuid, its tokens and cost, success, no prompt or answer text', async () => {
    const setup = await kit.setup({ costInput: 150, costOutput: 600 });
    setup.provider.script(
      { toolCalls: [{ name: 'calculator', arguments: { expression: '2 + 2' } }], usage: { prompt: 100, completion: 10 } },
      { toolCalls: [{ name: 'calculator', arguments: { expression: '4 * 4' } }], usage: { prompt: 200, completion: 20 } },
      { text: 'Sixteen, the secret answer.', usage: { prompt: 300, completion: 30 } },
    );
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'A confidential prompt.', tools: ['calculator'], stream: true }, await token(31, 'headless_cms'));
    const run = await kit.waitForRun(started.id);
    expect(run.status).toBe('COMPLETED');

    const rows = await rowsOf(run.id);
    expect(
      rows.map((row) => ({
        operation: row.operation,
        provider: row.provider,
        model: row.model,
        configuration: row.configuration_identifier,
        served: [row.served_configuration_identifier, row.served_provider, row.served_model],
        beUser: Number(row.be_user),
        source: row.source_extension,
        success: Number(row.success),
        errorClass: row.error_class,
        input: numberOrNull(row.actual_input_tokens),
        output: numberOrNull(row.actual_output_tokens),
        responseModel: row.response_model,
        cacheHit: Number(row.cache_hit),
        fallbacks: Number(row.fallback_attempts),
        routing: row.routing_policy_mode,
        facts: numberOrNull(row.facts_messages),
      })),
    ).toEqual(
      [
        [100, 10],
        [200, 20],
        [300, 30],
      ].map(([input, output]) => ({
        operation: 'tools',
        provider: 'custom',
        model: 'scripted-gpt',
        configuration: setup.configuration,
        served: [setup.configuration, 'custom', 'scripted-gpt'],
        beUser: 31,
        source: 'headless_cms',
        success: 1,
        errorClass: '',
        input,
        output,
        responseModel: 'scripted-gpt',
        cacheHit: 0,
        fallbacks: 0,
        routing: '',
        facts: null,
      })),
    );
    const costs = rows.map((row) => Number(row.actual_cost));
    expect(costs.reduce((sum, cost) => sum + cost, 0)).toBeCloseTo(run.estimatedCost!, 6);
    expect(costs.every((cost) => cost > 0)).toBe(true);
    for (const row of rows) expect(Number(row.crdate)).toBeGreaterThan(0);
    const text = JSON.stringify(rows);
    for (const content of ['confidential', 'secret', 'Sixteen', '2 + 2']) expect(text).not.toContain(content);
  });

  test('an unpriced call has a NULL cost, never 0; a failed call leaves one row with success 0 and its error class only; a dry run leaves none', async () => {
    const setup = await kit.setup();
    setup.provider.script({ text: 'Free.', usage: { prompt: 5, completion: 1 } });
    const free = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
    const [freeRow] = await rowsOf(free.id);
    expect(freeRow).toMatchObject({ operation: 'chat', actual_cost: null });
    expect(numberOrNull(freeRow!.actual_input_tokens)).toBe(5);

    setup.provider.script({ status: 500, errorBody: '{"error":{"message":"down with a private detail"}}' });
    const failed = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
    expect(failed.terminationReason).toBe('provider_failed');
    const failedRows = await rowsOf(failed.id);
    expect(failedRows).toHaveLength(1);
    expect(failedRows[0]).toMatchObject({ actual_input_tokens: null, actual_output_tokens: null, actual_cost: null, response_model: '' });
    expect(Number(failedRows[0]!.success)).toBe(0);
    expect(failedRows[0]!.error_class).toMatch(/^[A-Za-z]+$/);
    expect(JSON.stringify(failedRows)).not.toContain('private detail');

    const dry = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', dryRun: true })).id);
    expect(dry.terminationReason).toBe('dry_run');
    expect(await rowsOf(dry.id)).toEqual([]);
  });

  test('without tx_nrllm_telemetry (a TYPO3 site on an older nr_llm) a call is still booked in the ledger, and the run completes', async () => {
    const setup = await kit.setup();
    const booked = async () =>
      Number(
        ((await t.database.query(
          'SELECT COALESCE(SUM(request_count), 0) AS n FROM tx_nrllm_service_usage WHERE configuration_uid = (SELECT uid FROM tx_nrllm_configuration WHERE identifier = ?)',
          [setup.configuration],
        )) as Row[])[0]!.n,
      );
    await t.database.query('ALTER TABLE tx_nrllm_telemetry RENAME TO telemetry_put_aside');
    try {
      setup.provider.script({ text: 'Booked.', usage: { prompt: 5, completion: 1 } }, { text: 'Booked again.', usage: { prompt: 5, completion: 1 } });
      for (const _ of [1, 2]) {
        const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [] })).id);
        expect(run.status).toBe('COMPLETED');
      }
      expect(await booked()).toBe(2);
    } finally {
      await t.database.query('ALTER TABLE telemetry_put_aside RENAME TO tx_nrllm_telemetry');
    }
  });
});
