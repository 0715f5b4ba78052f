/**
 * A revoked token stops working at once: on the instance that revoked it
 * (HTTP, and every open WebSocket of the token is closed with 4403, which
 * ends its subscriptions; an operation that races the close is refused), and,
 * through Redis, on every other instance on the same database — two real
 * processes sharing MySQL and Redis.
 */
import { testDialects } from '../support/databases';
import { Instances } from '../support/instances';
import { RawGraphQLSocket } from '../support/raw-graphql-ws';
import { collect, startTestServer, type TestServer } from '../support/server';
import type { ServerProcess } from '../support/server-process';
import { RunKit } from '../runs/run-kit';

jest.setTimeout(120_000);

interface CreatedToken {
  uid: number;
  token: string;
}

const CREATE = 'mutation($name: String!, $role: Role!) { createApiToken(name: $name, role: $role) { uid token } }';
const REVOKE = 'mutation($uid: Int!) { revokeApiToken(uid: $uid) }';
const TRACE = 'subscription($id: ID!) { runTrace(runId: $id) { sequence kind } }';

describe.each(testDialects)('revocation on one instance (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });
  afterAll(async () => {
    await t?.stop();
    await kit.closeProviders();
  });

  const createToken = async (role: string): Promise<CreatedToken> =>
    (await t.ok<{ createApiToken: CreatedToken }>(CREATE, { name: `revocable ${role}`, role })).createApiToken;

  it('closes the open sockets of the revoked token with 4403, ending their subscriptions, and refuses it over HTTP', async () => {
    const run = await kit.startHeldToolRun();
    const editor = await createToken('EDITOR');
    const raw = await RawGraphQLSocket.connect(t.server.wsUrl, editor.token);
    raw.subscribe('trace', TRACE, { id: run.id });
    await raw.waitFor((m) => m.id === 'trace' && m.type === 'next');
    raw.subscribe('q', '{ viewer { role } }');
    await raw.waitFor((m) => m.id === 'q' && m.type === 'complete');
    // A client library's subscription on another socket of the same token.
    const library = collect(t.wsClient(editor.token), TRACE, { id: run.id });
    const other = await RawGraphQLSocket.connect(t.server.wsUrl, (await createToken('VIEWER')).token);

    expect(await t.ok(REVOKE, { uid: editor.uid })).toEqual({ revokeApiToken: true });

    expect(await raw.closed).toEqual({ code: 4403, reason: expect.stringMatching(/revoked/) });
    await library.done;
    expect((library.errors[0] as { code?: number } | undefined)?.code).toBe(4403);
    const http = await t.gql('{ viewer { role } }', {}, editor.token);
    expect(http.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const started = await t.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: 'any', prompt: 'x' } }, editor.token);
    expect(started.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');

    // Other tokens' sockets stay open and working.
    other.subscribe('q', '{ viewer { role } }');
    await other.waitFor((m) => m.id === 'q' && m.type === 'complete');
    expect(other.of('q')[0]).toMatchObject({ type: 'next', payload: { data: { viewer: { role: 'VIEWER' } } } });
    other.close();
    run.release();
  });
});

const twoInstances = process.env.TEST_REDIS_URL && testDialects.includes('mysql') ? describe : describe.skip;

twoInstances('revocation across two instances (MySQL + Redis)', () => {
  const instances = new Instances('mysql');
  let first: ServerProcess;
  let second: ServerProcess;

  beforeAll(async () => {
    const env = { REDIS_URL: process.env.TEST_REDIS_URL! };
    first = await instances.start(env);
    second = await instances.start({ ...env, RUN_MIGRATIONS: 'false' });
  });
  afterAll(() => instances.stop());

  it('a token revoked on one instance stops working on the other at once: its sockets close with 4403, HTTP refuses it', async () => {
    const created = await first.gql<{ createApiToken: CreatedToken }>(CREATE, { name: 'revocable elsewhere', role: 'EDITOR' });
    const editor = created.data!.createApiToken;
    // The second instance has seen the token as valid (and caches that).
    expect((await second.gql('{ viewer { role } }', {}, editor.token)).data).toEqual({ viewer: { role: 'EDITOR' } });
    const wsUrl = second.url.replace(/^http/, 'ws');
    const raw = await RawGraphQLSocket.connect(wsUrl, editor.token);
    raw.subscribe('changes', 'subscription { promptChanged { kind identifier } }');
    raw.subscribe('q', '{ viewer { role } }');
    await raw.waitFor((m) => m.id === 'q' && m.type === 'complete');

    expect((await first.gql(REVOKE, { uid: editor.uid })).data).toEqual({ revokeApiToken: true });

    expect(await raw.closed).toEqual({ code: 4403, reason: expect.stringMatching(/revoked/) });
    // The cache is emptied before the sockets are closed.
    const refused = await second.gql('{ viewer { role } }', {}, editor.token);
    expect(refused.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const mutation = await second.gql('mutation { createSnippet(input: { identifier: "from_revoked", name: "n", snippet: "s" }) { uid } }', {}, editor.token);
    expect(mutation.errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
    const later = await RawGraphQLSocket.connect(wsUrl, editor.token);
    expect((await later.closed).code).toBe(4403);
  });
});
