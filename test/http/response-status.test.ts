/**
 * GraphQL over HTTP status codes for a query that parsed as JSON but failed
 * GraphQL parsing, validation or variable coercion: the errors are in the
 * body; the status depends on the media type the server answers with. With
 * application/graphql-response+json it is 400; with application/json (also
 * what clients get that send no Accept header or accept anything) it is 200.
 */
import http from 'node:http';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';

interface Answer {
  status: number;
  contentType: string;
  body: { data?: unknown; errors?: { message: string; extensions?: { code?: string } }[] };
}

/** node:http rather than fetch: fetch always sends an Accept header, and one case here needs none. */
function postWithAccept(url: string, accept: string | null, payload: unknown): Promise<Answer> {
  const headers: Record<string, string> = { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` };
  if (accept !== null) headers.accept = accept;
  return new Promise((resolve, reject) => {
    const request = http.request(url, { method: 'POST', headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('end', () =>
        resolve({
          status: response.statusCode ?? 0,
          contentType: String(response.headers['content-type'] ?? ''),
          body: JSON.parse(Buffer.concat(chunks).toString('utf8')) as Answer['body'],
        }),
      );
    });
    request.on('error', reject);
    request.end(JSON.stringify(payload));
  });
}

const FAILURES: [string, unknown][] = [
  ['a syntax error', { query: '{ snippets {' }],
  ['an unknown field', { query: '{ noSuchField }' }],
  ['a variable of the wrong type', { query: 'query($limit: Int!) { snippets(limit: $limit) { uid } }', variables: { limit: 'many' } }],
];

const JSON_ANSWERS: [string, string | null][] = [
  ['no Accept header', null],
  ['Accept: */*', '*/*'],
  ['Accept: application/json', 'application/json'],
  ['application/json listed before application/graphql-response+json', 'application/json, application/graphql-response+json'],
];

const GRAPHQL_RESPONSE_ANSWERS: [string, string][] = [
  ['Accept: application/graphql-response+json', 'application/graphql-response+json'],
  ['application/graphql-response+json preferred over application/json', 'application/graphql-response+json, application/json;q=0.9'],
];

describe.each(testDialects)('response status of refused GraphQL requests (%s)', (dialect) => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });

  afterAll(async () => {
    await t?.stop();
  });

  describe.each(FAILURES)('%s', (_failure, payload) => {
    it.each(JSON_ANSWERS)('answers 200 with application/json to %s', async (_client, accept) => {
      const answer = await postWithAccept(t.url, accept, payload);
      expect(answer.contentType).toMatch(/^application\/json/);
      expect(answer.status).toBe(200);
      expect(answer.body.data ?? null).toBeNull();
      expect(answer.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    });

    it.each(GRAPHQL_RESPONSE_ANSWERS)('answers 400 with application/graphql-response+json to %s', async (_client, accept) => {
      const answer = await postWithAccept(t.url, accept, payload);
      expect(answer.contentType).toMatch(/^application\/graphql-response\+json/);
      expect(answer.status).toBe(400);
      expect(answer.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    });
  });

  it('keeps 400 for a request that is not a GraphQL request at all (no query), whatever the Accept header', async () => {
    for (const accept of [null, 'application/json', 'application/graphql-response+json']) {
      const answer = await postWithAccept(t.url, accept, { variables: {} });
      expect(answer.status).toBe(400);
    }
  });

  it('answers 200 to an operation whose resolver refuses the input (an execution error)', async () => {
    const answer = await postWithAccept(t.url, 'application/graphql-response+json', { query: '{ snippets(limit: 100000) { uid } }' });
    expect(answer.status).toBe(200);
    expect(answer.body.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
  });

  it('sends no internal marker header to the client', async () => {
    const response = await fetch(t.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify({ query: '{ noSuchField }' }),
    });
    await response.text();
    const names = [...response.headers.keys()];
    expect(names.filter((name) => !['content-type', 'content-length', 'x-request-id', 'date', 'connection', 'keep-alive', 'vary', 'cache-control'].includes(name))).toEqual([]);
  });
});
