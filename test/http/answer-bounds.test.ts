/**
 * A single request cannot stall the service by asking for a large answer:
 * every list is costed by a bound it states (a run's whole trace, a record's
 * versions), and an answer is stopped while it is read once it passes
 * MAX_RESPONSE_BYTES, not built whole and measured afterwards.
 */
import type { Client } from 'graphql-ws';
import { testDialects } from '../support/databases';
import { createSnippet } from '../support/factories';
import { collect, type GraphQLResponse, startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';

const MAX_RESPONSE_BYTES = 256 * 1024;
const ROUNDS = 20;
/** Each round's assistant text: a REQUEST step repeats every earlier one, so the trace holds about 1.7 MB of transcripts. */
const ROUND_TEXT_CHARS = 8000;
/** A read of a run's steps after a sequence (SQLite and MySQL quote it differently). */
const STEP_READ = /from\W+tx_nrllm_agentrun_event\W[\s\S]*sequence\W*\s*>/i;

async function overSocket(client: Client, query: string, variables: Record<string, unknown> = {}): Promise<GraphQLResponse> {
  const { events, errors, done } = collect<Record<string, unknown>>(client, query, variables);
  await done;
  return { data: events[0] ?? null, errors: errors.flat() as GraphQLResponse['errors'] };
}

function expectStopped(result: GraphQLResponse) {
  expect(result.data ?? null).toBeNull();
  expect(result.errors).toHaveLength(1);
  expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
  expect(result.errors?.[0]?.message).toMatch(new RegExp(`MAX_RESPONSE_BYTES \\(${MAX_RESPONSE_BYTES}\\).*stopped`));
}

describe.each(testDialects)('bounded answers (%s)', (dialect) => {
  let t: TestServer;
  let viewer: string;
  let runId: string;
  let stepCount: number;
  let stepReads = 0;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    t = await startTestServer(dialect, {
      env: { MAX_RESPONSE_BYTES: String(MAX_RESPONSE_BYTES) },
      server: { onQuery: (sql) => void (STEP_READ.test(sql) && /^\s*select/i.test(sql) ? (stepReads += 1) : 0) },
    });
    viewer = await t.tokenFor('VIEWER');
    const setup = await kit.setup({ contextLength: 2_000_000 });
    for (let round = 1; round < ROUNDS; round += 1) {
      setup.provider.script({ text: `${round}`.padEnd(ROUND_TEXT_CHARS, '.'), toolCalls: [{ name: 'calculator', arguments: { expression: `${round} + 1` } }] });
    }
    setup.provider.script({ text: 'Done.' });
    const run = await kit.startRun({ configuration: setup.configuration, prompt: 'Count.', maxRounds: ROUNDS });
    runId = run.id;
    // Polled without the transcripts: the whole trace with them is past the answer limit.
    for (let polls = 0; ; polls += 1) {
      const { run: view } = await t.ok<{ run: { status: string; steps: { sequence: number }[] } }>('query($id: ID!) { run(id: $id) { status steps { sequence } } }', { id: runId });
      if (view.status !== 'QUEUED' && view.status !== 'RUNNING') {
        expect(view.status).toBe('COMPLETED');
        stepCount = view.steps.length;
        break;
      }
      if (polls > 600) throw new Error(`run still ${view.status}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }, 120_000);
  afterAll(async () => {
    await t?.stop();
  });

  it('refuses 30 aliases of a whole trace with its transcripts by their cost, before a step is read', async () => {
    const query = `query($id: ID!) { ${Array.from({ length: 30 }, (_, index) => `a${index}: run(id: $id) { steps { messagesSent { role content toolCalls { id name arguments } toolCallId } } }`).join(' ')} }`;
    const before = stepReads;
    const result = await t.gql(query, { id: runId }, viewer);
    expect(result.data ?? null).toBeNull();
    expect(result.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(result.errors?.[0]?.message).toMatch(/too costly.*MAX_QUERY_COST/);
    expect(stepReads).toBe(before);
  });

  it('stops reading one whole trace once its answer passes MAX_RESPONSE_BYTES, and still serves a page of it', async () => {
    expectStopped(await t.gql('query($id: ID!) { run(id: $id) { steps { sequence messagesSent { role content } } } }', { id: runId }, viewer));
    const page = await t.gql<{ run: { steps: { sequence: number }[] } }>('query($id: ID!) { run(id: $id) { steps(limit: 3) { sequence messagesSent { role } } } }', { id: runId }, viewer);
    expect(page.errors).toBeUndefined();
    expect(page.data?.run.steps.map((step) => step.sequence)).toEqual([1, 2, 3]);
    // Without the transcripts, the whole trace fits.
    const summary = await t.gql<{ run: { steps: { sequence: number }[] } }>('query($id: ID!) { run(id: $id) { steps { sequence kind } } }', { id: runId }, viewer);
    expect(summary.data?.run.steps).toHaveLength(stepCount);
  });

  it('stops aliased pages one after another: the pages after the limit are never read', async () => {
    // Thirty pages of the trace's later steps, each within the cost limit; together far past the answer limit.
    const aliases = Array.from({ length: 30 }, (_, index) => `a${index}: run(id: $id) { steps(afterSequence: ${stepCount - 12 - (index % 10)}, limit: 10) { messagesSent { content } } }`);
    const before = stepReads;
    expectStopped(await t.gql(`query($id: ID!) { ${aliases.join(' ')} }`, { id: runId }, viewer));
    expect(stepReads - before).toBeLessThan(5);
  });

  it('stops the same answer over graphql-ws', async () => {
    const client = t.wsClient(viewer);
    try {
      expectStopped(await overSocket(client, 'query($id: ID!) { run(id: $id) { steps { messagesSent { content } } } }', { id: runId }));
      const page = await overSocket(client, 'query($id: ID!) { run(id: $id) { steps(limit: 2) { sequence } } }', { id: runId });
      expect(page.data).toEqual({ run: { steps: [{ sequence: 1 }, { sequence: 2 }] } });
    } finally {
      await client.dispose();
    }
  });
});

/** The first read of a versions page: the version numbers (then the rows it chose are read). */
const VERSION_KEYS_READ = /record_uid\W+AS\W+recordUid/i;

describe.each(testDialects)('a record\'s versions are pages (%s)', (dialect) => {
  let t: TestServer;
  let uid: number;
  let versionReads = 0;
  const VERSIONS = 25;
  const TEXT_CHARS = 20_000;

  beforeAll(async () => {
    t = await startTestServer(dialect, {
      env: { MAX_RESPONSE_BYTES: String(MAX_RESPONSE_BYTES) },
      server: { onQuery: (sql) => void (VERSION_KEYS_READ.test(sql) ? (versionReads += 1) : 0) },
    });
    const snippet = await createSnippet(t, { snippet: 'v1'.padEnd(TEXT_CHARS, '.') });
    uid = snippet.uid;
    for (let version = 2; version <= VERSIONS; version += 1) {
      await t.ok('mutation($uid: Int!, $input: UpdateSnippetInput!) { updateSnippet(uid: $uid, input: $input) { uid } }', {
        uid,
        input: { snippet: `v${version}`.padEnd(TEXT_CHARS, '.') },
      });
    }
  }, 60_000);
  afterAll(async () => {
    await t?.stop();
  });

  const versions = (args: string) =>
    t.gql<{ snippet: { versions: { version: number }[] } }>(`query($uid: Int!) { snippet(uid: $uid) { versions${args} { version } } }`, { uid });

  it('lists the newest 20 by default, and pages with limit and before', async () => {
    const first = await versions('');
    expect(first.data?.snippet.versions.map((v) => v.version)).toEqual(Array.from({ length: 20 }, (_, index) => VERSIONS - index));
    expect((await versions('(limit: 2)')).data?.snippet.versions.map((v) => v.version)).toEqual([25, 24]);
    expect((await versions('(limit: 3, before: 24)')).data?.snippet.versions.map((v) => v.version)).toEqual([23, 22, 21]);
    expect((await versions('(limit: 10, before: 3)')).data?.snippet.versions.map((v) => v.version)).toEqual([2, 1]);
  });

  it('refuses a page above the maximum or a before that is no version, naming the argument', async () => {
    const tooLarge = await versions('(limit: 501)');
    expect(tooLarge.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(tooLarge.errors?.[0]?.message).toMatch(/limit must be between 0 and 500/);
    const before = await versions('(before: 0)');
    expect(before.errors?.[0]?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(before.errors?.[0]?.message).toMatch(/before must be a version number/);
  });

  it('stops 30 aliases of long versions at MAX_RESPONSE_BYTES', async () => {
    const viewer = await t.tokenFor('VIEWER');
    const query = `query($uid: Int!) { ${Array.from({ length: 30 }, (_, index) => `a${index}: snippet(uid: $uid) { versions { version snippet } }`).join(' ')} }`;
    const before = versionReads;
    expectStopped(await t.gql(query, { uid }, viewer));
    // A query writes nothing: the one page thirty aliases ask for is read once, whenever each asks.
    expect(versionReads - before).toBe(1);
    // One alias's page (20 versions of 20,000 characters) is past the limit too; ten of them fit.
    const fits = await t.gql<{ snippet: { versions: { snippet: string }[] } }>('query($uid: Int!) { snippet(uid: $uid) { versions(limit: 10) { snippet } } }', { uid }, viewer);
    expect(fits.errors).toBeUndefined();
    expect(fits.data?.snippet.versions).toHaveLength(10);
  });
});
