/**
 * GraphQL-over-HTTP compliance, measured by the graphql-http package's own
 * audit against the real server. Every audit runs with an administrator
 * token, so the results are about the transport, not about authorisation.
 */
import { auditServer, type AuditResult } from 'graphql-http';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';

type Fetch = typeof fetch;

/** A fetch that adds headers to every request the audit makes. */
function fetchWith(extra: Record<string, string>): Fetch {
  return (input, init = {}) => {
    const headers = new Headers(init.headers);
    for (const [name, value] of Object.entries(extra)) headers.set(name, value);
    return fetch(input, { ...init, headers });
  };
}

const describeResult = (result: AuditResult) => `${result.status} ${result.id} ${result.name}${'reason' in result ? `: ${result.reason}` : ''}`;

function count(results: AuditResult[]) {
  const counts = { ok: 0, warn: 0, notice: 0, error: 0 };
  for (const result of results) counts[result.status] += 1;
  return counts;
}

describe.each(testDialects)('GraphQL over HTTP audit (%s)', (dialect) => {
  let server: TestServer;
  let results: AuditResult[];

  beforeAll(async () => {
    server = await startTestServer(dialect);
    results = await auditServer({ url: server.url, fetchFn: fetchWith({ authorization: `Bearer ${ADMIN_TOKEN}` }) });
    // The exact figures, for whoever reads the test output.
    process.stdout.write(`graphql-http audit (${dialect}): ${JSON.stringify(count(results))} of ${results.length}\n${results.filter((r) => r.status !== 'ok').map(describeResult).join('\n')}\n`);
  });

  afterAll(async () => {
    await server?.stop();
  });

  it('passes every required audit', () => {
    expect(results.length).toBeGreaterThan(0);
    expect(results.filter((result) => result.status === 'error').map(describeResult)).toEqual([]);
  });

  it('follows every recommendation (no warnings)', () => {
    expect(results.filter((result) => result.status === 'warn').map(describeResult)).toEqual([]);
  });

  it('leaves notices only on GET requests, which CSRF prevention refuses', async () => {
    const notices = results.filter((result) => result.status === 'notice');
    for (const notice of notices) expect(notice.name).toMatch(/GET/);

    // The same audit with the preflight header CSRF prevention asks for: every notice goes.
    const preflighted = await auditServer({
      url: server.url,
      fetchFn: fetchWith({ authorization: `Bearer ${ADMIN_TOKEN}`, 'apollo-require-preflight': 'true' }),
    });
    expect(preflighted.filter((result) => result.status !== 'ok').map(describeResult)).toEqual([]);
  });
});
