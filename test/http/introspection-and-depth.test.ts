/**
 * Introspection is on unless INTROSPECTION=false; queries deeper than
 * MAX_QUERY_DEPTH are refused before they run.
 */
import { getIntrospectionQuery } from 'graphql';
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';

const API_CODES = ['BAD_USER_INPUT', 'NOT_FOUND', 'CONFLICT', 'UNAUTHENTICATED', 'FORBIDDEN', 'INTERNAL_SERVER_ERROR'];

describe.each(testDialects)('introspection and query depth (%s)', (dialect) => {
  describe('with INTROSPECTION unset', () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer(dialect);
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('answers the full introspection query (its depth is not held against it)', async () => {
      const result = await t.gql<{ __schema: { queryType: { name: string }; types: { name: string }[] } }>(getIntrospectionQuery());
      expect(result.errors).toBeUndefined();
      expect(result.data?.__schema.queryType.name).toBe('Query');
      expect(result.data?.__schema.types.map((type) => type.name)).toEqual(expect.arrayContaining(['PromptSnippet', 'LlmProvider', 'AgentRun', 'RunStep']));
    });

    it('answers a __type query', async () => {
      const result = await t.gql<{ __type: { name: string } }>('{ __type(name: "PromptSnippet") { name } }');
      expect(result.errors).toBeUndefined();
      expect(result.data?.__type.name).toBe('PromptSnippet');
    });
  });

  describe('with INTROSPECTION=false', () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer(dialect, { env: { INTROSPECTION: 'false' } });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('refuses the introspection query', async () => {
      const result = await t.gql(getIntrospectionQuery());
      expect(result.data ?? null).toBeNull();
      expect(result.errors?.[0]?.message).toMatch(/introspection/i);
      expect(API_CODES).toContain(result.errors?.[0]?.extensions?.code);
    });

    it('refuses a __type query, and still serves ordinary queries', async () => {
      const refused = await t.gql('{ __type(name: "PromptSnippet") { name } }');
      expect(refused.errors?.[0]?.message).toMatch(/introspection/i);
      expect(await t.ok('{ snippets { uid } }')).toEqual({ snippets: [] });
    });
  });

  describe('with MAX_QUERY_DEPTH=3', () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer(dialect, { env: { MAX_QUERY_DEPTH: '3' } });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('serves a query exactly as deep as the limit', async () => {
      const result = await t.gql('{ models { provider { identifier } } }');
      expect(result.errors).toBeUndefined();
    });

    it('refuses a deeper query, before any resolver runs', async () => {
      const result = await t.gql('{ configurations { model { provider { identifier } } } }');
      expect(result.data ?? null).toBeNull();
      expect(result.errors?.[0]?.message).toMatch(/depth/i);
      expect(API_CODES).toContain(result.errors?.[0]?.extensions?.code);
    });

    it('counts depth through fragments too', async () => {
      const result = await t.gql('query { configurations { ...C } } fragment C on LlmConfiguration { model { provider { identifier } } }');
      expect(result.data ?? null).toBeNull();
      expect(result.errors?.[0]?.message).toMatch(/depth/i);
    });

    it('refuses the deep query without a token as well, without saying anything about authentication', async () => {
      const result = await t.gql('{ configurations { model { provider { identifier } } } }', {}, null);
      expect(result.errors?.[0]?.message).toMatch(/depth/i);
    });
  });
});
