/**
 * Budget enforcement never fails open: when the ledger cannot be read, a
 * call a limit may apply to is refused (the run ends budget_exhausted,
 * naming why), and the provider is never reached.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit, uniqueIdentifier } from '../runs/run-kit';

describe.each(testDialects)('an unreadable usage ledger (%s)', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });

  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
  });

  test('refuses the calls of a backend user and of a capped configuration; the provider gets no request', async () => {
    const { createApiToken } = await t.ok<{ createApiToken: { token: string } }>('mutation($name: String!) { createApiToken(name: $name, role: EDITOR, beUser: 12) { token } }', {
      name: uniqueIdentifier('fc'),
    });
    const capped = await kit.setup();
    await t.database.query('UPDATE tx_nrllm_configuration SET max_tokens_per_day = 1000 WHERE uid = ?', [capped.configurationUid]);
    const open = await kit.setup();
    open.provider.script({ text: 'ok', usage: { prompt: 1, completion: 1 } });
    await t.database.query('ALTER TABLE tx_nrllm_service_usage RENAME TO usage_elsewhere');
    try {
      const message = 'AI budget could not be checked (the usage ledger is unavailable); the call was not made.';
      const byUser = await kit.waitForRun((await kit.startRun({ configuration: open.configuration, prompt: 'Go.', tools: [] }, createApiToken.token)).id);
      expect(byUser).toMatchObject({ status: 'COMPLETED', terminationReason: 'budget_exhausted', error: message });
      const byConfiguration = await kit.waitForRun((await kit.startRun({ configuration: capped.configuration, prompt: 'Go.', tools: [] })).id);
      expect(byConfiguration).toMatchObject({ terminationReason: 'budget_exhausted', error: message });
      expect(open.provider.requests).toHaveLength(0);
      expect(capped.provider.requests).toHaveLength(0);

      // No limit can apply to a token without a backend user on an uncapped configuration: its call goes (its booking fails and is logged).
      const unmetered = await kit.waitForRun((await kit.startRun({ configuration: open.configuration, prompt: 'Go.', tools: [] })).id);
      expect(unmetered.terminationReason).toBe('completed');
    } finally {
      await t.database.query('ALTER TABLE usage_elsewhere RENAME TO tx_nrllm_service_usage');
    }
  });
});
