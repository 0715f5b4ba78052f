/**
 * Secrets stay secret: a provider key, an API token and the administrator
 * token never appear in the log (captured at level trace), the key is never
 * readable through GraphQL, and it is stored encrypted.
 */
import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { testDialects } from '../support/databases';
import { unique } from '../support/factories';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { captureLog, type CapturedLog } from './support/log-capture';

const PROVIDER_KEY = 'sk-secret-abc123';
const ROTATED_KEY = 'sk-secret-rotated-xyz789';

interface Scripted {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

/** An OpenAI-compatible endpoint that answers scripted responses and records the headers it received. */
async function startFakeProvider() {
  const queue: Scripted[] = [];
  const received: IncomingHttpHeaders[] = [];
  const server = http.createServer((request, response) => {
    request.resume();
    request.on('end', () => {
      received.push(request.headers);
      const next = queue.shift() ?? { status: 599, body: 'nothing scripted' };
      response.writeHead(next.status, { 'content-type': 'application/json', ...next.headers }).end(next.body);
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    url: `http://127.0.0.1:${port}/v1`,
    queue,
    received,
    close: () => {
      server.closeAllConnections();
      return new Promise<void>((resolve) => server.close(() => resolve()));
    },
  };
}

/** What careless providers do: repeat the key they were sent in the error. */
const echoingError = (status: number, key: string) => ({
  status,
  body: JSON.stringify({ error: { message: `Incorrect API key provided: ${key}. You can find your API key at https://example.invalid`, type: 'invalid_request_error', code: 'invalid_api_key' } }),
});

/** A selection of every field of a type, object fields as { __typename }. */
async function allFieldsOf(t: TestServer, typeName: string): Promise<string> {
  type TypeRef = { kind: string; ofType: TypeRef | null };
  const { __type } = await t.ok<{ __type: { fields: { name: string; args: unknown[]; type: TypeRef }[] } }>(
    'query($name: String!) { __type(name: $name) { fields { name args { name } type { kind ofType { kind ofType { kind ofType { kind } } } } } } }',
    { name: typeName },
  );
  const leafKind = (type: TypeRef): string => (type.ofType ? leafKind(type.ofType) : type.kind);
  return __type.fields
    .filter((field) => field.args.length === 0)
    .map((field) => (['SCALAR', 'ENUM'].includes(leafKind(field.type)) ? field.name : `${field.name} { __typename }`))
    .join(' ');
}

describe.each(testDialects)('secrets are never logged nor readable (%s)', (dialect) => {
  let t: TestServer;
  let log: CapturedLog;
  let fake: Awaited<ReturnType<typeof startFakeProvider>>;
  let apiToken: string;
  const responses: string[] = [];
  const provider = unique('secret_prov');
  const model = unique('secret_model');

  /** Every GraphQL answer is kept, to be searched for secrets at the end. */
  const call = async <T>(query: string, variables: Record<string, unknown> = {}, token: string | null = ADMIN_TOKEN) => {
    const result = await t.gql<T>(query, variables, token);
    responses.push(JSON.stringify(result));
    return result;
  };
  const ok = async <T>(query: string, variables: Record<string, unknown> = {}, token: string | null = ADMIN_TOKEN): Promise<T> => {
    const result = await call<T>(query, variables, token);
    if (result.errors?.length) throw new Error(`GraphQL errors: ${JSON.stringify(result.errors)}`);
    return result.data as T;
  };

  beforeAll(async () => {
    log = captureLog('trace');
    fake = await startFakeProvider();
    t = await startTestServer(dialect, { server: { logger: log.logger } });

    await ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: provider, name: 'Secret provider', adapterType: 'custom', endpointUrl: fake.url, apiKey: PROVIDER_KEY, maxRetries: 1 },
    });
    await ok('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', {
      input: { identifier: model, name: 'Secret model', provider, modelId: 'secret-model-1' },
    });
    const created = await ok<{ createApiToken: { token: string } }>('mutation { createApiToken(name: "secrets test", role: EDITOR) { token } }');
    apiToken = created.createApiToken.token;

    // Queries with the new token, including refused ones.
    await ok('{ snippets { uid } providers { identifier hasApiKey } models { identifier } }', {}, apiToken);
    await call('mutation { createApiToken(name: "not allowed", role: ADMIN) { token } }', {}, apiToken);
    await call('{ snippets { uid } }', {}, `${apiToken}-wrong`);

    // The provider answers with the key in its error: once through testProvider, once in a run with a retry.
    fake.queue.push(echoingError(401, PROVIDER_KEY));
    await ok(`mutation { testProvider(identifier: "${provider}") { ok error } }`);
    const configuration = unique('secret_conf');
    await ok('mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid } }', {
      input: { identifier: configuration, name: 'Secret configuration', model, systemPrompt: 'Be brief.' },
    });
    fake.queue.push({ ...echoingError(503, PROVIDER_KEY), headers: { 'retry-after': '0' } }, echoingError(401, PROVIDER_KEY));
    const started = await ok<{ startRun: { id: string } }>(
      'mutation($input: StartRunInput!) { startRun(input: $input) { id } }',
      { input: { configuration, prompt: 'Hello', tools: [], stream: false } },
      apiToken,
    );
    const deadline = Date.now() + 15_000;
    for (;;) {
      const { run } = await ok<{ run: { status: string } }>(
        'query($id: ID!) { run(id: $id) { status error terminationReason finalContent steps { kind content error raw } } }',
        { id: started.startRun.id },
      );
      if (!['QUEUED', 'RUNNING'].includes(run.status)) break;
      if (Date.now() > deadline) throw new Error('the run did not finish');
      await new Promise((resolve) => setTimeout(resolve, 50));
    }

    // The key rotated, and a failing write that carries it.
    await ok('mutation($uid: Int!, $input: UpdateProviderInput!) { updateProvider(uid: $uid, input: $input) { uid } }', {
      uid: await providerUid(),
      input: { apiKey: ROTATED_KEY },
    });
    await call('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: provider, name: 'Duplicate', adapterType: 'custom', endpointUrl: fake.url, apiKey: PROVIDER_KEY },
    });
    await call('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: 'x'.repeat(200), name: 'Too long', adapterType: 'custom', endpointUrl: fake.url, apiKey: PROVIDER_KEY },
    });
  });

  async function providerUid(): Promise<number> {
    const { providers } = await ok<{ providers: { uid: number; identifier: string }[] }>('{ providers { uid identifier } }');
    const found = providers.find((row) => row.identifier === provider);
    if (!found) throw new Error('provider not found');
    return found.uid;
  }

  afterAll(async () => {
    await t?.stop();
    await fake?.close();
  });

  it('the key was really used: the provider received it', () => {
    expect(fake.received.length).toBeGreaterThanOrEqual(3);
    expect(fake.received.every((headers) => headers.authorization === `Bearer ${PROVIDER_KEY}`)).toBe(true);
  });

  it('the log was written at trace level, and says what happened', () => {
    const text = log.text();
    expect(text.length).toBeGreaterThan(0);
    expect(text).toMatch(/api token created/);
    expect(text).toMatch(/provider test failed/);
  });

  it('the log contains neither the provider key, nor the API token, nor the administrator token', () => {
    const text = log.text();
    for (const secret of [PROVIDER_KEY, ROTATED_KEY, apiToken, ADMIN_TOKEN]) expect(text).not.toContain(secret);
  });

  it('no GraphQL answer contains the key (including provider errors relayed to the client)', () => {
    expect(responses.length).toBeGreaterThan(10);
    for (const response of responses) {
      expect(response).not.toContain(PROVIDER_KEY);
      expect(response).not.toContain(ROTATED_KEY);
    }
  });

  it('no field of LlmProvider returns the key', async () => {
    const selection = await allFieldsOf(t, 'LlmProvider');
    expect(selection).toContain('hasApiKey');
    const result = await ok<{ providers: Record<string, unknown>[] }>(`{ providers { ${selection} } }`);
    const mine = result.providers.find((row) => row.identifier === provider);
    expect(mine?.hasApiKey).toBe(true);
    const text = JSON.stringify(result);
    expect(text).not.toContain(PROVIDER_KEY);
    expect(text).not.toContain(ROTATED_KEY);
    expect(text).not.toMatch(/sk-secret/);
  });

  it('the api_key column holds an encrypted value, not the key', async () => {
    const rows = (await t.database.query('SELECT api_key FROM tx_nrllm_provider WHERE identifier = ?', [provider])) as { api_key: string }[];
    expect(rows).toHaveLength(1);
    const stored = rows[0]?.api_key ?? '';
    expect(stored.length).toBeGreaterThan(ROTATED_KEY.length);
    expect(stored).not.toContain(ROTATED_KEY);
    expect(stored).not.toContain(PROVIDER_KEY);
    expect(stored).not.toContain(Buffer.from(ROTATED_KEY).toString('base64').slice(0, 16));
    expect(stored).not.toContain(Buffer.from(ROTATED_KEY).toString('hex').slice(0, 16));
  });

  it('API tokens are stored hashed only', async () => {
    const rows = (await t.database.query('SELECT * FROM promptwire_api_token')) as Record<string, unknown>[];
    const text = JSON.stringify(rows);
    expect(rows.length).toBeGreaterThanOrEqual(2);
    expect(text).not.toContain(apiToken);
    expect(text).not.toContain(ADMIN_TOKEN);
  });
});

describe.each(testDialects)('a database failure while storing a key (%s)', (dialect) => {
  let t: TestServer;
  let log: CapturedLog;

  beforeAll(async () => {
    log = captureLog('trace');
    t = await startTestServer(dialect, { server: { logger: log.logger } });
    // The statement that carries the (encrypted) key fails, so the driver error, with its parameters, is logged.
    await t.database.query(
      dialect === 'sqlite'
        ? "CREATE TRIGGER refuse_providers BEFORE INSERT ON tx_nrllm_provider BEGIN SELECT RAISE(ABORT, 'refused by a test trigger'); END"
        : "CREATE TRIGGER refuse_providers BEFORE INSERT ON tx_nrllm_provider FOR EACH ROW SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by a test trigger'",
    );
  });

  afterAll(async () => {
    await t?.stop();
  });

  it('logs the failure without the key, and answers INTERNAL_SERVER_ERROR without it', async () => {
    const result = await t.gql('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
      input: { identifier: unique('refused_prov'), name: 'Refused', adapterType: 'custom', endpointUrl: 'http://127.0.0.1:9/v1', apiKey: PROVIDER_KEY },
    });
    expect(result.errors?.[0]?.extensions?.code).toBe('INTERNAL_SERVER_ERROR');
    expect(JSON.stringify(result)).not.toContain(PROVIDER_KEY);

    const text = log.text();
    expect(text).toMatch(/refused by a test trigger/);
    expect(text).not.toContain(PROVIDER_KEY);
    expect(text).not.toContain(ADMIN_TOKEN);
  });
});
