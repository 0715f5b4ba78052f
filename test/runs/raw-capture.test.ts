/**
 * Raw capture (`RunStep.raw`) is the ADMIN's: every other role reads null, in
 * `run` over HTTP and in `runTrace` over graphql-ws, and what the provider
 * echoed of its credentials is redacted as it is in error messages.
 */
import { testDialects } from '../support/databases';
import { collect, startTestServer, type TestServer } from '../support/server';
import { API_KEY, RunKit, STEP_FIELDS, type StepView } from './run-kit';
import { gate } from './scripted-provider';

/** What a proxy in front of a provider might echo back: the request's headers and the key. */
const ECHO = {
  debug: {
    headers: { Authorization: `Bearer ${API_KEY}`, 'x-api-key': 'anthropic-style-key-value', 'api-key': 'azure-style-key-value', 'content-type': 'application/json' },
    note: `called with key ${API_KEY} and sk-proj-ABCDEFGH12345678 in the text`,
  },
};

function rawOf(steps: StepView[]): unknown[] {
  return steps.filter((s) => s.kind === 'LLM').map((s) => s.raw);
}

describe.each(testDialects)('raw capture (%s)', (dialect) => {
  let ts: TestServer;
  const kit = new RunKit(() => ts);

  beforeAll(async () => {
    ts = await startTestServer(dialect);
  });
  afterAll(async () => {
    await ts?.stop();
    await kit.closeProviders();
  });

  test.each([
    ['a plain answer', false],
    ['a streamed answer', true],
  ])('in %s, only an ADMIN reads raw, and the echoed credentials are redacted', async (_name, stream) => {
    const setup = await kit.setup();
    setup.provider.script({ text: 'Echoed.', usage: { prompt: 3, completion: 2 }, extra: ECHO });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [], captureRaw: true, stream });
    const run = await kit.waitForRun(started.id);
    expect(run.status).toBe('COMPLETED');

    // The ADMIN sees the body with the secrets masked, everything else as sent.
    const [raw] = rawOf(run.steps);
    expect(raw).not.toBeNull();
    const text = JSON.stringify(raw);
    expect(text).toContain('Ech');
    expect(text).toContain('[redacted]');
    expect(text).toContain('application/json');
    for (const secret of [API_KEY, 'anthropic-style-key-value', 'azure-style-key-value', 'sk-proj-ABCDEFGH12345678']) expect(text).not.toContain(secret);

    const query = `query($id: ID!) { run(id: $id) { steps { ${STEP_FIELDS} } } }`;
    for (const role of ['EDITOR', 'VIEWER'] as const) {
      const token = await ts.tokenFor(role);
      const read = await ts.gql<{ run: { steps: StepView[] } }>(query, { id: started.id }, token);
      expect(read.errors).toBeUndefined();
      expect(read.data!.run.steps.length).toBe(run.steps.length);
      expect(read.data!.run.steps.every((s) => s.raw === null)).toBe(true);

      const watched = collect<{ runTrace: StepView }>(ts.wsClient(token), `subscription($id: ID!) { runTrace(runId: $id) { ${STEP_FIELDS} } }`, { id: started.id });
      await watched.done;
      expect(watched.errors).toEqual([]);
      expect(watched.events.map((e) => e.runTrace.kind)).toEqual(run.steps.map((s) => s.kind));
      expect(watched.events.every((e) => e.runTrace.raw === null)).toBe(true);
    }

    const adminWatch = collect<{ runTrace: StepView }>(ts.wsClient(), `subscription($id: ID!) { runTrace(runId: $id) { kind raw } }`, { id: started.id });
    await adminWatch.done;
    expect(rawOf(adminWatch.events.map((e) => e.runTrace))).toEqual([raw]);
  });

  test('live watchers of one run get raw by their own role', async () => {
    const setup = await kit.setup();
    const held = gate();
    setup.provider.script({ text: 'Live.', usage: { prompt: 3, completion: 2 }, extra: ECHO, gate: held.promise });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'x', tools: [], captureRaw: true });
    await setup.provider.waitForRequest(1);
    const query = `subscription($id: ID!) { runTrace(runId: $id) { kind raw } }`;
    const viewer = collect<{ runTrace: StepView }>(ts.wsClient(await ts.tokenFor('VIEWER')), query, { id: started.id });
    const admin = collect<{ runTrace: StepView }>(ts.wsClient(), query, { id: started.id });
    held.open();
    await Promise.all([viewer.done, admin.done]);
    expect(rawOf(viewer.events.map((e) => e.runTrace))).toEqual([null]);
    const [adminRaw] = rawOf(admin.events.map((e) => e.runTrace));
    expect(adminRaw).not.toBeNull();
    expect(JSON.stringify(adminRaw)).not.toContain(API_KEY);
  });
});
