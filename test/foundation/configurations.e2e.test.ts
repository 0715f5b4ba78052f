import { testDialects } from '../support/databases';
import { createConfiguration, createProviderAndModel, createSnippet, unique } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';

interface ConfigurationView {
  effectiveSystemPrompt: string;
  snippetTags: string[];
  selectedSnippets: { identifier: string }[];
  callOptions: Record<string, unknown>;
  skills: { identifier: string }[];
}

const VIEW = 'effectiveSystemPrompt snippetTags selectedSnippets { identifier } skills { identifier }';
const OPTIONS = 'callOptions';

describe.each(testDialects)('configurations through the server on %s', (dialect) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer(dialect);
  });
  afterAll(async () => t?.stop());

  const view = async (uid: number) => (await t.ok<{ configuration: ConfigurationView }>(`query($uid: Int) { configuration(uid: $uid) { ${VIEW} } }`, { uid })).configuration;
  const callOptions = async (uid: number) => (await t.ok<{ configuration: ConfigurationView }>(`query($uid: Int) { configuration(uid: $uid) { ${OPTIONS} } }`, { uid })).configuration.callOptions;

  it('composes the example of behaviour.md §4 byte for byte', async () => {
    const persona = unique('persona');
    const tone = unique('tone');
    await createSnippet(t, { name: 'Nova persona', snippet: '  You are Nova, a friendly expert.\n', tags: [persona] });
    await createSnippet(t, { name: 'Formal tone', snippet: 'Use a formal, professional tone of voice.', tags: [tone] });
    const configuration = await createConfiguration(t, { systemPrompt: 'You are a helpful assistant.', snippetTags: [` ${persona.toUpperCase()} `, tone, persona] });
    const result = await view(configuration.uid);
    expect(result.snippetTags).toEqual([persona, tone]);
    expect(result.effectiveSystemPrompt).toBe(
      'You are a helpful assistant.\n\nNova persona:\nYou are Nova, a friendly expert.\n\nFormal tone:\nUse a formal, professional tone of voice.',
    );
  });

  it('leaves the prompt byte-identical when no snippet is selected', async () => {
    const prompt = 'Keep  me\n exactly \n\n';
    const configuration = await createConfiguration(t, { systemPrompt: prompt, snippetTags: [unique('nothing_tagged')] });
    expect((await view(configuration.uid)).effectiveSystemPrompt).toBe(prompt);
  });

  it('an empty prompt becomes the block alone; neither prompt nor tags gives ""', async () => {
    const tag = unique('only');
    await createSnippet(t, { name: 'Only', snippet: 'Block text', tags: [tag] });
    expect((await view((await createConfiguration(t, { snippetTags: [tag] })).uid)).effectiveSystemPrompt).toBe('Only:\nBlock text');
    expect((await view((await createConfiguration(t, {})).uid)).effectiveSystemPrompt).toBe('');
  });

  it('a hidden snippet is not composed, an inactive one is not selected, and a snippet with two selected tags appears once', async () => {
    const a = unique('a');
    const b = unique('b');
    const both = await createSnippet(t, { name: 'Both', snippet: 'in both', tags: [a, b] });
    await createSnippet(t, { name: 'Hidden', snippet: 'secret', tags: [a], hidden: true });
    await createSnippet(t, { name: 'Off', snippet: 'off', tags: [b], isActive: false });
    const second = await createSnippet(t, { name: 'Second', snippet: 'second', tags: [b], sorting: 5 });
    const result = await view((await createConfiguration(t, { systemPrompt: 'P', snippetTags: [a, b] })).uid);
    expect(result.selectedSnippets.map((s) => s.identifier)).toEqual([both.identifier, second.identifier]);
    expect(result.effectiveSystemPrompt).toBe('P\n\nBoth:\nin both\n\nSecond:\nsecond');
  });

  it('two snippets sharing a name both appear, in tag order then sorting and name', async () => {
    const tag = unique('same');
    const other = unique('other');
    await createSnippet(t, { name: 'Same', snippet: 'second', tags: [tag], sorting: 2 });
    await createSnippet(t, { name: 'Same', snippet: 'first', tags: [tag], sorting: 1 });
    await createSnippet(t, { name: 'Earlier tag', snippet: 'zero', tags: [other], sorting: 9 });
    const result = await view((await createConfiguration(t, { snippetTags: [other, tag] })).uid);
    expect(result.effectiveSystemPrompt).toBe('Earlier tag:\nzero\n\nSame:\nfirst\n\nSame:\nsecond');
  });

  it('builds the call options of behaviour.md §5', async () => {
    const { model } = await createProviderAndModel(t, { maxOutputTokens: 4096 });
    const tag = unique('opt');
    await createSnippet(t, { name: 'Style', snippet: 'Be brief.', tags: [tag] });
    const configuration = await createConfiguration(t, {
      model,
      systemPrompt: 'Base',
      snippetTags: [tag],
      temperature: 0.3,
      topP: 0.9,
      maxTokens: 0,
      options: { seed: 7, temperature: 1.1 },
    });
    const options = await callOptions(configuration.uid);
    expect(options).toEqual({
      temperature: 1.1,
      top_p: 0.9,
      frequency_penalty: 0,
      presence_penalty: 0,
      max_tokens: 4096,
      system_prompt: 'Base\n\nStyle:\nBe brief.',
      model: 'test-model',
      timeout: 120,
      seed: 7,
    });
    const withoutPrompt = await callOptions((await createConfiguration(t, { model, maxTokens: 0 })).uid);
    expect(withoutPrompt).not.toHaveProperty('system_prompt');
    expect(withoutPrompt).toHaveProperty('max_tokens', 4096);
  });

  it('options sent as JSON text are stored as given: integers beyond 2^53, 0.0 and key order reach the call options', async () => {
    const { model } = await createProviderAndModel(t, { maxOutputTokens: 4096 });
    const configuration = await createConfiguration(t, { model, maxTokens: 0, options: ' {"seed": 9007199254740993, "max_tokens": 0.0, "b": 2, "1": "a"} ' });
    const stored = (await t.database.query('SELECT options FROM tx_nrllm_configuration WHERE uid = ?', [configuration.uid])) as { options: string }[];
    expect(stored[0].options).toBe('{"seed":9007199254740993,"max_tokens":0.0,"b":2,"1":"a"}');
    const body = await t.gqlText('query($uid: Int) { configuration(uid: $uid) { options callOptions } }', { uid: configuration.uid });
    expect(body).toContain('"options":{"seed":9007199254740993,"max_tokens":0.0,"b":2,"1":"a"}');
    expect(body).toContain('"timeout":120,"seed":9007199254740993,"max_tokens":0.0,"b":2,"0":"a"}');
  });

  it('a configuration without a model has no call options: null and nr_llm\'s error', async () => {
    const configuration = await createConfiguration(t, { identifier: unique('c'), systemPrompt: 'x' });
    const result = await t.gql<{ configuration: { identifier: string; callOptions: unknown } }>('query($uid: Int) { configuration(uid: $uid) { identifier callOptions } }', { uid: configuration.uid });
    expect(result.data?.configuration).toEqual({ identifier: configuration.identifier, callOptions: null });
    expect(result.errors?.map((error) => [error.message, error.extensions?.code])).toEqual([[`Configuration "${configuration.identifier}" has no model assigned`, 'NOT_FOUND']]);
  });

  it('keeps the skills in the given order', async () => {
    const skills = [unique('skill_b'), unique('skill_a')];
    for (const identifier of skills) {
      await t.ok('mutation($input: CreateSkillInput!) { createSkill(input: $input) { uid } }', { input: { identifier, name: identifier, body: `Body of ${identifier}`, enabled: true } });
    }
    const configuration = await createConfiguration(t, { skills });
    expect((await view(configuration.uid)).skills.map((s) => s.identifier)).toEqual(skills);
    await t.ok('mutation($uid: Int!, $skills: [String!]) { updateConfiguration(uid: $uid, input: { skills: $skills }) { uid } }', { uid: configuration.uid, skills: [skills[1]] });
    expect((await view(configuration.uid)).skills.map((s) => s.identifier)).toEqual([skills[1]]);
  });

  describe('refuses bad input and changes nothing', () => {
    it.each([
      ['temperature above 2', { temperature: 2.5 }, 'BAD_USER_INPUT', 'temperature'],
      ['temperature below 0', { temperature: -0.1 }, 'BAD_USER_INPUT', 'temperature'],
      ['top_p above 1', { topP: 1.5 }, 'BAD_USER_INPUT', 'topP'],
      ['a frequency penalty below -2', { frequencyPenalty: -2.5 }, 'BAD_USER_INPUT', 'frequencyPenalty'],
      ['a presence penalty above 2', { presencePenalty: 3 }, 'BAD_USER_INPUT', 'presencePenalty'],
      ['negative max tokens', { maxTokens: -1 }, 'BAD_USER_INPUT', 'maxTokens'],
      ['options that are not an object', { options: [1] }, 'BAD_USER_INPUT', 'options'],
      ['a snippet tag with a comma', { snippetTags: ['x,y'] }, 'BAD_USER_INPUT', 'snippetTags'],
      ['an unknown model', { model: 'no-such-model' }, 'NOT_FOUND', 'model'],
      ['an unknown skill', { skills: ['no-such-skill'] }, 'NOT_FOUND', 'skills'],
    ])('%s', async (_label, input, code, field) => {
      const configuration = await createConfiguration(t, { systemPrompt: 'Stable', temperature: 0.5 });
      const result = await t.gql('mutation($uid: Int!, $input: UpdateConfigurationInput!) { updateConfiguration(uid: $uid, input: $input) { uid } }', {
        uid: configuration.uid,
        input: { ...input, name: 'Changed name' },
      });
      expect(result.errors?.[0]?.extensions).toMatchObject({ code, field });
      const after = await t.ok<{ configuration: { name: string; temperature: number; systemPrompt: string } }>(
        'query($uid: Int) { configuration(uid: $uid) { name temperature systemPrompt } }',
        { uid: configuration.uid },
      );
      expect(after.configuration).toEqual({ name: 'Configuration', temperature: 0.5, systemPrompt: 'Stable' });
    });
  });
});

describe.each(testDialects)('providers and models through the server on %s', (dialect) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer(dialect);
  });
  afterAll(async () => t?.stop());

  it('keeps the API key write-only and encrypted at rest', async () => {
    const identifier = unique('keyed');
    const data = await t.ok<{ createProvider: Record<string, unknown> }>(
      'mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid hasApiKey apiKeySource adapterType } }',
      { input: { identifier, name: 'Keyed', adapterType: 'OpenAI', apiKey: 'sk-very-secret-123' } },
    );
    expect(data.createProvider).toMatchObject({ hasApiKey: true, apiKeySource: 'stored', adapterType: 'openai' });
    const rows = (await t.database.query('SELECT api_key FROM tx_nrllm_provider WHERE identifier = ?', [identifier])) as { api_key: string }[];
    expect(rows[0]?.api_key).toMatch(/^pwenc:v1:/);
    expect(rows[0]?.api_key).not.toContain('sk-very-secret-123');
    const env = await t.ok<{ updateProvider: Record<string, unknown> }>('mutation($uid: Int!) { updateProvider(uid: $uid, input: { apiKey: "env:PROMPTWIRE_PROVIDER_KEY_OPENAI" }) { apiKeySource } }', {
      uid: data.createProvider.uid,
    });
    expect(env.updateProvider.apiKeySource).toBe('environment');
    const cleared = await t.ok<{ updateProvider: Record<string, unknown> }>('mutation($uid: Int!) { updateProvider(uid: $uid, input: { apiKey: null }) { hasApiKey } }', {
      uid: data.createProvider.uid,
    });
    expect(cleared.updateProvider.hasApiKey).toBe(false);
  });

  it.each([
    ['an unknown adapter type', { adapterType: 'skynet' }, 'BAD_USER_INPUT', 'adapterType'],
    ['a custom provider without endpoint', { adapterType: 'custom' }, 'BAD_USER_INPUT', 'endpointUrl'],
    ['an endpoint that is not a URL', { adapterType: 'openai', endpointUrl: 'not a url' }, 'BAD_USER_INPUT', 'endpointUrl'],
  ])('refuses a provider with %s', async (_label, input, code, field) => {
    const result = await t.gql('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', { input: { identifier: unique('p'), name: 'P', ...input } });
    expect(result.errors?.[0]?.extensions).toMatchObject({ code, field });
  });

  it.each([
    ['a negative input cost', { costInput: -1 }, 'BAD_USER_INPUT', 'costInput'],
    ['a negative context length', { contextLength: -5 }, 'BAD_USER_INPUT', 'contextLength'],
    ['an unknown provider', { provider: 'nope' }, 'NOT_FOUND', 'provider'],
    ['an empty model id', { modelId: ' ' }, 'BAD_USER_INPUT', 'modelId'],
  ])('refuses a model with %s', async (_label, input, code, field) => {
    const { provider } = await createProviderAndModel(t);
    const result = await t.gql('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', {
      input: { identifier: unique('m'), name: 'M', provider, modelId: 'x', ...input },
    });
    expect(result.errors?.[0]?.extensions).toMatchObject({ code, field });
  });

  it('lists models with their provider and extra prices', async () => {
    const { model, provider } = await createProviderAndModel(t, { costInput: 250, costOutput: 1000 });
    const models = (await t.ok<{ models: { identifier: string; costInput: number; provider: { identifier: string } }[] }>('{ models { identifier costInput provider { identifier } } }')).models;
    expect(models.find((m) => m.identifier === model)).toEqual({ identifier: model, costInput: 250, provider: { identifier: provider } });
  });

  it('refuses to delete a model a configuration uses, and a provider a model uses', async () => {
    const { model, provider } = await createProviderAndModel(t);
    await createConfiguration(t, { model });
    const models = (await t.ok<{ models: { uid: number; identifier: string }[] }>('{ models { uid identifier } }')).models;
    const modelUid = models.find((m) => m.identifier === model)?.uid;
    expect((await t.gql('mutation($uid: Int!) { deleteModel(uid: $uid) }', { uid: modelUid })).errors?.[0]?.extensions?.code).toBe('CONFLICT');
    const providers = (await t.ok<{ providers: { uid: number; identifier: string }[] }>('{ providers { uid identifier } }')).providers;
    const providerUid = providers.find((p) => p.identifier === provider)?.uid;
    expect((await t.gql('mutation($uid: Int!) { deleteProvider(uid: $uid) }', { uid: providerUid })).errors?.[0]?.extensions?.code).toBe('CONFLICT');
  });
});
