/**
 * Who may call what over HTTP: no token or a wrong one is UNAUTHENTICATED, a
 * role too low is FORBIDDEN (api.md, Authentication).
 */
import { testDialects } from '../support/databases';
import { unique } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';

const CREATE_SNIPPET = 'mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }';
const CREATE_PROVIDER = 'mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }';

describe.each(testDialects)('authentication and roles over HTTP (%s)', (dialect) => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });

  afterAll(async () => {
    await t?.stop();
  });

  it('a request without a token is UNAUTHENTICATED', async () => {
    const result = await t.gql('{ snippets { uid } }', {}, null);
    expect(result.data ?? null).toBeNull();
    expect(result.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('a request with an unknown token is UNAUTHENTICATED, and says the token is not valid', async () => {
    const result = await t.gql('{ snippets { uid } }', {}, 'not-a-real-token-0123456789');
    expect(result.data ?? null).toBeNull();
    expect(result.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    expect(result.errors?.[0]?.message).toMatch(/not valid/);
  });

  it('a revoked token is UNAUTHENTICATED', async () => {
    const created = await t.ok<{ createApiToken: { uid: number; token: string } }>(
      'mutation($name: String!) { createApiToken(name: $name, role: VIEWER) { uid token } }',
      { name: unique('revoked') },
    );
    expect((await t.gql('{ snippets { uid } }', {}, created.createApiToken.token)).errors).toBeUndefined();
    await t.ok('mutation($uid: Int!) { revokeApiToken(uid: $uid) }', { uid: created.createApiToken.uid });
    const result = await t.gql('{ snippets { uid } }', {}, created.createApiToken.token);
    expect(result.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('a VIEWER may read but not create a snippet (FORBIDDEN)', async () => {
    const viewer = await t.tokenFor('VIEWER');
    expect((await t.gql('{ snippets { uid } }', {}, viewer)).errors).toBeUndefined();

    const identifier = unique('viewer_snip');
    const result = await t.gql(CREATE_SNIPPET, { input: { identifier, name: 'n', snippet: 's' } }, viewer);
    expect(result.data ?? null).toBeNull();
    expect(result.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const after = await t.ok<{ snippet: unknown }>('query($identifier: String) { snippet(identifier: $identifier) { uid } }', { identifier });
    expect(after.snippet).toBeNull();
  });

  it('an EDITOR may create a snippet but not a provider (FORBIDDEN)', async () => {
    const editor = await t.tokenFor('EDITOR');
    const snippet = await t.gql(CREATE_SNIPPET, { input: { identifier: unique('editor_snip'), name: 'n', snippet: 's' } }, editor);
    expect(snippet.errors).toBeUndefined();

    const identifier = unique('editor_prov');
    const result = await t.gql(CREATE_PROVIDER, { input: { identifier, name: 'p', adapterType: 'openai' } }, editor);
    expect(result.data ?? null).toBeNull();
    expect(result.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    const { providers } = await t.ok<{ providers: { identifier: string }[] }>('{ providers { identifier } }');
    expect(providers.map((provider) => provider.identifier)).not.toContain(identifier);
  });

  it('the bearer scheme is case-insensitive and the token is trimmed', async () => {
    const response = await fetch(t.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `bearer   ${await t.tokenFor('VIEWER')}  ` },
      body: JSON.stringify({ query: '{ snippets { uid } }' }),
    });
    const body = (await response.json()) as { errors?: unknown };
    expect(body.errors).toBeUndefined();
  });
});
