/**
 * Input that would be stored differently from what was sent, or that one
 * database would take and the other refuse, is refused the same way on both
 * with BAD_USER_INPUT naming the field, and nothing is written.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { testDialects } from '../support/databases';
import { createConfiguration, createProviderAndModel, unique } from '../support/factories';
import { collect, startTestServer, type TestServer } from '../support/server';

const CREATE_SNIPPET = 'mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid identifier snippet } }';

describe.each(testDialects)('input stored as sent, limits as the column counts (%s)', (dialect) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { PROVIDER_KEY_ENV_ALLOW: 'LISTED_PROVIDER_KEY', LISTED_PROVIDER_KEY: 'listed-key' } });
  });
  afterAll(async () => t?.stop());

  async function snippetCount(identifier: string): Promise<number> {
    const rows = (await t.database.query('SELECT COUNT(*) AS n FROM tx_nrllm_promptsnippet WHERE identifier = ?', [identifier])) as { n: number | string }[];
    return Number(rows[0]?.n);
  }

  test('a lone surrogate in text is refused, not stored as U+FFFD', async () => {
    const identifier = unique('surrogate');
    const result = await t.gql(CREATE_SNIPPET, { input: { identifier, name: 'n', snippet: 'broken \ud800 text' } });
    expect(result.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'snippet' });
    const inKey = await t.gql(CREATE_SNIPPET, { input: { identifier, name: 'n', snippet: 's', metadata: { ['k\udc00']: 1 } } });
    expect(inKey.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(await snippetCount(identifier)).toBe(0);
    // A surrogate pair is a well-formed character and is stored as sent.
    const emoji = await t.ok<{ createSnippet: { snippet: string } }>(CREATE_SNIPPET, { input: { identifier, name: 'n', snippet: 'ok \ud83d\ude00' } });
    expect(emoji.createSnippet.snippet).toBe('ok 😀');
  });

  test('a lone surrogate is refused over graphql-ws too', async () => {
    const watcher = collect(t.wsClient(), 'subscription($id: ID!) { runTrace(runId: $id) { sequence } }', { id: 'run-\udfff' });
    await watcher.done;
    expect(watcher.errors).toHaveLength(1);
    expect(JSON.stringify(watcher.errors[0])).toContain('BAD_USER_INPUT');
  });

  test('an identifier is validated before lower-casing: the Kelvin sign is not turned into k', async () => {
    const result = await t.gql(CREATE_SNIPPET, { input: { identifier: 'kelvin_\u212a', name: 'n', snippet: 's' } });
    expect(result.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'identifier' });
    expect(await snippetCount('kelvin_k')).toBe(0);
    const upper = await t.ok<{ createSnippet: { identifier: string } }>(CREATE_SNIPPET, { input: { identifier: 'Kelvin_K', name: 'n', snippet: 's' } });
    expect(upper.createSnippet.identifier).toBe('kelvin_k');
  });

  test('text columns hold 65,535 bytes of UTF-8, the same on both databases', async () => {
    const identifier = unique('euros');
    const tooMany = await t.gql(CREATE_SNIPPET, { input: { identifier, name: 'n', snippet: '€'.repeat(30_000) } });
    expect(tooMany.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'snippet' });
    expect(tooMany.errors?.[0]?.message).toMatch(/65535 bytes/);
    expect(await snippetCount(identifier)).toBe(0);
    const fits = await t.ok<{ createSnippet: { snippet: string } }>(CREATE_SNIPPET, { input: { identifier, name: 'n', snippet: '€'.repeat(21_845) } });
    expect(fits.createSnippet.snippet).toHaveLength(21_845);
  });

  test('varchar columns hold characters: 255 emoji fit a name, 256 do not', async () => {
    const fits = await t.gql(CREATE_SNIPPET, { input: { identifier: unique('emoji'), name: '😀'.repeat(255), snippet: 's' } });
    expect(fits.errors).toBeUndefined();
    const over = await t.gql(CREATE_SNIPPET, { input: { identifier: unique('emoji'), name: '😀'.repeat(256), snippet: 's' } });
    expect(over.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'name' });
  });

  test('configuration options have a length limit', async () => {
    const result = await t.gql('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', {
      input: { identifier: unique('opts'), name: 'n', options: { stop: ['€'.repeat(22_000)] } },
    });
    expect(result.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'options' });
  });

  test('forcedSnippets has a size limit', async () => {
    const result = await t.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', {
      input: { configuration: 'none', prompt: 'x', forcedSnippets: Array.from({ length: 101 }, (_, i) => `s${i}`) },
    });
    expect(result.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'forcedSnippets' });
  });

  test('an EDITOR may set generation options but not the model an ADMIN chose', async () => {
    const editor = await t.tokenFor('EDITOR');
    const { model } = await createProviderAndModel(t);
    const configuration = await createConfiguration(t, { model, options: { model: 'admin-choice' } });
    const update = 'mutation($uid: Int!, $input: UpdateConfigurationInput!) { updateConfiguration(uid: $uid, input: $input) { options } }';

    const override = await t.gql(update, { uid: configuration.uid, input: { options: { model: 'expensive-model' } } }, editor);
    expect(override.errors?.[0]?.extensions).toEqual({ code: 'FORBIDDEN', field: 'options' });
    const removal = await t.gql(update, { uid: configuration.uid, input: { options: { temperature: 0.1 } } }, editor);
    expect(removal.errors?.[0]?.extensions).toEqual({ code: 'FORBIDDEN', field: 'options' });
    const created = await t.gql('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', { input: { identifier: unique('c'), name: 'n', options: { model: 'x' } } }, editor);
    expect(created.errors?.[0]?.extensions).toEqual({ code: 'FORBIDDEN', field: 'options' });

    const allowed = await t.ok<{ updateConfiguration: { options: unknown } }>(update, { uid: configuration.uid, input: { options: { model: 'admin-choice', temperature: 0.1 } } }, editor);
    expect(allowed.updateConfiguration.options).toEqual({ model: 'admin-choice', temperature: 0.1 });
    const renamed = await t.gql(update, { uid: configuration.uid, input: { name: 'Renamed by an editor' } }, editor);
    expect(renamed.errors).toBeUndefined();
    const byAdmin = await t.ok<{ updateConfiguration: { options: unknown } }>(update, { uid: configuration.uid, input: { options: { model: 'other' } } });
    expect(byAdmin.updateConfiguration.options).toEqual({ model: 'other' });

    // Compared with their digits: an ADMIN's integer beyond 2^53 is not the number JavaScript rounds it to.
    await t.ok(update, { uid: configuration.uid, input: { options: '{"model":"other","budget":9007199254740993}' } });
    const rounded = await t.gql(update, { uid: configuration.uid, input: { options: '{"model":"other","budget":9007199254740992}' } }, editor);
    expect(rounded.errors?.[0]?.extensions).toEqual({ code: 'FORBIDDEN', field: 'options' });
    const kept = await t.gqlText(update, { uid: configuration.uid, input: { options: '{"model":"other","budget":9007199254740993,"seed":9007199254740995}' } }, editor);
    expect(kept).toBe('{"data":{"updateConfiguration":{"options":{"model":"other","budget":9007199254740993,"seed":9007199254740995}}}}\n');
  });
});

describe.each(testDialects)('provider keys from the environment and endpoint changes (%s)', (dialect) => {
  let t: TestServer;
  let receiver: http.Server;
  const seen: (string | undefined)[] = [];
  let endpoint = '';

  beforeAll(async () => {
    receiver = http.createServer((request, response) => {
      seen.push(request.headers.authorization);
      response.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"message":"no"}}');
    });
    await new Promise<void>((resolve) => receiver.listen(0, '127.0.0.1', resolve));
    endpoint = `http://127.0.0.1:${(receiver.address() as AddressInfo).port}/v1`;
    t = await startTestServer(dialect, { env: { PROVIDER_KEY_ENV_ALLOW: 'LISTED_PROVIDER_KEY', LISTED_PROVIDER_KEY: 'listed-key', PROMPTWIRE_PROVIDER_KEY_X: 'prefixed-key' } });
  });
  afterAll(async () => {
    await t?.stop();
    await new Promise((resolve) => receiver.close(resolve));
  });

  const createProvider = (apiKey: string, endpointUrl = endpoint) =>
    t.gql<{ createProvider: { uid: number } }>('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: unique('p'), name: 'p', adapterType: 'custom', endpointUrl, apiKey },
    });
  const testProvider = async (identifier: string) => {
    seen.length = 0;
    await t.ok('mutation($id: String!) { testProvider(identifier: $id, modelId: "m") { ok } }', { id: identifier });
    return seen[0];
  };

  test('env: names only variables with the prefix or on the allow-list', async () => {
    for (const name of ['SECRET_KEY', 'DATABASE_URL', 'ADMIN_TOKEN', 'PATH']) {
      const refused = await createProvider(`env:${name}`);
      expect(refused.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'apiKey' });
    }
    expect((await createProvider('env:PROMPTWIRE_PROVIDER_KEY_X')).errors).toBeUndefined();
    expect((await createProvider('env:LISTED_PROVIDER_KEY')).errors).toBeUndefined();
  });

  test('a row naming another variable (written by someone else) sends no key', async () => {
    const identifier = unique('p');
    await t.ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', { input: { identifier, name: 'p', adapterType: 'custom', endpointUrl: endpoint } });
    await t.database.query("UPDATE tx_nrllm_provider SET api_key = 'env:ADMIN_TOKEN' WHERE identifier = ?", [identifier]);
    expect(await testProvider(identifier)).toBeUndefined();
    await t.database.query("UPDATE tx_nrllm_provider SET api_key = 'env:PROMPTWIRE_PROVIDER_KEY_X' WHERE identifier = ?", [identifier]);
    expect(await testProvider(identifier)).toBe('Bearer prefixed-key');
  });

  test('a stored key is not sent to a changed endpoint unless it is entered again', async () => {
    const created = await createProvider('sk-for-the-first-endpoint');
    const uid = created.data!.createProvider.uid;
    const update = 'mutation($uid: Int!, $input: UpdateProviderInput!) { updateProvider(uid: $uid, input: $input) { endpointUrl hasApiKey } }';
    const moved = await t.gql(update, { uid, input: { endpointUrl: 'http://127.0.0.1:9/elsewhere' } });
    expect(moved.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'apiKey' });
    const retyped = await t.gql(update, { uid, input: { adapterType: 'openai' } });
    expect(retyped.errors?.[0]?.extensions).toEqual({ code: 'BAD_USER_INPUT', field: 'apiKey' });
    const rows = (await t.database.query('SELECT endpoint_url FROM tx_nrllm_provider WHERE uid = ?', [uid])) as { endpoint_url: string }[];
    expect(rows[0]?.endpoint_url).toBe(endpoint);

    const withKey = await t.ok<{ updateProvider: unknown }>(update, { uid, input: { endpointUrl: 'http://127.0.0.1:9/elsewhere', apiKey: 'sk-for-the-new-one' } });
    expect(withKey.updateProvider).toEqual({ endpointUrl: 'http://127.0.0.1:9/elsewhere', hasApiKey: true });
    const cleared = await t.ok<{ updateProvider: unknown }>(update, { uid, input: { endpointUrl: endpoint, apiKey: null } });
    expect(cleared.updateProvider).toEqual({ endpointUrl: endpoint, hasApiKey: false });
    const name = await t.gql(update, { uid, input: { endpointUrl: 'http://127.0.0.1:9/keyless' } });
    expect(name.errors).toBeUndefined();
  });
});
