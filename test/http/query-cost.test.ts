/**
 * One document cannot ask for more than the server can answer: aliases, list
 * sizes times selections and introspection are counted before anything runs
 * (MAX_ALIASES, MAX_QUERY_COST, MAX_QUERY_TOKENS), the answer is bounded
 * (MAX_RESPONSE_BYTES), and graphql-ws operations obey the same rules as HTTP.
 */
import type { Client } from 'graphql-ws';
import { testDialects } from '../support/databases';
import { createConfiguration, createSnippet } from '../support/factories';
import { collect, type GraphQLResponse, startTestServer, type TestServer } from '../support/server';

const pages = (count: number, limit: number) =>
  `query { ${Array.from({ length: count }, (_, index) => `a${index}: configurations(limit: ${limit}) { effectiveSystemPrompt }`).join(' ')} }`;

const schemaAliases = (count: number) => `query { ${Array.from({ length: count }, (_, index) => `s${index}: __schema { types { name fields { name } } }`).join(' ')} }`;

/** The result of one operation over graphql-ws: its data, or the errors it ended with. */
async function overSocket(client: Client, query: string, variables: Record<string, unknown> = {}): Promise<GraphQLResponse> {
  const { events, errors, done } = collect<Record<string, unknown>>(client, query, variables);
  await done;
  // An operation refused before it runs ends with graphql-ws's error message: an array of errors.
  return { data: events[0] ?? null, errors: errors.flat() as GraphQLResponse['errors'] };
}

function expectRefused(result: GraphQLResponse, pattern: RegExp) {
  expect(result.data ?? null).toBeNull();
  expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
  expect(result.errors?.[0]?.message).toMatch(pattern);
}

describe.each(testDialects)('the cost of one request (%s)', (dialect) => {
  let t: TestServer;
  let queries = 0;

  beforeAll(async () => {
    // Background polls (the prompt-change detector, the webhook outbox) run on their own timers; they are not the request's.
    const background = /tstamp\W*\s*>=|promptwire_prompt_version|promptwire_webhook_delivery/i;
    t = await startTestServer(dialect, { server: { onQuery: (sql) => void (queries += background.test(sql) ? 0 : 1) } });
    await createSnippet(t, { tags: ['cost'], snippet: 'A composed fragment.' });
    await createConfiguration(t, { snippetTags: ['cost'], systemPrompt: 'Be brief.' });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('refuses 50 aliased pages of effective prompts before any resolver runs', async () => {
    const before = queries;
    expectRefused(await t.gql(pages(50, 500)), /alias|costly/i);
    expect(queries).toBe(before);
  });

  it('refuses one page of 500 effective prompts by its cost, and serves a page of 50', async () => {
    expectRefused(await t.gql(pages(1, 500)), /costly.*MAX_QUERY_COST/i);
    const served = await t.gql<{ a0: { effectiveSystemPrompt: string }[] }>(pages(1, 50));
    expect(served.errors).toBeUndefined();
    expect(served.data?.a0[0]?.effectiveSystemPrompt).toContain('A composed fragment.');
  });

  it('counts a limit given as a variable', async () => {
    const query = 'query($limit: Int) { configurations(limit: $limit) { effectiveSystemPrompt } }';
    expectRefused(await t.gql(query, { limit: 500 }), /costly/i);
    expect((await t.gql(query, { limit: 10 })).errors).toBeUndefined();
  });

  it('counts a connection\'s edges and nodes by first, like a limit: a page of 500 effective prompts is refused, 50 are served', async () => {
    const connection = (first: string, selection: string) => `query { configurationsConnection${first} { totalCount pageInfo { hasNextPage endCursor } ${selection} } }`;
    // 1 + 500 × (nodes 1 + effectiveSystemPrompt 100) + pageInfo 3 + totalCount 1
    expectRefused(await t.gql(connection('(first: 500)', 'nodes { effectiveSystemPrompt }')), /about 50505 .*first/);
    expectRefused(await t.gql(connection('(first: 500)', 'edges { cursor node { effectiveSystemPrompt } }')), /costly/i);
    const fragment = 'fragment Page on LlmConfigurationConnection { totalCount pageInfo { hasNextPage endCursor } ...Rows } fragment Rows on LlmConfigurationConnection { nodes { effectiveSystemPrompt } }';
    expectRefused(await t.gql(`query { configurationsConnection(first: 500) { ...Page } } ${fragment}`), /about 50505 /);
    // Edges and nodes both count: 50 × (103 + 101) is over 10,000.
    expectRefused(await t.gql(connection('(first: 50)', 'edges { cursor node { effectiveSystemPrompt } } nodes { effectiveSystemPrompt }')), /costly/i);
    // Without `first`, its default (50) counts.
    expectRefused(await t.gql(connection('', 'edges { cursor node { effectiveSystemPrompt } } nodes { effectiveSystemPrompt }')), /costly/i);
    const served = await t.gql<{ configurationsConnection: { nodes: { effectiveSystemPrompt: string }[] } }>(connection('(first: 50)', 'nodes { effectiveSystemPrompt }'));
    expect(served.errors).toBeUndefined();
    expect(served.data?.configurationsConnection.nodes[0]?.effectiveSystemPrompt).toContain('A composed fragment.');
    expect((await t.gql(connection('', 'nodes { effectiveSystemPrompt }'))).errors).toBeUndefined();
  });

  it('counts a connection\'s first given as a variable, and a list inside its rows', async () => {
    const query = 'query($first: Int) { snippetsConnection(first: $first) { edges { node { usedBy { effectiveSystemPrompt } } } } }';
    // Each row's usedBy is an unpaged list (10 rows) of effective prompts: 500 × ~1,000.
    expectRefused(await t.gql(query, { first: 500 }), /costly/i);
    expectRefused(await t.gql(query, { first: 10 }), /costly/i);
    const served = await t.gql<{ snippetsConnection: { edges: { node: { usedBy: unknown[] } }[] } }>(query, { first: 5 });
    expect(served.errors).toBeUndefined();
    expect(served.data?.snippetsConnection.edges.length).toBeGreaterThan(0);
    const runs = 'query($first: Int) { runsConnection(first: $first) { nodes { configuration { effectiveSystemPrompt } } } }';
    expectRefused(await t.gql(runs, { first: 200 }), /costly/i);
    expect((await t.gql(runs, { first: 20 })).errors).toBeUndefined();
  });

  it('refuses many aliases of a cheap field', async () => {
    expectRefused(await t.gql(`query { ${Array.from({ length: 31 }, (_, index) => `v${index}: viewer { name }`).join(' ')} }`), /aliases limit of 30/i);
  });

  it('counts introspection: 3,500 aliases of __schema without a token are refused', async () => {
    const response = await fetch(t.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: schemaAliases(3500) }) });
    expect(response.status).toBe(200);
    expectRefused((await response.json()) as GraphQLResponse, /tokens|alias|costly/i);
    // Twenty are within the alias limit but cost 20 × 1000.
    expectRefused(await t.gql(schemaAliases(20), {}, null), /costly/i);
  });

  it('a chain of 2,000 fragments is refused as input, not answered with a server error', async () => {
    const fragments = Array.from({ length: 2000 }, (_, index) => `fragment F${index} on Query { ${index === 1999 ? 'viewer { name }' : `...F${index + 1}`} }`).join(' ');
    const response = await fetch(t.url, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ query: `query { ...F0 } ${fragments}` }) });
    expect(response.status).toBeLessThan(500);
    expectRefused((await response.json()) as GraphQLResponse, /tokens/i);
  });

  describe('over graphql-ws', () => {
    it('applies the same cost, alias and token limits', async () => {
      const client = t.wsClient();
      expectRefused(await overSocket(client, pages(1, 500)), /costly/i);
      expectRefused(await overSocket(client, 'query { configurationsConnection(first: 500) { nodes { effectiveSystemPrompt } } }'), /costly/i);
      expectRefused(await overSocket(client, pages(50, 1)), /aliases/i);
      expectRefused(await overSocket(client, `query { viewer { name ${'__typename '.repeat(6000)}} }`), /tokens/i);
      const served = await overSocket(client, pages(1, 10));
      expect(served.errors).toEqual([]);
      expect(JSON.stringify(served.data)).toContain('A composed fragment.');
    });

    it('applies the alias limit to a subscription as well', async () => {
      const client = t.wsClient();
      const query = `subscription { runTrace(runId: "00000000-0000-4000-8000-000000000000") { ${Array.from({ length: 31 }, (_, index) => `s${index}: sequence`).join(' ')} } }`;
      expectRefused(await overSocket(client, query), /aliases limit/i);
    });
  });
});

describe.each(testDialects)('the size of one answer (%s)', (dialect) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { MAX_RESPONSE_BYTES: '4096' } });
    await createSnippet(t, { snippet: 'x'.repeat(3000) });
    await createSnippet(t, { snippet: 'y'.repeat(3000) });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('an answer larger than MAX_RESPONSE_BYTES is replaced by an error naming the limit', async () => {
    expectRefused(await t.gql('{ snippets { snippet } }'), /MAX_RESPONSE_BYTES \(4096\)/);
    expect((await t.gql<{ snippets: unknown[] }>('{ snippets(limit: 1) { snippet } }')).data?.snippets).toHaveLength(1);
  });

  it('over graphql-ws too', async () => {
    const client = t.wsClient();
    expectRefused(await overSocket(client, '{ snippets { snippet } }'), /MAX_RESPONSE_BYTES/);
  });
});

describe.each(testDialects)('INTROSPECTION=false over graphql-ws (%s)', (dialect) => {
  let t: TestServer;
  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { INTROSPECTION: 'false' } });
  });
  afterAll(async () => {
    await t?.stop();
  });

  it('refuses __schema and __type over the socket, and still serves ordinary queries', async () => {
    const client = t.wsClient();
    expectRefused(await overSocket(client, '{ __schema { types { name } } }'), /introspection/i);
    expectRefused(await overSocket(client, '{ __type(name: "PromptSnippet") { name } }'), /introspection/i);
    const served = await overSocket(client, '{ viewer { role } }');
    expect(served.data).toEqual({ viewer: { role: 'ADMIN' } });
  });
});
