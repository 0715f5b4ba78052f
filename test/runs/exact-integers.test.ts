/**
 * Integers beyond 2^53 in a configuration's `options` JSON (issue 12): a run
 * sends them to the provider with their digits — `"seed":9007199254740993`,
 * not the `…992` a JavaScript number would make of it — in every wire
 * family, for the configuration as it is and for a release of it; the
 * suspended state of a waiting run keeps them too. A real server, real
 * provider sockets, the request bodies as received.
 */
import { anthropicKit } from '../adapters/fixtures/anthropic';
import { geminiKit } from '../adapters/fixtures/gemini';
import { ollamaKit } from '../adapters/fixtures/ollama';
import { openAiKit } from '../adapters/fixtures/openai';
import { FakeProvider } from '../adapters/support/fake-provider';
import type { ProviderKit } from '../adapters/support/kit';
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { API_KEY, RunKit, sleep, uniqueIdentifier } from './run-kit';

const SEED = '9007199254740993';
/** What a JavaScript number makes of SEED. */
const ROUNDED = '9007199254740992';
const OPTIONS = `{"seed":${SEED}}`;

describe.each(testDialects)('integers beyond 2^53 in options reach the provider with their digits (%s)', (dialect) => {
  let ts: TestServer;
  const kit = new RunKit(() => ts);
  const fakes: FakeProvider[] = [];

  beforeAll(async () => {
    ts = await startTestServer(dialect);
  });
  afterAll(async () => {
    await ts?.stop();
    await kit.closeProviders();
    await Promise.all(fakes.map((fake) => fake.close()));
  });

  const setOptions = (uid: number, options: string) =>
    ts.ok('mutation($uid: Int!, $options: JSON) { updateConfiguration(uid: $uid, input: { options: $options }) { uid } }', { uid, options });

  test('a run of the configuration sends "seed":9007199254740993, streamed and whole; the API shows the same digits', async () => {
    const setup = await kit.setup();
    await setOptions(setup.configurationUid, OPTIONS);
    setup.provider.script({ text: 'One.', usage: { prompt: 3, completion: 1 } }, { text: 'Two.', usage: { prompt: 3, completion: 1 } });

    const streamed = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Hi', tools: [] })).id);
    const whole = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Hi', tools: [], stream: false })).id);
    expect([streamed.status, whole.status]).toEqual(['COMPLETED', 'COMPLETED']);

    const [first, second] = setup.provider.requests;
    expect(first!.body.stream).toBe(true);
    expect(second!.body.stream).toBeUndefined();
    for (const request of [first!, second!]) {
      expect(request.text).toContain(`"seed":${SEED}`);
      expect(request.text).not.toContain(ROUNDED);
      // Safe numbers are still read and sent as numbers.
      expect(request.body).toMatchObject({ model: 'scripted-gpt', temperature: expect.any(Number) });
    }

    const body = await ts.gqlText('query($uid: Int) { configuration(uid: $uid) { options callOptions } }', { uid: setup.configurationUid });
    expect(body).toContain(`"options":{"seed":${SEED}}`);
    expect(body).toContain(`"seed":${SEED}}`);
    expect(body).not.toContain(ROUNDED);
  });

  test('a run of a release sends the frozen options with the same digits', async () => {
    const setup = await kit.setup();
    await setOptions(setup.configurationUid, `{"seed":${SEED},"metadata":{"ids":[-${SEED},1]}}`);
    const published = await ts.gqlText('mutation($identifier: String!) { publishConfiguration(identifier: $identifier, label: "production") { callOptions } }', { identifier: setup.configuration });
    expect(published).toContain(`"seed":${SEED},"metadata":{"ids":[-${SEED},1]}`);
    // Changed afterwards: the release still sends what it froze.
    await setOptions(setup.configurationUid, '{"seed":1}');

    setup.provider.script({ text: 'Released.', usage: { prompt: 3, completion: 1 } });
    const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt: 'Hi', tools: [], label: 'production' })).id);
    expect(run.status).toBe('COMPLETED');
    const sent = setup.provider.requests[0]!;
    expect(sent.text).toContain(`"seed":${SEED},"metadata":{"ids":[-${SEED},1]}`);
    expect(sent.text).not.toContain(ROUNDED);
  });

  test('a run waiting for approval keeps max_tokens beyond 2^53 in suspended_state, as TYPO3 reads it', async () => {
    const setup = await kit.setup();
    await setOptions(setup.configurationUid, `{"max_tokens":${SEED},"response_format":{"type":"json_object","n":${SEED}}}`);
    setup.provider.script(
      { toolCalls: [{ id: 'call_a', name: 'calculator', arguments: { expression: '2 + 2' } }], usage: { prompt: 5, completion: 5 } },
      { text: 'Four.', usage: { prompt: 5, completion: 5 } },
    );
    const { id } = await kit.startRun({ configuration: setup.configuration, prompt: 'compute', tools: ['calculator'], approvalRequired: ['calculator'] });
    const state = await waitForSuspendedState(id);
    expect(state).toContain(`"max_tokens":${SEED}`);
    expect(state).toContain(`"response_format":{"type":"json_object","n":${SEED}}`);
    expect(state).not.toContain(ROUNDED);
    expect(setup.provider.requests[0]!.text).toContain(`"max_tokens":${SEED}`);

    await ts.ok('mutation($runId: ID!, $decisions: [ToolDecisionInput!]!) { resolveToolApproval(runId: $runId, decisions: $decisions) { id } }', {
      runId: id,
      decisions: [{ toolCallId: 'call_a', approve: true }],
    });
    expect((await kit.waitForRun(id)).status).toBe('COMPLETED');
    expect(setup.provider.requests[1]!.text).toContain(`"max_tokens":${SEED}`);
  });

  async function waitForSuspendedState(id: string): Promise<string> {
    const deadline = Date.now() + 15_000;
    for (;;) {
      const rows = (await ts.database.query('SELECT status, suspended_state AS state FROM tx_nrllm_agentrun WHERE uuid = ?', [id])) as { status: string; state: string | null }[];
      if (rows[0]?.state) return rows[0].state;
      if (Date.now() > deadline) throw new Error(`run ${id} is ${rows[0]?.status} without a suspended state`);
      await sleep(20);
    }
  }

  /** Each wire family with the option that carries the seed (Anthropic has no seed: its top_k carries the integer). */
  const FAMILIES: readonly [string, ProviderKit, string, readonly string[]][] = [
    ['openai', openAiKit, OPTIONS, [`"seed":${SEED}`]],
    ['groq', openAiKit, OPTIONS, [`"seed":${SEED}`]],
    ['mistral', openAiKit, OPTIONS, [`"random_seed":${SEED}`]],
    ['anthropic', anthropicKit, `{"top_k":${SEED}}`, [`"top_k":${SEED}`]],
    ['gemini', geminiKit, OPTIONS, [`"generationConfig":{`, `"seed":${SEED}`]],
    ['ollama', ollamaKit, OPTIONS, [`"options":{`, `"seed":${SEED}`]],
  ];

  test.each(FAMILIES)('the %s wire body carries it with its digits', async (adapterType, providerKit, options, expected) => {
    const fake = await FakeProvider.start();
    fakes.push(fake);
    const provider = uniqueIdentifier('prov');
    const model = uniqueIdentifier('model');
    const configuration = uniqueIdentifier('conf');
    await ts.ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: provider, name: provider, adapterType, endpointUrl: fake.url, apiKey: API_KEY, maxRetries: 0, apiTimeout: 30 },
    });
    await ts.ok('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', { input: { identifier: model, name: model, provider, modelId: 'test-model-1' } });
    await ts.ok('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: configuration, name: configuration, model, options } });

    fake.enqueue({ body: providerKit.scenarios.text.stream, headers: { 'content-type': providerKit.streamContentType } });
    fake.enqueue({ body: JSON.stringify(providerKit.scenarios.text.body) });
    const streamed = await kit.waitForRun((await kit.startRun({ configuration, prompt: 'Hi', tools: [] })).id);
    const whole = await kit.waitForRun((await kit.startRun({ configuration, prompt: 'Hi', tools: [], stream: false })).id);
    expect([streamed.status, whole.status]).toEqual(['COMPLETED', 'COMPLETED']);
    expect(fake.requests).toHaveLength(2);
    for (const request of fake.requests) {
      for (const text of expected) expect(request.text).toContain(text);
      expect(request.text).not.toContain(ROUNDED);
    }
  });
});
