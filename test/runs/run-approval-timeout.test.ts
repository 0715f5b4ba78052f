/**
 * Approval timeouts: a run started with `approvalTimeoutSeconds` that waits
 * for a person stores its deadline; when nobody decides in time, whichever
 * instance does housekeeping (before or after a restart) stores an APPROVAL
 * step refusing every pending call as not approved, and the run goes on.
 * Deciding and timing out at once gives exactly one outcome.
 */
import { createTestDatabase, testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit, expectWellFormedTrace, sleep } from './run-kit';

const FIELDS = `id status terminationReason finalContent approvalDeadline createdAt pendingToolCalls { id }
  steps { sequence kind round toolCallId toolResult toolIsError decisions { toolCallId approved reason decidedBy } }`;

interface TimeoutRun {
  id: string;
  status: string;
  terminationReason: string | null;
  finalContent: string | null;
  approvalDeadline: string | null;
  createdAt: string;
  pendingToolCalls: { id: string }[];
  steps: {
    sequence: number;
    kind: string;
    round: number;
    toolCallId: string | null;
    toolResult: string | null;
    toolIsError: boolean | null;
    decisions: { toolCallId: string; approved: boolean; reason: string | null; decidedBy: string | null }[] | null;
  }[];
}

const RESOLVE = `mutation($runId: ID!, $decisions: [ToolDecisionInput!]!) { resolveToolApproval(runId: $runId, decisions: $decisions) { id } }`;
const APPROVE_BOTH = [
  { toolCallId: 'call_a', approve: true },
  { toolCallId: 'call_b', approve: true },
];
const NOT_APPROVED = 'Error: tool "calculator" requires approval that was not given.';
// Housekeeping runs every third of the lease: every second here.
const ENV = { RUN_LEASE_SECONDS: '3' };

describe.each(testDialects)('approval timeout (%s)', (dialect) => {
  let ts: TestServer | null = null;
  let other: TestServer | null = null;
  const kit = new RunKit(() => ts!);

  afterEach(async () => {
    await other?.stop();
    other = null;
    await ts?.stop();
    ts = null;
    await kit.closeProviders();
  });

  async function runOf(id: string, server: TestServer = ts!): Promise<TimeoutRun> {
    return (await server.ok<{ run: TimeoutRun }>(`query($id: ID!) { run(id: $id) { ${FIELDS} } }`, { id })).run;
  }

  async function waitFor(id: string, wanted: (status: string) => boolean, timeoutMs = 20_000): Promise<TimeoutRun> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const run = await runOf(id);
      if (wanted(run.status)) return run;
      if (Date.now() > deadline) throw new Error(`run ${id} still ${run.status}`);
      await sleep(25);
    }
  }
  const waiting = (status: string) => status === 'WAITING_FOR_APPROVAL';
  const finished = (status: string) => ['COMPLETED', 'FAILED', 'CANCELLED'].includes(status);

  /** A run whose model asks for two calculator calls in one turn that need approval, then answers "Done.". */
  async function startWaitingRun(approvalTimeoutSeconds: number): Promise<string> {
    const setup = await kit.setup();
    setup.provider.script(
      {
        toolCalls: [
          { id: 'call_a', name: 'calculator', arguments: { expression: '2 + 2' } },
          { id: 'call_b', name: 'calculator', arguments: { expression: '3 * 3' } },
        ],
        usage: { prompt: 5, completion: 5 },
      },
      { text: 'Done.', usage: { prompt: 5, completion: 5 } },
    );
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'compute', tools: ['calculator'], approvalRequired: ['calculator'], approvalTimeoutSeconds });
    return started.id;
  }

  function expectTimedOut(run: TimeoutRun, seconds: number): void {
    expect(run).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed', finalContent: 'Done.', approvalDeadline: null, pendingToolCalls: [] });
    expectWellFormedTrace(run.steps);
    expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'APPROVAL', 'APPROVAL', 'TOOL', 'TOOL', 'CONTEXT', 'REQUEST', 'LLM', 'END']);
    expect(run.steps[4]!.decisions).toEqual([
      { toolCallId: 'call_a', approved: false, reason: `No decision within ${seconds} s.`, decidedBy: null },
      { toolCallId: 'call_b', approved: false, reason: `No decision within ${seconds} s.`, decidedBy: null },
    ]);
    expect(run.steps.filter((s) => s.kind === 'TOOL').map((s) => [s.toolCallId, s.toolResult, s.toolIsError])).toEqual([
      ['call_a', NOT_APPROVED, true],
      ['call_b', NOT_APPROVED, true],
    ]);
  }

  test('nobody decides in time: the pending calls are refused as not approved and the run goes on; a late decision is CONFLICT', async () => {
    ts = await startTestServer(dialect, { env: ENV });
    const id = await startWaitingRun(1);
    const paused = await waitFor(id, waiting);
    expect(paused.approvalDeadline).not.toBeNull();
    expect(Date.parse(paused.approvalDeadline!)).toBeGreaterThan(Date.parse(paused.createdAt));

    const done = await waitFor(id, finished);
    expectTimedOut(done, 1);
    const late = await ts.gql(RESOLVE, { runId: id, decisions: APPROVE_BOTH });
    expect(late.errors?.[0]?.extensions?.code).toBe('CONFLICT');
  });

  test('the deadline is stored: a run whose deadline passed while the service was down times out when it starts again', async () => {
    const database = await createTestDatabase(dialect);
    ts = await startTestServer(dialect, { database, keepDatabase: true, env: ENV });
    const id = await startWaitingRun(1);
    const paused = await waitFor(id, waiting);
    await ts.stop();
    // Down past the deadline: no instance could time the run out meanwhile.
    while (Date.now() <= Date.parse(paused.approvalDeadline!) + 1_000) await sleep(100);
    ts = await startTestServer(dialect, { database, env: ENV });
    expectTimedOut(await waitFor(id, finished), 1);
  });

  test('deciding and timing out at once, on two instances: exactly one outcome per run', async () => {
    const database = await createTestDatabase(dialect);
    // `other` stops first and leaves the database; `ts` drops it.
    ts = await startTestServer(dialect, { database, env: ENV });
    other = await startTestServer(dialect, { database, keepDatabase: true, env: ENV });
    const ids: string[] = [];
    for (let i = 0; i < 6; i += 1) ids.push(await startWaitingRun(3_600));
    for (const id of ids) await waitFor(id, waiting);

    // One run after another: its deadline passes, then a person decides while both instances' housekeeping times it out.
    const instances = [ts, other];
    const answers: Awaited<ReturnType<TestServer['gql']>>[] = [];
    for (const [i, id] of ids.entries()) {
      await ts.database.query('UPDATE promptwire_run_approval_deadline SET deadline_at = 1 WHERE run_uid = (SELECT uid FROM tx_nrllm_agentrun WHERE uuid = ?)', [id]);
      // Housekeeping starts a little later for each run, so both sides win some races.
      const expiring = instances.map((instance) => sleep(i * 3).then(() => instance.server.services.runs.expireApprovals()));
      const [answer] = await Promise.all([instances[i % 2]!.gql(RESOLVE, { runId: id, decisions: APPROVE_BOTH }), ...expiring]);
      answers.push(answer);
    }

    const outcomes = { decided: 0, timedOut: 0 };
    for (const [i, id] of ids.entries()) {
      const run = await waitFor(id, finished);
      expectWellFormedTrace(run.steps);
      const approvals = run.steps.filter((s) => s.kind === 'APPROVAL');
      // One APPROVAL asking, one answering: never both a decision and a timeout.
      expect(approvals).toHaveLength(2);
      const byPerson = approvals[1]!.decisions!.every((d) => d.decidedBy !== null);
      const answer = answers[i]!;
      if (byPerson) {
        outcomes.decided += 1;
        expect(answer.errors).toBeUndefined();
        expect(run.steps.filter((s) => s.kind === 'TOOL').map((s) => s.toolResult)).toEqual(['4', '9']);
      } else {
        outcomes.timedOut += 1;
        expect(answer.errors?.[0]?.extensions?.code).toBe('CONFLICT');
        expectTimedOut(run, 3_600);
      }
    }
    expect(outcomes.decided + outcomes.timedOut).toBe(ids.length);
    const left = (await ts.database.query('SELECT COUNT(*) AS n FROM promptwire_run_approval_deadline')) as { n: number | string }[];
    expect(Number(left[0]!.n)).toBe(0);
  });

  test('a waiting run cancelled before its deadline ends CANCELLED and is not timed out afterwards', async () => {
    ts = await startTestServer(dialect, { env: ENV });
    const id = await startWaitingRun(1);
    await waitFor(id, waiting);
    const cancelled = await ts.ok<{ cancelRun: { status: string } }>('mutation($id: ID!) { cancelRun(id: $id) { status } }', { id });
    expect(cancelled.cancelRun.status).toBe('CANCELLED');
    const left = (await ts.database.query('SELECT COUNT(*) AS n FROM promptwire_run_approval_deadline')) as { n: number | string }[];
    expect(Number(left[0]!.n)).toBe(0);
    expect(await ts.server.services.runs.expireApprovals()).toBe(0);
    const run = await runOf(id);
    expectWellFormedTrace(run.steps);
    expect(run.steps.map((s) => s.kind)).toEqual(['CONTEXT', 'REQUEST', 'LLM', 'APPROVAL', 'END']);
  });

  test('approvalTimeoutSeconds is a whole number of seconds from 1 to 30 days', async () => {
    ts = await startTestServer(dialect);
    const setup = await kit.setup();
    for (const value of [0, -5, 2_592_001]) {
      const refused = await ts.gql('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: setup.configuration, prompt: 'x', approvalTimeoutSeconds: value } });
      expect(refused.errors?.[0]?.extensions).toMatchObject({ code: 'BAD_USER_INPUT', field: 'approvalTimeoutSeconds' });
    }
  });
});
