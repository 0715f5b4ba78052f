/**
 * An unexpected failure (here: a table gone from under the service) reaches
 * the client as INTERNAL_SERVER_ERROR with a generic message: no SQL, no
 * table name, no driver message, no stack. The details go to the log.
 */
import { testDialects } from '../support/databases';
import { createSnippet } from '../support/factories';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { captureLog, type CapturedLog } from './support/log-capture';

describe.each(testDialects)('internal errors are masked (%s)', (dialect) => {
  let t: TestServer;
  let log: CapturedLog;

  beforeAll(async () => {
    log = captureLog('info');
    t = await startTestServer(dialect, { server: { logger: log.logger } });
    await createSnippet(t);
    await t.database.query('DROP TABLE tx_nrllm_promptsnippet');
  });

  afterAll(async () => {
    await t?.stop();
  });

  it('a failing query answers INTERNAL_SERVER_ERROR without SQL text', async () => {
    const response = await fetch(t.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}`, 'x-request-id': 'masked-error-1' },
      body: JSON.stringify({ query: '{ snippets { uid identifier } }' }),
    });
    const text = await response.text();
    const body = JSON.parse(text) as { data: unknown; errors: { message: string; extensions: Record<string, unknown> }[] };

    expect(body.data).toBeNull();
    expect(body.errors).toHaveLength(1);
    expect(body.errors[0]?.extensions).toEqual({ code: 'INTERNAL_SERVER_ERROR' });
    expect(body.errors[0]?.message).toMatch(/internal server error/i);
    for (const leak of [/select/i, /from\s/i, /tx_nrllm/i, /no such table/i, /sqlite/i, /ER_NO_SUCH_TABLE/i, /doesn't exist/i, /QueryFailedError/, /\bat .*\.(ts|js):\d+/, /node_modules/]) {
      expect(text).not.toMatch(leak);
    }
  });

  it('a failing mutation is masked the same way', async () => {
    const result = await t.gql('mutation { createSnippet(input: { identifier: "after_drop", name: "n", snippet: "s" }) { uid } }');
    expect(result.errors?.[0]?.extensions).toEqual({ code: 'INTERNAL_SERVER_ERROR' });
    expect(JSON.stringify(result)).not.toMatch(/tx_nrllm|insert|sqlite|doesn't exist/i);
  });

  it('the details are logged for the operator', () => {
    const errors = log.entries().filter((entry) => entry.level === 50);
    expect(errors.length).toBeGreaterThan(0);
    expect(JSON.stringify(errors)).toMatch(/tx_nrllm_promptsnippet/);
  });

  it('the rest of the service keeps working', async () => {
    expect(await t.ok('{ skills { uid } }')).toEqual({ skills: [] });
  });
});
