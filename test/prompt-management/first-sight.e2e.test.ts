/**
 * The external-change detector on a database that already holds a library:
 * the first reading records the baseline quietly (version 1 of each row, no
 * change events, no webhooks), later polls read only the rows changed since,
 * and edits after the first reading are noticed and announced as usual.
 */
import pino from 'pino';
import type { DataSource } from 'typeorm';
import { createDataSource, type Dialect } from '../../src/db/data-source';
import { IdentifierLock } from '../../src/db/identifier-lock';
import { PromptChangeDetector } from '../../src/prompt-history/change-detector';
import { InProcessPromptEventBus, type PromptChangeEvent } from '../../src/prompt-history/prompt-event-bus';
import { PromptHistoryService } from '../../src/prompt-history/prompt-history.service';
import { WebhookOutbox } from '../../src/webhooks/webhook-outbox';
import { WebhookRepository } from '../../src/webhooks/webhook.repository';
import { createTestDatabase, testDialects, type TestDatabase } from '../support/databases';
import { startTestServer } from '../support/server';
import { startWebhookReceiver } from '../support/webhook-receiver';

const SNIPPETS = 600;
const CONFIGURATIONS = 30;

async function eventually<T>(check: () => Promise<T | null | undefined | false>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met within the time limit');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

const count = async (database: TestDatabase, sql: string, params: unknown[] = []) => Number(((await database.query(sql, params)) as { n: unknown }[])[0]!.n);

/** A library TYPO3 filled before the service ever looked: snippets on 20 tags, configurations selecting two of them, one skill. */
async function fillAsTypo3(database: TestDatabase, stamp: number): Promise<void> {
  for (let start = 0; start < SNIPPETS; start += 100) {
    const rows = Array.from({ length: 100 }, (_, offset) => start + offset);
    await database.query(
      `INSERT INTO tx_nrllm_promptsnippet (pid, tstamp, crdate, deleted, hidden, identifier, name, tags, snippet, is_active, sorting) VALUES ${rows.map(() => '(0, ?, ?, 0, 0, ?, ?, ?, ?, 1, 0)').join(', ')}`,
      rows.flatMap((index) => [stamp, stamp, `typo3_snippet_${index}`, `Snippet ${index}`, `tag_${index % 20}`, `Text ${index}.`]),
    );
  }
  // One row deleted before the service saw it: it has no history to start.
  await database.query("INSERT INTO tx_nrllm_promptsnippet (pid, tstamp, crdate, deleted, hidden, identifier, name, tags, snippet, is_active, sorting) VALUES (0, ?, ?, 1, 0, 'gone', 'Gone', 'tag_1', 'Gone.', 1, 0)", [stamp, stamp]);
  for (let index = 0; index < CONFIGURATIONS; index += 1) {
    await database.query('INSERT INTO tx_nrllm_configuration (pid, tstamp, crdate, identifier, name, system_prompt, snippet_tags, temperature) VALUES (0, ?, ?, ?, ?, ?, ?, 0.5)', [
      stamp,
      stamp,
      `typo3_configuration_${index}`,
      `Configuration ${index}`,
      `You are assistant ${index}.`,
      `tag_${index % 20},tag_${(index + 1) % 20}`,
    ]);
  }
  await database.query("INSERT INTO tx_nrllm_skill (pid, tstamp, crdate, identifier, name, body, body_checksum, enabled) VALUES (0, ?, ?, 'typo3_skill', 'Skill', 'Body.', '', 1)", [stamp, stamp]);
}

describe.each(testDialects)('the change detector on a database with a library in it, on %s', (dialect) => {
  let database: TestDatabase;
  let dataSource: DataSource;
  let history: PromptHistoryService;
  let identifiers: IdentifierLock;
  const events: PromptChangeEvent[] = [];
  const detector = () => new PromptChangeDetector(dataSource, history, identifiers, pino({ level: 'silent' }), 60_000, null);
  const deliveries = () => count(database, 'SELECT COUNT(*) AS n FROM promptwire_webhook_delivery');
  const versionsOf = (kind: string) => count(database, 'SELECT COUNT(*) AS n FROM promptwire_prompt_version WHERE kind = ?', [kind]);
  const uidOf = async (identifier: string) => Number(((await database.query('SELECT uid FROM tx_nrllm_promptsnippet WHERE identifier = ?', [identifier])) as { uid: unknown }[])[0]!.uid);
  const now = () => Math.floor(Date.now() / 1000);

  beforeAll(async () => {
    // The service's schema and a webhook for prompt.changed, then the service is gone: TYPO3 fills the tables.
    database = await createTestDatabase(dialect);
    const setup = await startTestServer(dialect, { database, keepDatabase: true, env: { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', PROMPT_CHANGE_POLL_MS: '8000' } });
    await setup.ok('mutation { createWebhook(input: { url: "http://127.0.0.1:9/hook", events: ["prompt.changed"] }) { id } }');
    await setup.stop();
    await fillAsTypo3(database, now() - 3600);

    ({ dataSource } = await createDataSource({ database: database.config, schemaMode: 'own' }));
    const bus = new InProcessPromptEventBus();
    history = new PromptHistoryService(dataSource, bus, new WebhookOutbox(new WebhookRepository(dataSource)));
    history.subscribe((event) => events.push(event));
    identifiers = new IdentifierLock(dataSource, dialect as Dialect);
  }, 120_000);
  afterAll(async () => {
    await dataSource?.destroy();
    await database?.drop();
  });

  it('the first reading stores version 1 of every live row in one go: no change events, no webhooks', async () => {
    const first = detector();
    // Counts the turns of the event loop while the first reading runs.
    let turns = 0;
    let reading = true;
    const turn = () => {
      turns += 1;
      if (reading) setImmediate(turn);
    };
    setImmediate(turn);
    const result = await first.poll().finally(() => (reading = false));
    expect(result).toEqual({ scanned: SNIPPETS + 1 + CONFIGURATIONS + 1, stored: 0, baselined: SNIPPETS + CONFIGURATIONS + 1 });
    expect(events).toEqual([]);
    expect(await deliveries()).toBe(0);
    expect(await versionsOf('snippet')).toBe(SNIPPETS);
    expect(await versionsOf('configuration')).toBe(CONFIGURATIONS);
    expect(await versionsOf('skill')).toBe(1);
    expect(await count(database, "SELECT COUNT(*) AS n FROM promptwire_prompt_version WHERE version <> 1 OR source <> 'external' OR author IS NOT NULL")).toBe(0);
    // The reading gave the event loop back between its pages (601 snippets are seven pages).
    expect(turns).toBeGreaterThanOrEqual(2);

    // A poll with nothing changed reads no row.
    expect(await first.poll()).toEqual({ scanned: 0, stored: 0, baselined: 0 });
  });

  it('later polls read only the rows changed since, and announce each change once', async () => {
    const poller = detector();
    await poller.poll();
    events.length = 0;
    const [a, b] = [await uidOf('typo3_snippet_3'), await uidOf('typo3_snippet_4')];
    const stamp = now() + 1;
    await database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid IN (?, ?)', ['Edited by TYPO3.', stamp, a, b]);
    await database.query("UPDATE tx_nrllm_configuration SET snippet_tags = 'tag_7', tstamp = ? WHERE identifier = 'typo3_configuration_0'", [stamp]);
    // An insert stamped in the past (a script that copies rows) is new all the same: its uid is above every uid read.
    await database.query("INSERT INTO tx_nrllm_promptsnippet (pid, tstamp, crdate, deleted, hidden, identifier, name, tags, snippet, is_active, sorting) VALUES (0, 5, 5, 0, 0, 'copied', 'Copied', 'tag_3', 'Copied.', 1, 0)");

    expect(await poller.poll()).toEqual({ scanned: 4, stored: 4, baselined: 0 });
    const byIdentifier = new Map(events.map((event) => [event.identifier, event]));
    expect(events).toHaveLength(4);
    expect(byIdentifier.get('typo3_snippet_3')).toMatchObject({ kind: 'snippet', version: 2, source: 'external', affectedConfigurations: ['typo3_configuration_2', 'typo3_configuration_3', 'typo3_configuration_22', 'typo3_configuration_23'] });
    expect(byIdentifier.get('typo3_snippet_4')).toMatchObject({ version: 2 });
    expect(byIdentifier.get('typo3_configuration_0')).toMatchObject({ kind: 'configuration', version: 2, affectedConfigurations: ['typo3_configuration_0'] });
    expect(byIdentifier.get('copied')).toMatchObject({ kind: 'snippet', version: 1, source: 'external' });
    expect(await deliveries()).toBe(4);

    // Nothing changed since: the rows of the last seconds are read again for a while (a second write
    // in the same second keeps the stamp), but nothing is stored twice.
    const again = await poller.poll();
    expect(again.stored).toBe(0);
    expect(again.scanned).toBeLessThanOrEqual(3);

    // A second write within the same second as the last one, to a row with a lower uid, is noticed.
    events.length = 0;
    await database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ? WHERE uid = ?', ['Edited twice in one second.', a]);
    expect((await poller.poll()).stored).toBe(1);
    expect(events.map((event) => [event.identifier, event.version])).toEqual([['typo3_snippet_3', 3]]);
  });

  it('a change a poll failed to store is read again by the next poll', async () => {
    const poller = detector();
    await poller.poll();
    events.length = 0;
    const uid = await uidOf('typo3_snippet_6');
    await database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', ['Stored on the second try.', now() + 1, uid]);
    const record = history.record.bind(history);
    let failures = 1;
    const failing = jest.spyOn(history, 'record').mockImplementation(async (manager, input) => {
      if (failures-- > 0) throw new Error('the database went away');
      return record(manager, input);
    });
    try {
      await expect(poller.poll()).rejects.toThrow('the database went away');
      expect(await poller.poll()).toMatchObject({ stored: 1 });
    } finally {
      failing.mockRestore();
    }
    expect(events.map((event) => [event.identifier, event.version, event.source])).toEqual([['typo3_snippet_6', 2, 'external']]);
  });

  it('a detector that starts after rows changed unwatched announces those changes, and only those', async () => {
    events.length = 0;
    const stamp = now() + 2;
    await database.query("UPDATE tx_nrllm_promptsnippet SET hidden = 1, tstamp = ? WHERE identifier = 'typo3_snippet_5'", [stamp]);
    const before = await deliveries();
    const result = await detector().poll();
    expect(result).toMatchObject({ stored: 1, baselined: 0 });
    expect(events.map((event) => [event.identifier, event.version])).toEqual([['typo3_snippet_5', 2]]);
    expect(await deliveries()).toBe(before + 1);
  });
});

describe.each(testDialects)('a server started on a database with a library in it, on %s', (dialect) => {
  it('records the baseline without a storm of webhooks, then delivers later edits', async () => {
    const database = await createTestDatabase(dialect);
    const receiver = await startWebhookReceiver();
    const env = { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_RETRY_BASE_MS: '50', PROMPT_CHANGE_POLL_MS: '200' };
    const setup = await startTestServer(dialect, { database, keepDatabase: true, env });
    const { createWebhook } = await setup.ok<{ createWebhook: { id: string } }>('mutation($url: String!) { createWebhook(input: { url: $url, events: ["prompt.changed"] }) { id } }', { url: receiver.url });
    await setup.stop();
    await fillAsTypo3(database, Math.floor(Date.now() / 1000) - 3600);

    const t = await startTestServer(dialect, { database, env });
    try {
      // The baseline: version 1 of every live row.
      await eventually(async () => (await count(database, 'SELECT COUNT(*) AS n FROM promptwire_prompt_version')) === SNIPPETS + CONFIGURATIONS + 1);
      const deliveriesOf = async () =>
        (await t.ok<{ webhooks: { id: string; deliveries: { event: string }[] }[] }>('{ webhooks { id deliveries(limit: 50) { event } } }')).webhooks.find((w) => w.id === createWebhook.id)!.deliveries;
      // Deliveries are written in the transaction of the version they announce: none exist for the baseline.
      expect(await deliveriesOf()).toEqual([]);
      const uid = Number(((await database.query("SELECT uid FROM tx_nrllm_promptsnippet WHERE identifier = 'typo3_snippet_9'")) as { uid: unknown }[])[0]!.uid);
      const versions = await t.ok<{ snippet: { versions: { version: number; source: string }[] } }>('query($uid: Int) { snippet(uid: $uid) { versions { version source } } }', { uid });
      expect(versions.snippet.versions).toEqual([{ version: 1, source: 'external' }]);

      await database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', ['Written by TYPO3 later.', Math.floor(Date.now() / 1000) + 1, uid]);
      const [request] = await receiver.waitFor(1);
      expect(request!.json.data).toMatchObject({ kind: 'snippet', uid, version: 2, source: 'external' });
      expect(receiver.received).toHaveLength(1);
      expect(await deliveriesOf()).toHaveLength(1);
    } finally {
      await t.stop();
      await receiver.close();
    }
  }, 60_000);
});
