/**
 * A token may act as a TYPO3 backend user and name its integration
 * (`createApiToken(beUser, source)`): the identity shows on the token, on
 * `viewer`, and on the runs it starts (`tx_nrllm_agentrun.be_user`).
 */
import { testDialects } from '../support/databases';
import { createConfiguration, createProviderAndModel, unique } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';

const CREATE = `mutation($name: String!, $role: Role!, $beUser: Int, $source: String) {
  createApiToken(name: $name, role: $role, beUser: $beUser, source: $source) { uid beUser source token }
}`;

describe.each(testDialects)('token identity (%s)', (dialect) => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });

  afterAll(async () => {
    await t?.stop();
  });

  const tokenCount = async (): Promise<number> => (await t.ok<{ apiTokens: unknown[] }>('{ apiTokens { uid } }')).apiTokens.length;

  it('a token created with a backend user and a source carries them on the token, on viewer and on its runs', async () => {
    const created = (await t.ok<{ createApiToken: { uid: number; beUser: number; source: string; token: string } }>(CREATE, {
      name: unique('cms'),
      role: 'EDITOR',
      beUser: 7,
      source: '  headless_cms  ',
    })).createApiToken;
    expect(created).toMatchObject({ beUser: 7, source: 'headless_cms' });

    const { viewer } = await t.ok<{ viewer: { role: string; beUser: number; source: string } }>('{ viewer { role beUser source } }', {}, created.token);
    expect(viewer).toEqual({ role: 'EDITOR', beUser: 7, source: 'headless_cms' });

    const { apiTokens } = await t.ok<{ apiTokens: { uid: number; beUser: number; source: string }[] }>('{ apiTokens { uid beUser source } }');
    expect(apiTokens.find((token) => token.uid === created.uid)).toEqual({ uid: created.uid, beUser: 7, source: 'headless_cms' });

    const { model } = await createProviderAndModel(t);
    const configuration = await createConfiguration(t, { model });
    const { startRun } = await t.ok<{ startRun: { id: string; beUser: number } }>(
      'mutation($input: StartRunInput!) { startRun(input: $input) { id beUser } }',
      { input: { configuration: configuration.identifier, prompt: 'hello', dryRun: true } },
      created.token,
    );
    expect(startRun.beUser).toBe(7);
    const rows = (await t.database.query('SELECT be_user FROM tx_nrllm_agentrun WHERE uuid = ?', [startRun.id])) as { be_user: number }[];
    expect(Number(rows[0]?.be_user)).toBe(7);
  });

  it('a token without an identity acts as nobody: beUser 0, source empty', async () => {
    const created = (await t.ok<{ createApiToken: { beUser: number; source: string } }>(CREATE, { name: unique('plain'), role: 'VIEWER' })).createApiToken;
    expect(created).toMatchObject({ beUser: 0, source: '' });
  });

  it.each([
    ['a negative backend user', { beUser: -1 }, 'beUser'],
    ['a backend user beyond an unsigned int', { beUser: 2 ** 31 - 1 + 1 }, null],
    ['a source over 64 characters', { source: 'x'.repeat(65) }, 'source'],
    ['a source with a control character', { source: 'cms\u0007' }, 'source'],
  ])('%s is refused with BAD_USER_INPUT and no token is stored', async (_label, identity, field) => {
    const before = await tokenCount();
    const result = await t.gql(CREATE, { name: unique('bad'), role: 'EDITOR', ...identity });
    expect(result.data ?? null).toBeNull();
    // GraphQL's Int stops at 2^31-1, so the largest backend user a client can send is that; past it graphql-js refuses the variable.
    expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    if (field) expect(result.errors?.[0]?.message).toContain(field);
    expect(await tokenCount()).toBe(before);
  });
});
