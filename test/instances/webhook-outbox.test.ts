/**
 * The webhook outbox across real server processes on one database: a
 * delivery whose sender is killed mid-attempt is sent again, with the same
 * delivery id and body, by the instance that runs next; and two instances
 * sharing the outbox send each delivery once, under one id.
 */
import { testDialects, type TestDatabase } from '../support/databases';
import { Instances, waitUntil } from '../support/instances';
import type { ServerProcess } from '../support/server-process';
import { startWebhookReceiver, verifySignature, type WebhookReceiver } from '../support/webhook-receiver';

jest.setTimeout(180_000);

const SECRET = 'outbox-secret';
// A short attempt timeout keeps the lease (2 × timeout + 5 s) short: a killed sender's delivery is taken over sooner.
const ENV = { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_TIMEOUT_MS: '3000', WEBHOOK_RETRY_BASE_MS: '100', SQLITE_LOCK_WAIT_MS: '60000', SQLITE_BUSY_TIMEOUT_MS: '5000' };

/** How long, and how often, a test waits for what the outbox does in the background. */
const PATIENT = { timeoutMs: 60_000, intervalMs: 200 };

describe.each(testDialects)('the webhook outbox across instances (%s)', (dialect) => {
  const instances = new Instances(dialect);
  let database: TestDatabase;
  let receiver: WebhookReceiver;

  beforeAll(async () => {
    database = await instances.database();
    receiver = await startWebhookReceiver();
  });
  afterAll(async () => {
    await instances.stop();
    await receiver?.close();
  });

  const start = (env: Record<string, string> = {}) => instances.start({ ...ENV, ...env });
  const createSnippet = async (server: ServerProcess, identifier: string) => {
    const result = await server.gql('mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid } }', { input: { identifier, name: identifier, snippet: 'Text.' } });
    expect(result.errors).toBeUndefined();
  };
  const deliveries = async () => {
    const rows = (await database.query('SELECT id, status, attempts, last_error FROM promptwire_webhook_delivery ORDER BY created_at')) as { id: string; status: string; attempts: number | string; last_error: string | null }[];
    return rows.map((row) => ({ ...row, attempts: Number(row.attempts) }));
  };

  it('a delivery cut off by a killed instance is sent again by the next one, under the same id', async () => {
    const first = await start();
    const created = await first.gql<{ createWebhook: { id: string } }>('mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { id } }', {
      input: { url: receiver.url, events: ['prompt.changed'], secret: SECRET },
    });
    expect(created.errors).toBeUndefined();
    // The first attempt never gets an answer: its sender dies while waiting.
    receiver.answer = (_request, index) => (index === 0 ? 'hang' : 200);
    await createSnippet(first, 'killed_mid_delivery');
    const [cutOff] = await receiver.waitFor(1);
    await first.kill();

    await start({ RUN_MIGRATIONS: 'false' });
    const [, again] = await receiver.waitFor(2);
    expect(again!.delivery).toBe(cutOff!.delivery);
    expect(again!.body).toBe(cutOff!.body);
    expect(verifySignature(SECRET, again!)).toBe(true);
    const stored = await waitUntil(async () => {
      const rows = await deliveries();
      return rows.length === 1 && rows[0]!.status === 'delivered' ? rows : null;
    }, PATIENT);
    expect(stored[0]).toMatchObject({ id: cutOff!.delivery, status: 'delivered' });
    expect(stored[0]!.attempts).toBeGreaterThanOrEqual(2);
  });

  it('two instances sharing the outbox send every delivery once, each under its own id', async () => {
    receiver.answer = () => 200;
    const before = receiver.received.length;
    // Two fresh instances with a long attempt timeout, so a long lease (2 × 30 s + 5 s). On a loaded
    // machine a 3 s attempt can time out, or its 11 s lease can run out while its outcome waits for
    // the database. Delivery is at least once, so either sends the delivery again under the same id
    // (a CI run saw one such repeat, attempts 2). This test is about two instances never claiming the
    // same delivery at once; at these lengths neither resend is plausible.
    await instances.stopServers();
    const longAttempts = { RUN_MIGRATIONS: 'false', WEBHOOK_TIMEOUT_MS: '30000' };
    const writers = [await start(longAttempts), await start(longAttempts)];
    await Promise.all(Array.from({ length: 12 }, (_, index) => createSnippet(writers[index % 2]!, `shared_outbox_${index}`)));
    const requests = (await receiver.waitFor(before + 12)).slice(before);
    await waitUntil(async () => (await deliveries()).every((row) => row.status === 'delivered'), PATIENT);
    // Anything still in flight would arrive now.
    await new Promise((resolve) => setTimeout(resolve, 1500));
    const ids = receiver.received.slice(before).map((request) => request.delivery);
    // A failure names the deliveries that came more than once, with what their rows recorded (a timed-out attempt, a lost lease).
    const repeated = (await deliveries()).filter((row) => ids.filter((id) => id === row.id).length > 1);
    expect({ received: ids.length, distinct: new Set(ids).size, repeated }).toEqual({ received: 12, distinct: 12, repeated: [] });
    expect(requests.every((request) => verifySignature(SECRET, request))).toBe(true);
    const rows = await deliveries();
    expect(rows).toHaveLength(13);
    expect(rows.filter((row) => ids.includes(row.id)).every((row) => row.attempts === 1)).toBe(true);
  });
});
