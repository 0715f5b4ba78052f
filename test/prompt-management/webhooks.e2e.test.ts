import { testDialects } from '../support/databases';
import { createConfiguration, createSnippet, unique } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';
import { startWebhookReceiver, verifySignature, type WebhookReceiver } from '../support/webhook-receiver';

interface Delivery {
  id: string;
  event: string;
  status: string;
  attempts: number;
  lastError: string | null;
  responseStatus: number | null;
}

const DELIVERY_FIELDS = 'id event status attempts lastError responseStatus createdAt nextAttemptAt deliveredAt';

async function eventually<T>(check: () => Promise<T | null | undefined | false>, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value) return value;
    if (Date.now() > deadline) throw new Error('condition not met within the time limit');
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

describe.each(testDialects)('webhooks through the server on %s', (dialect) => {
  let t: TestServer;
  let receiver: WebhookReceiver;
  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_RETRY_BASE_MS: '50', WEBHOOK_TIMEOUT_MS: '1000', PROMPT_CHANGE_POLL_MS: '200' } });
  });
  afterAll(async () => t?.stop());
  beforeEach(async () => {
    receiver = await startWebhookReceiver();
  });
  afterEach(async () => {
    // Each test's webhook goes with it, so no test hears another's events.
    const { webhooks } = await t.ok<{ webhooks: { id: string }[] }>('{ webhooks { id } }');
    for (const webhook of webhooks) await t.ok('mutation($id: ID!) { deleteWebhook(id: $id) }', { id: webhook.id });
    await receiver.close();
  });

  const createWebhook = async (input: Record<string, unknown>) =>
    (await t.ok<{ createWebhook: { id: string; hasSecret: boolean; events: string[] } }>('mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { id url events hasSecret createdAt } }', { input }))
      .createWebhook;
  const deliveriesOf = async (id: string): Promise<Delivery[]> =>
    (await t.ok<{ webhooks: { id: string; deliveries: Delivery[] }[] }>(`{ webhooks { id deliveries(limit: 50) { ${DELIVERY_FIELDS} } } }`)).webhooks.find((w) => w.id === id)?.deliveries ?? [];

  it('posts prompt.changed signed with HMAC-SHA256 of the raw body, and stores the delivery', async () => {
    const webhook = await createWebhook({ url: receiver.url, events: ['prompt.changed'], secret: 'receiver-secret' });
    expect(webhook.hasSecret).toBe(true);
    const snippet = await createSnippet(t, { tags: ['tone'] });
    const [request] = await receiver.waitFor(1);
    expect(request!.event).toBe('prompt.changed');
    expect(request!.contentType).toBe('application/json');
    expect(verifySignature('receiver-secret', request!)).toBe(true);
    expect(verifySignature('another-secret', request!)).toBe(false);
    expect(request!.json).toMatchObject({ event: 'prompt.changed', delivery: request!.delivery, data: { kind: 'snippet', uid: snippet.uid, identifier: snippet.identifier, version: 1, source: 'api' } });
    const deliveries = await eventually(async () => {
      const list = await deliveriesOf(webhook.id);
      return list[0]?.status === 'delivered' ? list : null;
    });
    expect(deliveries).toEqual([expect.objectContaining({ id: request!.delivery, event: 'prompt.changed', status: 'delivered', attempts: 1, lastError: null, responseStatus: 200 })]);
  });

  it('posts prompt.changed for a row changed in the table by someone else, as source "external"', async () => {
    await createWebhook({ url: receiver.url, events: ['prompt.changed'] });
    const snippet = await createSnippet(t, { snippet: 'Before.' });
    await receiver.waitFor(1);
    await t.database.query('UPDATE tx_nrllm_promptsnippet SET snippet = ?, tstamp = ? WHERE uid = ?', ['Written by TYPO3.', Math.floor(Date.now() / 1000) + 1, snippet.uid]);
    const [, external] = await receiver.waitFor(2);
    expect(external!.json.data).toMatchObject({ kind: 'snippet', uid: snippet.uid, version: 2, source: 'external', author: null });
  });

  it('retries a non-2xx answer and a timeout with the same delivery id and the same body', async () => {
    receiver.answer = (_request, index) => (index === 0 ? 500 : index === 1 ? 'hang' : 204);
    const webhook = await createWebhook({ url: receiver.url, events: ['prompt.changed'], secret: 's' });
    await createSnippet(t);
    const requests = await receiver.waitFor(3);
    expect(new Set(requests.map((request) => request.delivery)).size).toBe(1);
    expect(new Set(requests.map((request) => request.body)).size).toBe(1);
    expect(requests.every((request) => verifySignature('s', request))).toBe(true);
    const [delivery] = await eventually(async () => {
      const list = await deliveriesOf(webhook.id);
      return list[0]?.status === 'delivered' ? list : null;
    });
    expect(delivery).toMatchObject({ id: requests[0]!.delivery, attempts: 3, status: 'delivered', responseStatus: 204, lastError: null });
  });

  it('records why an attempt failed while it waits for the next one', async () => {
    receiver.answer = (_request, index) => (index < 2 ? 503 : 200);
    const webhook = await createWebhook({ url: receiver.url, events: ['prompt.changed'] });
    await createSnippet(t);
    await receiver.waitFor(1);
    const failed = await eventually(async () => (await deliveriesOf(webhook.id)).find((d) => d.lastError !== null));
    expect(failed.lastError).toBe('the receiver answered HTTP 503');
    expect(failed.responseStatus).toBe(503);
    await receiver.waitFor(3);
    expect(receiver.received[0]!.signature).toBeNull();
  });

  it('posts run.finished when a run ends, and only the events a webhook asked for', async () => {
    const webhook = await createWebhook({ url: receiver.url, events: ['run.finished'] });
    const configuration = await createConfiguration(t, { systemPrompt: 'You help.' });
    const { startRun } = await t.ok<{ startRun: { id: string } }>('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', {
      input: { configuration: configuration.identifier, prompt: 'Hello', dryRun: true },
    });
    const [request] = await receiver.waitFor(1);
    expect(request!.event).toBe('run.finished');
    expect(request!.json.data).toMatchObject({ run: { id: startRun.id, configuration: configuration.identifier, status: 'COMPLETED', dryRun: true } });
    // The configuration's creation was a prompt change, which this webhook did not ask for.
    expect(receiver.received.map((r) => r.event)).toEqual(['run.finished']);
    await eventually(async () => (await deliveriesOf(webhook.id))[0]?.status === 'delivered');
  });

  it('never shows the secret', async () => {
    await createWebhook({ url: receiver.url, events: ['prompt.changed'], secret: 'do-not-show-me' });
    const introspection = await t.ok<{ __type: { fields: { name: string }[] } }>('{ __type(name: "Webhook") { fields { name } } }');
    expect(introspection.__type.fields.map((field) => field.name)).not.toContain('secret');
    const listed = await t.gql('{ webhooks { id url events hasSecret createdBy deliveries { id } } }');
    expect(JSON.stringify(listed)).not.toContain('do-not-show-me');
  });

  it('refuses bad targets, events and secrets, and stores nothing', async () => {
    const cases: [Record<string, unknown>, string][] = [
      [{ url: 'ftp://127.0.0.1/hook', events: ['prompt.changed'] }, 'url'],
      [{ url: 'not a url', events: ['prompt.changed'] }, 'url'],
      [{ url: 'http://10.1.2.3/hook', events: ['prompt.changed'] }, 'url'],
      [{ url: 'http://[::1]:8080/hook', events: ['prompt.changed'] }, 'url'],
      [{ url: 'http://169.254.169.254/latest', events: ['prompt.changed'] }, 'url'],
      [{ url: 'http://localhost:8080/hook', events: ['prompt.changed'] }, 'url'],
      [{ url: 'http://user:pw@127.0.0.1/hook', events: ['prompt.changed'] }, 'url'],
      [{ url: receiver.url, events: [] }, 'events'],
      [{ url: receiver.url, events: ['prompt.deleted'] }, 'events'],
      [{ url: receiver.url, events: ['prompt.changed'], secret: '' }, 'secret'],
      [{ url: receiver.url, events: ['prompt.changed'], secret: 'x'.repeat(257) }, 'secret'],
    ];
    for (const [input, field] of cases) {
      const result = await t.gql('mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { id } }', { input });
      expect([JSON.stringify(input), result.errors?.[0]?.extensions?.code, result.errors?.[0]?.extensions?.field]).toEqual([JSON.stringify(input), 'BAD_USER_INPUT', field]);
    }
    expect((await t.ok<{ webhooks: unknown[] }>('{ webhooks { id } }')).webhooks).toEqual([]);
    const missing = await t.gql('mutation { deleteWebhook(id: "no-such-webhook") }');
    expect(missing.errors?.[0]?.extensions?.code).toBe('NOT_FOUND');
    await createWebhook({ url: receiver.url, events: ['prompt.changed'] });
    const page = await t.gql('{ webhooks { deliveries(limit: 501) { id } } }');
    expect(page.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'limit' });
  });

  it('is for administrators only', async () => {
    for (const role of ['EDITOR', 'VIEWER'] as const) {
      const token = await t.tokenFor(role);
      const created = await t.gql('mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { id } }', { input: { url: receiver.url, events: ['prompt.changed'] } }, token);
      expect(created.errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
      expect((await t.gql('{ webhooks { id } }', undefined, token)).errors?.[0]?.extensions?.code).toBe('FORBIDDEN');
    }
    expect((await t.gql('{ webhooks { id } }', undefined, null)).errors?.[0]?.extensions?.code).toBe('UNAUTHENTICATED');
  });

  it('deleting a webhook stops its deliveries', async () => {
    receiver.answer = () => 500;
    const webhook = await createWebhook({ url: receiver.url, events: ['prompt.changed'] });
    await createSnippet(t, { identifier: unique('gone') });
    await receiver.waitFor(1);
    expect(await t.ok('mutation($id: ID!) { deleteWebhook(id: $id) }', { id: webhook.id })).toEqual({ deleteWebhook: true });
    const count = receiver.received.length;
    await new Promise((resolve) => setTimeout(resolve, 500));
    // At most the attempt that was already in flight.
    expect(receiver.received.length).toBeLessThanOrEqual(count + 1);
  });
});
