/**
 * Logs never carry what was being written (SQL parameters: prompts, answers,
 * snippet text) and every line is bounded. Writes are made to fail the way a
 * database makes them fail, with a trigger refusing the statement.
 */
import { testDialects } from '../support/databases';
import { createSnippet } from '../support/factories';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';
import { captureLog, type CapturedLog } from './support/log-capture';

/** Every line of the log, however long, must stay below this. */
const LINE_LIMIT = 32 * 1024;

describe.each(testDialects)('bounded logs without data (%s)', (dialect) => {
  let t: TestServer;
  let log: CapturedLog;
  const kit = new RunKit(() => t);

  beforeAll(async () => {
    log = captureLog('trace');
    t = await startTestServer(dialect, { env: { PROVIDER_MAX_RESPONSE_BYTES: String(64 * 1024 * 1024) }, server: { logger: log.logger } });
  });
  afterAll(async () => {
    await t?.stop();
    await kit.closeProviders();
  });

  const refuseWrites = async (name: string, table: string, event: 'INSERT' | 'UPDATE', condition: string) => {
    if (dialect === 'sqlite') {
      await t.database.query(`CREATE TRIGGER ${name} BEFORE ${event} ON ${table} WHEN ${condition} BEGIN SELECT RAISE(ABORT, 'refused by a trigger'); END`);
    } else {
      await t.database.query(
        `CREATE TRIGGER ${name} BEFORE ${event} ON ${table} FOR EACH ROW BEGIN IF ${condition} THEN SIGNAL SQLSTATE '45000' SET MESSAGE_TEXT = 'refused by a trigger'; END IF; END`,
      );
    }
  };
  const lines = () => log.text().split('\n').filter((line) => line !== '');

  it('a failed update of a snippet logs the failure without the snippet text, on a bounded line', async () => {
    const snippet = await createSnippet(t);
    await refuseWrites('refuse_snippet_update', 'tx_nrllm_promptsnippet', 'UPDATE', "NEW.snippet LIKE '%MARKER_IN_TEXT%'");
    const text = `MARKER_IN_TEXT ${'a long prompt fragment '.repeat(2800)}`;
    const result = await t.gql('mutation($uid: Int!, $s: String!) { updateSnippet(uid: $uid, input: { snippet: $s }) { uid } }', { uid: snippet.uid, s: text });
    expect(result.errors?.[0]?.extensions?.code).toBe('INTERNAL_SERVER_ERROR');

    const errors = log.entries().filter((entry) => Number(entry.level) >= 50);
    expect(errors.length).toBeGreaterThan(0);
    expect(JSON.stringify(errors)).toMatch(/refused by a trigger/);
    expect(log.text()).not.toContain('MARKER_IN_TEXT');
    expect(log.text()).not.toContain('a long prompt fragment a long prompt fragment');
    for (const line of lines()) expect(line.length).toBeLessThan(LINE_LIMIT);
  });

  it('a run whose 20 MB answer cannot be stored ends, and its log lines hold neither the answer nor the prompt', async () => {
    await refuseWrites('refuse_big_step', 'tx_nrllm_agentrun_event', 'INSERT', 'LENGTH(NEW.payload) > 1000000');
    const setup = await kit.setup();
    const answer = `ANSWER_MARKER ${'x'.repeat(20 * 1024 * 1024)}`;
    setup.provider.script({ text: answer, usage: { prompt: 3, completion: 5 } });
    const started = await kit.startRun({ configuration: setup.configuration, prompt: 'PROMPT_MARKER tell me everything', tools: [], stream: false });
    const run = await kit.waitForRun(started.id, 60_000);
    expect(['FAILED', 'COMPLETED']).toContain(run.status);
    expect(run.steps[run.steps.length - 1]?.kind).toBe('END');

    expect(log.text()).not.toContain('ANSWER_MARKER');
    expect(log.text()).not.toContain('PROMPT_MARKER');
    expect(log.text()).not.toContain('xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx');
    for (const line of lines()) expect(line.length).toBeLessThan(LINE_LIMIT);
  });

  it('whatever is logged, a line stays bounded', () => {
    const huge = 'y'.repeat(5_000_000);
    log.logger.error({ err: Object.assign(new Error(huge), { parameters: [huge], sql: huge }), list: Array.from({ length: 10_000 }, () => huge), deep: { a: { b: { c: { d: { e: { f: { g: huge } } } } } } } }, huge);
    const last = lines().at(-1)!;
    expect(last.length).toBeLessThan(LINE_LIMIT);
    expect(JSON.parse(last)).toMatchObject({ level: 50 });
  });
});
