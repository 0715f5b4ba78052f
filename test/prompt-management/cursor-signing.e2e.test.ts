/**
 * Paging cursors are signed by the server, against the running server: a
 * cursor a client edited (another position re-encoded, under the old
 * signature or none), truncated, or signed with another secret is
 * BAD_USER_INPUT saying to start again; the cursors the server gives page
 * correctly, also after a restart on the same database (the key comes from
 * SECRET_KEY, or from the SQLite key file when there is none).
 */
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { createConfiguration, createSnippet, unique } from '../support/factories';
import { type GraphQLResponse, startTestServer, type TestServer } from '../support/server';

const INVALID = 'The cursor is not valid: ask for the first page again (without `after`) and use the cursors it returns.';

interface Page {
  totalCount: number;
  pageInfo: { hasNextPage: boolean; endCursor: string | null };
  nodes: { uid: number }[];
}

const SNIPPETS = `query($first: Int, $after: String, $filter: SnippetFilter) {
  snippetsConnection(first: $first, after: $after, filter: $filter) { totalCount pageInfo { hasNextPage endCursor } nodes { uid } }
}`;
const CONFIGURATIONS = `query($first: Int, $after: String, $filter: ConfigurationFilter) {
  configurationsConnection(first: $first, after: $after, filter: $filter) { totalCount pageInfo { hasNextPage endCursor } nodes { uid } }
}`;

/**
 * What a client tampering with a cursor does: finds the JSON position in its
 * bytes, changes it, and encodes it again with whatever followed the JSON.
 */
function editPosition(cursor: string, edit: (values: unknown[]) => unknown[]): string {
  const bytes = Buffer.from(cursor, 'base64url');
  for (let end = 1; end <= bytes.length; end += 1) {
    let values: unknown;
    try {
      values = JSON.parse(bytes.subarray(0, end).toString('utf8'));
    } catch {
      continue;
    }
    return Buffer.concat([Buffer.from(JSON.stringify(edit(values as unknown[])), 'utf8'), bytes.subarray(end)]).toString('base64url');
  }
  throw new Error(`no JSON position in the cursor ${cursor}`);
}

function expectInvalidCursor(result: GraphQLResponse): void {
  expect(result.data ?? null).toBeNull();
  expect(result.errors).toHaveLength(1);
  expect(result.errors?.[0]).toMatchObject({ message: INVALID, extensions: { code: 'BAD_USER_INPUT', field: 'after' } });
}

describe.each(testDialects)('signed paging cursors (%s)', (dialect) => {
  let database: TestDatabase;
  let t: TestServer | null = null;
  // On SQLite without SECRET_KEY: the key file in the data directory, as the embedded default runs.
  const sameSecret: Record<string, string> = dialect === 'sqlite' ? { SECRET_KEY: '' } : {};
  const start = async (env: Record<string, string>) => {
    await t?.stop();
    t = await startTestServer(dialect, { database, keepDatabase: true, env });
    return t;
  };

  beforeAll(async () => {
    database = await createTestDatabase(dialect);
  });
  afterAll(async () => {
    await t?.stop();
    await database?.drop();
  });

  const page = async (server: TestServer, query: string, field: string, variables: Record<string, unknown>) => (await server.ok<Record<string, Page>>(query, variables))[field];

  it('an edited, truncated or foreign cursor is BAD_USER_INPUT saying to ask for the first page again; the cursors given page through every row once', async () => {
    const server = await start(sameSecret);
    const tag = unique('signed');
    const uids: number[] = [];
    for (let index = 0; index < 5; index += 1) uids.push((await createSnippet(server, { tags: [tag], name: `Signed ${index}`, sorting: index })).uid);
    const filter = { tags: [tag] };

    const first = await page(server, SNIPPETS, 'snippetsConnection', { first: 2, filter });
    expect(first.nodes.map((node) => node.uid)).toEqual(uids.slice(0, 2));
    const cursor = first.pageInfo.endCursor ?? '';
    expect(cursor).toMatch(/^[A-Za-z0-9_-]+$/);

    // Another position (the fourth row's) under the cursor's signature, and the same position re-encoded without it.
    const skipAhead = editPosition(cursor, ([list]) => [list, 3, 'Signed 3', uids[3]]);
    expectInvalidCursor(await server.gql(SNIPPETS, { first: 2, after: skipAhead, filter }));
    const unsigned = Buffer.from(JSON.stringify(['snippets', 3, 'Signed 3', uids[3]])).toString('base64url');
    expectInvalidCursor(await server.gql(SNIPPETS, { first: 2, after: unsigned, filter }));
    expectInvalidCursor(await server.gql(SNIPPETS, { first: 2, after: cursor.slice(0, -3), filter }));
    expectInvalidCursor(await server.gql(SNIPPETS, { first: 2, after: `${cursor}AA`, filter }));

    // The same for another list.
    await createConfiguration(server, {});
    await createConfiguration(server, {});
    const configurations = await page(server, CONFIGURATIONS, 'configurationsConnection', { first: 1 });
    const configurationCursor = configurations.pageInfo.endCursor ?? '';
    expectInvalidCursor(await server.gql(CONFIGURATIONS, { first: 1, after: editPosition(configurationCursor, (values) => [...values.slice(0, -1), 999_999]) }));

    // The cursors the server gave read the rest, each row once, in order.
    const second = await page(server, SNIPPETS, 'snippetsConnection', { first: 2, after: cursor, filter });
    const third = await page(server, SNIPPETS, 'snippetsConnection', { first: 2, after: second.pageInfo.endCursor, filter });
    expect([...first.nodes, ...second.nodes, ...third.nodes].map((node) => node.uid)).toEqual(uids);
    expect(third.pageInfo.hasNextPage).toBe(false);
    expect((await page(server, CONFIGURATIONS, 'configurationsConnection', { first: 1, after: configurationCursor })).nodes).toHaveLength(1);
  });

  it('a cursor stays valid after a restart on the same database; a server with another secret refuses it', async () => {
    const before = await start(sameSecret);
    const tag = unique('restart');
    const uids: number[] = [];
    for (let index = 0; index < 3; index += 1) uids.push((await createSnippet(before, { tags: [tag], name: `Restart ${index}`, sorting: index })).uid);
    const filter = { tags: [tag] };
    const cursor = (await page(before, SNIPPETS, 'snippetsConnection', { first: 1, filter })).pageInfo.endCursor;

    const after = await start(sameSecret);
    const rest = await page(after, SNIPPETS, 'snippetsConnection', { first: 5, after: cursor, filter });
    expect(rest.nodes.map((node) => node.uid)).toEqual(uids.slice(1));

    const foreign = await start({ SECRET_KEY: 'another secret, of another server' });
    expectInvalidCursor(await foreign.gql(SNIPPETS, { first: 5, after: cursor, filter }));
  });
});
