/**
 * A run's statements are the same text from run to run: its uid, its
 * timestamps and its counts travel as parameters (src/db/parameter-writes).
 * On SQLite a statement whose text is new is prepared again, and pushes a
 * statement every run uses out of TypeORM's statement cache.
 */
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { waitUntil } from '../support/instances';
import { RunKit } from './run-kit';

const RUN_TABLES = /tx_nrllm_agentrun|promptwire_run_/;

describe.each(testDialects)('a run\'s statements (%s)', (dialect) => {
  let ts: TestServer;
  let counting = false;
  let statements = new Set<string>();
  const runs = new RunKit(() => ts);

  beforeAll(async () => {
    ts = await startTestServer(dialect, {
      // Housekeeping (lease renewals, the prompt-change poll) stays out of the counted runs.
      env: { RUN_LEASE_SECONDS: '600', PROMPT_CHANGE_POLL_MS: '8000' },
      server: {
        onQuery: (sql) => {
          if (counting && RUN_TABLES.test(sql)) statements.add(sql.replace(/\s+/g, ' ').trim());
        },
      },
    });
  });
  afterAll(async () => {
    await ts?.stop();
    await runs.closeProviders();
  });

  /** The statements one run on the run tables makes, from start to END (its status polled: reading its trace is a reader's statements). */
  const statementsOfRun = async (configuration: string, prompt: string): Promise<Set<string>> => {
    statements = new Set();
    counting = true;
    try {
      const started = await runs.startRun({ configuration, prompt });
      await waitUntil(async () => (await ts.ok<{ run: { status: string } }>('query($id: ID!) { run(id: $id) { status } }', { id: started.id })).run.status === 'COMPLETED', { what: `run ${started.id} to complete` });
      return statements;
    } finally {
      counting = false;
    }
  };

  test('a second and a third run make no statement the one before did not: no uid, timestamp or count in the SQL text', async () => {
    const setup = await runs.setup();
    setup.provider.script(...Array.from({ length: 3 }, (_, i) => ({ text: `answer ${i}`, usage: { prompt: 3 + i, completion: 2 + i } })));
    await statementsOfRun(setup.configuration, 'first');
    const second = await statementsOfRun(setup.configuration, 'second');
    // A second later: a timestamp written into the text would differ now.
    await new Promise((resolve) => setTimeout(resolve, 1_100));
    const third = await statementsOfRun(setup.configuration, 'third');
    // The run's row, lease, request, provenance, status, steps and END.
    expect(third.size).toBeGreaterThanOrEqual(8);
    expect([...third].filter((sql) => !second.has(sql))).toEqual([]);
  });
});
