/**
 * A run of a release whose instance is killed in the middle of a provider
 * call: the restarted service prepares it again from its stored request and
 * sends the same frozen release, although the snippet and the configuration
 * were edited and the label was moved meanwhile.
 */
import { testDialects } from '../support/databases';
import { Instances, waitForRunEnd } from '../support/instances';
import { uniqueIdentifier } from '../runs/run-kit';
import { gate } from '../runs/scripted-provider';

const LEASE = { RUN_LEASE_SECONDS: '3' };

interface RunView {
  status: string;
  finalContent: string | null;
  releaseLabel: string | null;
  release: { id: string } | null;
  snippetVersions: { identifier: string; version: number }[];
  steps: { sequence: number; kind: string; messagesSent: { role: string; content: string | null }[] | null }[];
}

const RUN = 'status finalContent releaseLabel release { id } snippetVersions { identifier version } steps { sequence kind messagesSent { role content } }';

describe.each(testDialects)('a release run taken over after a crash (%s)', (dialect) => {
  const instances = new Instances(dialect);
  afterEach(() => instances.stop(), 60_000);

  test('the restarted service sends the frozen release again, not what was edited or published since', async () => {
    const database = await instances.database();
    const provider = await instances.provider();
    const first = await instances.start(LEASE);

    const tag = uniqueIdentifier('tone');
    const providerId = uniqueIdentifier('prov');
    const modelId = uniqueIdentifier('model');
    const configuration = uniqueIdentifier('conf');
    await first.ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: providerId, name: 'Scripted', adapterType: 'custom', endpointUrl: provider.url, apiKey: 'test-key', maxRetries: 0 },
    });
    await first.ok('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', { input: { identifier: modelId, name: 'M', provider: providerId, modelId: 'scripted' } });
    const snippet = (
      await first.ok<{ createSnippet: { uid: number; identifier: string } }>('mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid identifier } }', {
        input: { identifier: uniqueIdentifier('snip'), name: 'Tone', snippet: 'Frozen words.', tags: [tag] },
      })
    ).createSnippet;
    const created = await first.ok<{ createConfiguration: { uid: number } }>('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', {
      input: { identifier: configuration, name: 'C', model: modelId, systemPrompt: 'Released prompt.', snippetTags: [tag], temperature: 0.4 },
    });
    const release = (
      await first.ok<{ publishConfiguration: { id: string; effectiveSystemPrompt: string } }>('mutation($c: String!) { publishConfiguration(identifier: $c, label: "production") { id effectiveSystemPrompt } }', {
        c: configuration,
      })
    ).publishConfiguration;

    provider.script({ text: 'never sent', gate: gate().promise }, { text: 'Finished after the restart.', usage: { prompt: 3, completion: 4 } });
    const started = await first.ok<{ startRun: { id: string } }>('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', {
      input: { configuration, prompt: 'hello', tools: [], label: 'production' },
    });
    await provider.waitForRequest(1);

    // While the call is in flight: edits through GraphQL and in the table, and the label moves.
    await first.ok('mutation($uid: Int!) { updateConfiguration(uid: $uid, input: { systemPrompt: "Edited prompt.", temperature: 1.2 }) { uid } }', { uid: created.createConfiguration.uid });
    await database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', ['Edited in TYPO3.', Math.floor(Date.now() / 1000) + 1, snippet.uid]);
    const moved = (await first.ok<{ publishConfiguration: { id: string } }>('mutation($c: String!) { publishConfiguration(identifier: $c, label: "production") { id } }', { c: configuration })).publishConfiguration;
    expect(moved.id).not.toBe(release.id);
    await first.kill();

    const second = await instances.start({ ...LEASE, RUN_MIGRATIONS: 'false' });
    const run = await waitForRunEnd<RunView>(second, started.startRun.id, RUN);
    expect(run).toMatchObject({ status: 'COMPLETED', finalContent: 'Finished after the restart.', releaseLabel: 'production', release: { id: release.id } });
    expect(run.snippetVersions).toEqual([{ identifier: snippet.identifier, version: 1 }]);
    expect(provider.requests).toHaveLength(2);
    expect(provider.requests[1]!.body.messages).toEqual(provider.requests[0]!.body.messages);
    expect((provider.requests[1]!.body.messages as { role: string; content: string }[])[0]).toEqual({ role: 'system', content: release.effectiveSystemPrompt });
    expect(provider.requests[1]!.body.temperature).toBe(0.4);
    // The call made again is the stored REQUEST, sent a second time: one REQUEST step, the release's prompt.
    const requests = run.steps.filter((step) => step.kind === 'REQUEST');
    expect(requests).toHaveLength(1);
    expect(requests[0]!.messagesSent![0]).toEqual({ role: 'system', content: release.effectiveSystemPrompt });
    expect(run.steps.map((step) => step.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'END']);
  }, 90_000);
});
