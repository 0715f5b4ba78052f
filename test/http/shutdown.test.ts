/**
 * Stopping under load: every request either gets its answer or is never
 * executed (a mutation must not take effect while its client sees only a
 * dropped connection), and the stop does not hang on requests it cannot answer.
 */
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer } from '../support/server';

describe.each(testDialects)('stopping the server while mutations arrive (%s)', (dialect) => {
  it('answers every mutation it executes, and stops promptly', async () => {
    const first = await startTestServer(dialect, { keepDatabase: true });
    const mutation = 'mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }';
    const send = (n: number) =>
      fetch(first.url, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
        body: JSON.stringify({ query: mutation, variables: { input: { identifier: `shutdown_${n}`, name: `Shutdown ${n}`, snippet: 'text' } } }),
      })
        .then(async (response) => ({ status: response.status, body: (await response.json()) as { data?: { createSnippet?: { uid: number } } } }))
        .catch(() => null);
    const answers = Array.from({ length: 400 }, (_, n) => send(n));
    // Stop as soon as the first answer is back: hundreds are then queued, executing or still connecting.
    await Promise.race(answers);
    const stopping = Date.now();
    await first.server.stop();
    const stopMs = Date.now() - stopping;
    const results = await Promise.all(answers);
    const created = results.filter((result) => result?.status === 200 && result.body.data?.createSnippet?.uid).length;

    const second = await startTestServer(dialect, { database: first.database });
    try {
      const stored = await second.ok<{ snippets: { identifier: string }[] }>('{ snippets(limit: 500) { identifier } }');
      const shutdownRows = stored.snippets.filter((snippet) => snippet.identifier.startsWith('shutdown_'));
      expect(created).toBeGreaterThan(0);
      expect(shutdownRows).toHaveLength(created);
      expect(stopMs).toBeLessThan(8_000);
    } finally {
      await second.stop();
    }
  });
});
