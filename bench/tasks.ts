/**
 * Tasks: how long rendering a task's prompt takes, and what validating a
 * JSON task's answer against its schema adds to a run.
 *
 * 1. The render function: what turns a task's template, declared variables,
 *    input and variables into the user prompt (`resolveVariables` →
 *    `renderTemplate` → `userPromptOf`, the functions `renderTask` and
 *    `runTask` both call), on a realistic task: a 1.5 KB template with five
 *    placeholders (two declared with types and defaults), a 4 KB input, a
 *    JSON output schema. Timed call by call, p99 against the target of 1 ms.
 *    Beside it, in the same run: nr_llm's own `buildPrompt`, a plain
 *    `str_replace` of `{{input}}` (here `replaceAll`), which checks nothing.
 *    For scale, the whole `renderTask` service path too (the task read,
 *    the configuration's composition and the run's preparation), per database.
 * 2. Validation overhead: `runTask` (waiting for the end) of a JSON task with
 *    an output schema against the same task without one, over a zero-latency
 *    provider answering valid JSON (one call each), interleaved so both see
 *    the same load. Time = the call's duration − provider time. With the
 *    schema the run decodes the answer and validates it with Ajv, and stores
 *    the outcome on the LLM step; the target is < 5 % (ratio of the means
 *    < 1.05). On a shared machine two means of ~15 ms differ by several per
 *    cent either way from noise alone, so the answer check is also timed on
 *    its own (decode + Ajv, as the loop and the result do it) and shown as a
 *    share of the run.
 *
 * Run: `npx tsc -p tsconfig.build.json && NODE_ENV=production node dist/bench/tasks.js`
 * (BENCH_MYSQL_URL=mysql://root@127.0.0.1:3306/test adds MySQL; BENCH_TASK_RUNS overrides 200.)
 */
import { performance } from 'node:perf_hooks';
import { createScriptedAdapter } from '../test/support/scripted-adapter';
import { renderTemplate, resolveVariables, type DeclaredVariable } from '../src/tasks/task-rules';
import { userPromptOf } from '../src/tasks/task.service';
import { answerCheckFields, checkStructuredAnswer, schemaText } from '../src/prompt/structured-output';
import { round, writeResult } from './bench-support';
import {
  BENCH_CALLER,
  benchDialects,
  createScratchDatabase,
  markdownTable,
  seedRunConfiguration,
  startRunsServer,
  stats,
  timedAdapter,
  type BenchDialect,
  type ProviderTime,
  type Stats,
} from './runs-support';

const RENDER_TARGET_MS = 1;
const OVERHEAD_TARGET = 1.05;

const SCHEMA = {
  type: 'object',
  properties: {
    title: { type: 'string', minLength: 1, maxLength: 120 },
    summary: { type: 'string', minLength: 1 },
    keywords: { type: 'array', items: { type: 'string', minLength: 1 }, minItems: 1, maxItems: 10 },
    audience: { enum: ['editors', 'readers', 'developers'] },
    readingMinutes: { type: 'integer', minimum: 1, maximum: 60 },
  },
  required: ['title', 'summary', 'keywords', 'audience', 'readingMinutes'],
  additionalProperties: false,
};
const VALID_ANSWER = JSON.stringify({
  title: 'Packing for a weekend in the mountains',
  summary: 'Layers, water, a map and a headlamp: what a short mountain trip needs, and what it does not.',
  keywords: ['mountains', 'packing', 'weekend', 'hiking'],
  audience: 'readers',
  readingMinutes: 4,
});

const TEMPLATE =
  'You are preparing material for {{audience}} of a regional news site.\n' +
  'Write in a {{tone}} tone and keep the result under {{maxWords}} words.\n' +
  'Guidelines:\n' +
  '- Name the place and the season when the text does.\n- Do not invent quotes, figures or dates.\n- Prefer short sentences and concrete nouns.\n'.repeat(8) +
  'Include related links: {{includeLinks}}.\n\nThe article:\n{{input}}\n\nEnd of the article.';
const DECLARED: DeclaredVariable[] = [
  { name: 'tone', type: 'string', default: 'friendly', description: 'The voice of the text' },
  { name: 'maxWords', type: 'integer', default: 200, description: null },
  { name: 'includeLinks', type: 'boolean', default: false, description: null },
];
const INPUT = 'The mountain huts open again in May; the paths above 2,000 m stay snowy until June. '.repeat(48);
const VARIABLES = { audience: 'readers', maxWords: 150 };

export interface RenderFunctionResult {
  iterations: number;
  templateBytes: number;
  inputBytes: number;
  render: Stats;
  buildPrompt: Stats;
  /** What the schema adds per answer: the loop's check stored on the step, and the task result's decode and validation. */
  answerCheck: Stats;
}

export interface TaskBenchRow {
  dialect: BenchDialect;
  /** The renderTask service path (task read, composition, preparation). */
  renderService: Stats;
  runs: number;
  withSchema: Stats;
  withoutSchema: Stats;
  ratioMean: number;
  ratioP50: number;
}

export interface TaskBenchResult {
  renderFunction: RenderFunctionResult;
  rows: TaskBenchRow[];
}

/** The render function, call by call. */
export function runRenderFunction(iterations = 20_000): RenderFunctionResult {
  const task = { row: { outputFormat: 'json' }, outputSchema: schemaText(SCHEMA) } as Parameters<typeof userPromptOf>[0];
  const render = (): string => {
    const values = resolveVariables(TEMPLATE, DECLARED, INPUT, VARIABLES);
    if (!values.ok) throw new Error(values.message);
    return userPromptOf(task, renderTemplate(TEMPLATE, values.value));
  };
  const buildPrompt = (): string => TEMPLATE.replaceAll('{{input}}', INPUT);
  const schemaJson = schemaText(SCHEMA);
  const answerCheck = (): number => (answerCheckFields(VALID_ANSWER, schemaJson).outputValid && checkStructuredAnswer(VALID_ANSWER, schemaJson).valid ? 1 : 0);
  let sink = 0;
  for (let i = 0; i < 2_000; i += 1) sink += render().length + buildPrompt().length + answerCheck();
  const renderMs: number[] = [];
  const buildMs: number[] = [];
  const checkMs: number[] = [];
  for (let i = 0; i < iterations; i += 1) {
    const c0 = performance.now();
    sink += answerCheck();
    checkMs.push(performance.now() - c0);
    let t0 = performance.now();
    sink += render().length;
    renderMs.push(performance.now() - t0);
    t0 = performance.now();
    sink += buildPrompt().length;
    buildMs.push(performance.now() - t0);
  }
  if (sink === 0) throw new Error('nothing rendered');
  return { iterations, templateBytes: Buffer.byteLength(TEMPLATE), inputBytes: Buffer.byteLength(INPUT), render: stats(renderMs, 4), buildPrompt: stats(buildMs, 4), answerCheck: stats(checkMs, 4) };
}

export async function runTasksBench(runs = Number(process.env.BENCH_TASK_RUNS ?? 200)): Promise<TaskBenchResult> {
  const renderFunction = runRenderFunction();
  console.log(`render function p50 ${renderFunction.render.p50} ms, p99 ${renderFunction.render.p99} ms (buildPrompt p99 ${renderFunction.buildPrompt.p99} ms); answer check mean ${renderFunction.answerCheck.mean} ms`);
  const rows: TaskBenchRow[] = [];
  for (const dialect of benchDialects()) {
    const database = await createScratchDatabase(dialect);
    const sink: { current: ProviderTime } = { current: { ms: 0, each: [] } };
    const server = await startRunsServer(database, {
      runs: {
        adapterFactory: () => {
          const target = sink.current;
          return timedAdapter(createScriptedAdapter([() => ({ content: VALID_ANSWER, usage: [300, 60] })]), () => target);
        },
      },
    });
    try {
      const { services } = server;
      const configuration = await seedRunConfiguration(services);
      const common = { promptTemplate: TEMPLATE, configuration, outputFormat: 'json', variables: DECLARED, skills: ['bench_runs_skill'] };
      await services.tasks.create({ ...common, identifier: 'bench_task_schema', name: 'With schema', outputSchema: SCHEMA });
      await services.tasks.create({ ...common, identifier: 'bench_task_plain', name: 'Without schema' });

      const renderMs: number[] = [];
      for (let i = 0; i < 30; i += 1) await services.tasks.render('bench_task_schema', INPUT, VARIABLES, BENCH_CALLER);
      for (let i = 0; i < runs; i += 1) {
        const t0 = performance.now();
        await services.tasks.render('bench_task_schema', INPUT, VARIABLES, BENCH_CALLER);
        renderMs.push(performance.now() - t0);
      }

      const runTask = async (task: string): Promise<number> => {
        const provider: ProviderTime = { ms: 0, each: [] };
        sink.current = provider;
        const t0 = performance.now();
        const result = await services.tasks.run({ task, input: INPUT, variables: VARIABLES }, BENCH_CALLER);
        const ms = performance.now() - t0 - provider.ms;
        if (result.outputValid !== true || result.attempts !== 1) throw new Error(`${task}: outputValid ${result.outputValid}, attempts ${result.attempts}`);
        return ms;
      };
      for (let i = 0; i < 20; i += 1) {
        await runTask('bench_task_schema');
        await runTask('bench_task_plain');
      }
      const withSchema: number[] = [];
      const withoutSchema: number[] = [];
      for (let i = 0; i < runs; i += 1) {
        // Alternating which goes first, so neither always follows the other.
        if (i % 2 === 0) {
          withSchema.push(await runTask('bench_task_schema'));
          withoutSchema.push(await runTask('bench_task_plain'));
        } else {
          withoutSchema.push(await runTask('bench_task_plain'));
          withSchema.push(await runTask('bench_task_schema'));
        }
      }
      const schemaStats = stats(withSchema);
      const plainStats = stats(withoutSchema);
      const row: TaskBenchRow = {
        dialect,
        renderService: stats(renderMs),
        runs,
        withSchema: schemaStats,
        withoutSchema: plainStats,
        ratioMean: round(schemaStats.mean / plainStats.mean, 3),
        ratioP50: round(schemaStats.p50 / plainStats.p50, 3),
      };
      rows.push(row);
      console.log(`${dialect}: renderTask service p99 ${row.renderService.p99} ms; runTask with schema mean ${schemaStats.mean} ms, without ${plainStats.mean} ms, ratio ${row.ratioMean}`);
    } finally {
      await server.stop();
      await database.cleanup();
    }
  }
  writeResult('tasks', { measuredAt: new Date().toISOString(), node: process.version, nodeEnv: process.env.NODE_ENV ?? '', renderTargetMs: RENDER_TARGET_MS, overheadTarget: OVERHEAD_TARGET, renderFunction, rows });
  return { renderFunction, rows };
}

export function formatTasksBench(result: TaskBenchResult): string {
  const { renderFunction: render } = result;
  const renderTable = markdownTable(
    ['render function', 'p50 (ms)', 'p99 (ms)', `target p99 < ${RENDER_TARGET_MS} ms`, "nr_llm's buildPrompt p99 (ms)", 'calls'],
    [[`${render.templateBytes} B template, ${render.inputBytes} B input, 5 placeholders, schema`, render.render.p50, render.render.p99, render.render.p99 < RENDER_TARGET_MS ? 'met' : 'missed', render.buildPrompt.p99, render.iterations]],
  );
  const runTable = markdownTable(
    [
      'database',
      'runTask with schema, mean (ms)',
      'without schema, mean (ms)',
      'overhead (means)',
      'overhead (p50)',
      `target < ${Math.round((OVERHEAD_TARGET - 1) * 100)} %`,
      'answer check alone ÷ run mean',
      'renderTask service p50 / p99 (ms)',
      'runs each',
    ],
    result.rows.map((row) => [
      row.dialect,
      row.withSchema.mean,
      row.withoutSchema.mean,
      `${((row.ratioMean - 1) * 100).toFixed(1)} %`,
      `${((row.ratioP50 - 1) * 100).toFixed(1)} %`,
      row.ratioMean < OVERHEAD_TARGET ? 'met' : 'missed',
      `${((render.answerCheck.mean / row.withoutSchema.mean) * 100).toFixed(2)} %`,
      `${row.renderService.p50} / ${row.renderService.p99}`,
      row.runs,
    ]),
  );
  return `${renderTable}\n\n${runTable}`;
}

if (require.main === module) {
  runTasksBench()
    .then((result) => console.log(formatTasksBench(result)))
    .catch((error: unknown) => {
      console.error(error);
      process.exit(1);
    });
}
