/**
 * Steps that carry large values (a long prompt in the REQUEST, a long answer
 * in the LLM step and the END) are stored and read back byte for byte: on
 * MySQL they go out as prepared statements (src/db/large-values.ts), so
 * every character the SQL text would have to escape is in them.
 */
import { carriesLargeValue, LARGE_VALUE_CHARS } from '../../src/db/large-values';
import { startTestServer, type TestServer } from '../support/server';
import { testDialects } from '../support/databases';
import { expectWellFormedTrace, RunKit } from './run-kit';

/** Every character the text protocol escapes, and some it must not touch, repeated past the threshold. */
function awkwardText(label: string, chars: number): string {
  const piece = `${label} 'single' "double" back\\slash \\' \\" ? ?? :name $1 %s \u0000nul \u001aeof \r\n\ttab 😀 ünïcødé 日本語 \u2028 `;
  return piece.repeat(Math.ceil(chars / piece.length)).slice(0, chars);
}

describe.each(testDialects)('large step payloads (%s)', (dialect) => {
  let ts: TestServer | null = null;
  const kit = new RunKit(() => ts!);

  afterEach(async () => {
    await ts?.stop();
    ts = null;
    await kit.closeProviders();
  });

  test('a long prompt and a long answer with every escaped character come back exactly, in the trace and in the END', async () => {
    ts = await startTestServer(dialect);
    const setup = await kit.setup({ contextLength: 200_000 });
    const prompt = awkwardText('prompt', 3 * LARGE_VALUE_CHARS);
    const answer = awkwardText('answer', 5 * LARGE_VALUE_CHARS);
    setup.provider.script({ text: answer, usage: { prompt: 10, completion: 10 } });
    const run = await kit.waitForRun((await kit.startRun({ configuration: setup.configuration, prompt, tools: [] })).id);
    expect({ status: run.status, error: run.error, kinds: run.steps.map((step) => step.kind) }).toEqual({ status: 'COMPLETED', error: null, kinds: ['CONTEXT', 'REQUEST', 'LLM', 'END'] });
    expectWellFormedTrace(run.steps);
    const request = run.steps.find((step) => step.kind === 'REQUEST');
    const llm = run.steps.find((step) => step.kind === 'LLM');
    expect(request?.messagesSent?.at(-1)?.content).toBe(prompt);
    expect(llm?.content).toBe(answer);
    expect(run.finalContent).toBe(answer);
    // The row itself, as TYPO3 reads it: valid JSON holding the same text.
    const rows = (await ts.database.query(`SELECT e.payload FROM tx_nrllm_agentrun_event e JOIN tx_nrllm_agentrun r ON r.uid = e.run WHERE r.uuid = ? AND e.kind = 'llm'`, [run.id])) as { payload: string }[];
    expect((JSON.parse(rows[0]!.payload) as { content: string }).content).toBe(answer);
  });
});

test('only a string past the threshold is a large value', () => {
  expect(carriesLargeValue([1, null, 'x'.repeat(LARGE_VALUE_CHARS)])).toBe(false);
  expect(carriesLargeValue([1, null, 'x'.repeat(LARGE_VALUE_CHARS + 1)])).toBe(true);
});
