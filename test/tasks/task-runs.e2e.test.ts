/**
 * runTask through the server: a run like any other, with the answer of a
 * JSON task validated on the server against its schema (one repair call,
 * `invalid_output` after that), the provider's own JSON mode asked for, and
 * the task on the run and on `run.finished`.
 */
import { testDialects } from '../support/databases';
import { collect, startTestServer, type TestServer } from '../support/server';
import { startWebhookReceiver } from '../support/webhook-receiver';
import { RunKit, uniqueIdentifier, type RunSetup } from '../runs/run-kit';
import { gate } from '../runs/scripted-provider';

const SCHEMA = { type: 'object', properties: { title: { type: 'string', minLength: 1 }, keywords: { type: 'array', items: { type: 'string' } } }, required: ['title', 'keywords'], additionalProperties: false };
const SCHEMA_TEXT = JSON.stringify(SCHEMA);
const INSTRUCTION = '\n\nRespond with ONLY a single JSON value conforming to this JSON Schema. Do not wrap it in Markdown code fences and do not add any prose:\n';
const TASK_RUN_FIELDS = 'run { id status terminationReason error task promptTokens completionTokens totalTokens finalContent } content outputFormat output outputValid rawOutput appliedSkills attempts';

interface TaskRunView {
  run: { id: string; status: string; terminationReason: string | null; error: string | null; task: string | null; promptTokens: number; completionTokens: number; totalTokens: number; finalContent: string | null };
  content: string | null;
  outputFormat: string;
  output: unknown;
  outputValid: boolean | null;
  rawOutput: string | null;
  appliedSkills: string[];
  attempts: number;
}

/** The user message a scripted provider received (OpenAI wire). */
const userMessageOf = (body: Record<string, unknown>) => (body.messages as { role: string; content: string }[]).find((message) => message.role === 'user')!.content;

describe.each(testDialects)('task runs on %s', (dialect) => {
  let t: TestServer;
  const kit = new RunKit(() => t);
  beforeAll(async () => {
    t = await startTestServer(dialect, { env: { WEBHOOK_ALLOWED_HOSTS: '127.0.0.1', WEBHOOK_RETRY_BASE_MS: '50', WEBHOOK_TIMEOUT_MS: '1000' } });
  });
  afterAll(async () => {
    await kit.closeProviders();
    await t?.stop();
  });

  const createTask = async (setup: RunSetup, input: Record<string, unknown>) => {
    const identifier = uniqueIdentifier('task');
    await t.ok('mutation($input: CreateTaskInput!) { createTask(input: $input) { uid } }', { input: { identifier, name: 'Task', configuration: setup.configuration, ...input } });
    return identifier;
  };
  const runTask = (input: Record<string, unknown>) => t.gql<{ runTask: TaskRunView }>(`mutation($input: RunTaskInput!) { runTask(input: $input) { ${TASK_RUN_FIELDS} } }`, { input });
  const runTaskOk = async (input: Record<string, unknown>) => (await t.ok<{ runTask: TaskRunView }>(`mutation($input: RunTaskInput!) { runTask(input: $input) { ${TASK_RUN_FIELDS} } }`, { input })).runTask;
  const jsonTask = (setup: RunSetup) => createTask(setup, { promptTemplate: 'Keywords of: {{input}}', outputFormat: 'json', outputSchema: SCHEMA });

  it('a valid first answer takes one request; output is the parsed object and the provider is asked for its JSON mode', async () => {
    const setup = await kit.setup();
    const task = await jsonTask(setup);
    setup.provider.script({ text: '{"title":"Cats","keywords":["cat"]}', usage: { prompt: 10, completion: 5 } });
    const result = await runTaskOk({ task, input: 'About cats.' });
    expect(result).toMatchObject({ attempts: 1, output: { title: 'Cats', keywords: ['cat'] }, outputValid: true, rawOutput: null, outputFormat: 'json', content: '{"title":"Cats","keywords":["cat"]}' });
    expect(result.run).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed', task });
    expect(setup.provider.requests).toHaveLength(1);
    const body = setup.provider.requests[0]!.body;
    expect(body.response_format).toEqual({ type: 'json_schema', json_schema: { name: 'output', schema: SCHEMA } });
    expect(userMessageOf(body)).toBe('Keywords of: About cats.' + INSTRUCTION + SCHEMA_TEXT);
    expect(body.tools).toBeUndefined();
  });

  it('a valid answer inside a Markdown json code fence is taken without a repair', async () => {
    const setup = await kit.setup();
    const task = await jsonTask(setup);
    setup.provider.script({ text: '```json\n{"title":"T","keywords":[]}\n```' });
    const result = await runTaskOk({ task, input: 'x' });
    expect(result).toMatchObject({ attempts: 1, output: { title: 'T', keywords: [] }, outputValid: true });
    expect(setup.provider.requests).toHaveLength(1);
  });

  it('an invalid then valid answer takes two requests; the second shows nr_llm\'s repair text with the first answer', async () => {
    const setup = await kit.setup();
    const task = await jsonTask(setup);
    setup.provider.script({ text: '{"title":""}', usage: { prompt: 10, completion: 3 } }, { text: '{"title":"Fixed","keywords":["a"]}', usage: { prompt: 20, completion: 6 } });
    const result = await runTaskOk({ task, input: 'x' });
    expect(result).toMatchObject({ attempts: 2, output: { title: 'Fixed', keywords: ['a'] }, outputValid: true, rawOutput: null });
    expect(result.run).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed', promptTokens: 30, completionTokens: 9 });
    expect(setup.provider.requests).toHaveLength(2);
    expect(userMessageOf(setup.provider.requests[1]!.body)).toBe(
      'Keywords of: x' + INSTRUCTION + SCHEMA_TEXT + '\n\nYour previous response did not conform to the schema. It was:\n{"title":""}',
    );
  });

  it('invalid twice: the run is FAILED invalid_output with nr_llm\'s text, the raw answer kept and usage covering both calls', async () => {
    const setup = await kit.setup();
    const task = await jsonTask(setup);
    setup.provider.script({ text: 'not json at all', usage: { prompt: 10, completion: 3 } }, { text: '{"title":"No keywords"}', usage: { prompt: 20, completion: 4 } });
    const result = await runTaskOk({ task, input: 'x' });
    expect(result).toMatchObject({ attempts: 2, output: null, outputValid: false, rawOutput: '{"title":"No keywords"}' });
    expect(result.run).toMatchObject({
      status: 'FAILED',
      terminationReason: 'invalid_output',
      error: 'Structured completion did not match the required schema after one repair attempt.',
      promptTokens: 30,
      completionTokens: 7,
      totalTokens: 37,
    });
    const run = await kit.run(result.run.id);
    const answers = run.steps.filter((step) => step.kind === 'LLM');
    expect(answers.map((step) => step.content)).toEqual(['not json at all', '{"title":"No keywords"}']);
    const stored = (await t.database.query('SELECT payload FROM tx_nrllm_agentrun_event e JOIN tx_nrllm_agentrun r ON r.uid = e.run WHERE r.uuid = ? AND e.kind = ? ORDER BY e.sequence', [result.run.id, 'llm'])) as { payload: string }[];
    const payloads = stored.map((row) => JSON.parse(row.payload) as { outputValid: boolean; outputError?: string });
    expect(payloads.map((payload) => payload.outputValid)).toEqual([false, false]);
    expect(payloads[1]!.outputError).toMatch(/keywords/);
  });

  it('a JSON task without a schema gets JSON mode and no repair; a non-JSON answer is output null, outputValid false, content kept', async () => {
    const setup = await kit.setup();
    const task = await createTask(setup, { promptTemplate: '{{input}}', outputFormat: 'json' });
    setup.provider.script({ text: 'Sorry, no JSON today.' });
    const result = await runTaskOk({ task, input: 'x' });
    expect(result).toMatchObject({ attempts: 1, output: null, outputValid: false, content: 'Sorry, no JSON today.' });
    expect(result.run).toMatchObject({ status: 'COMPLETED', terminationReason: 'completed' });
    expect(setup.provider.requests).toHaveLength(1);
    expect(setup.provider.requests[0]!.body.response_format).toEqual({ type: 'json_object' });
    expect(userMessageOf(setup.provider.requests[0]!.body)).toBe('x\n\nRespond with valid JSON only. No markdown, no explanation.');
  });

  it('with wait:false the run comes back at once, can be followed to its end, and run.finished carries the task', async () => {
    const receiver = await startWebhookReceiver();
    const { createWebhook } = await t.ok<{ createWebhook: { id: string } }>('mutation($input: CreateWebhookInput!) { createWebhook(input: $input) { id } }', { input: { url: receiver.url, events: ['run.finished'] } });
    try {
      const setup = await kit.setup();
      const task = await createTask(setup, { promptTemplate: 'Alt text: {{input}}' });
      setup.provider.script({ text: 'A cat on a mat.' });
      const started = await runTaskOk({ task, input: 'cat.jpg', wait: false });
      expect(['QUEUED', 'RUNNING']).toContain(started.run.status);
      expect(started).toMatchObject({ attempts: 0, content: null, outputValid: null });
      const ended = await kit.waitForRun(started.run.id);
      expect(ended).toMatchObject({ status: 'COMPLETED', finalContent: 'A cat on a mat.' });
      const [delivery] = await receiver.waitFor(1, (request) => (request.json.data.run as { id: string }).id === started.run.id);
      expect(delivery!.json.data.run).toMatchObject({ id: started.run.id, task, status: 'COMPLETED' });
    } finally {
      await t.ok('mutation($id: ID!) { deleteWebhook(id: $id) }', { id: createWebhook.id });
      await receiver.close();
    }
  });

  it('with wait:false the run comes back QUEUED and runTrace follows it to its END', async () => {
    const setup = await kit.setup();
    const task = await createTask(setup, { promptTemplate: 'Alt text: {{input}}' });
    const held = gate();
    setup.provider.script({ text: 'A dog.', gate: held.promise });
    const started = await runTaskOk({ task, input: 'dog.jpg', wait: false });
    expect(started.run).toMatchObject({ status: 'QUEUED', task });
    const watched = collect<{ runTrace: { kind: string; content: string | null } }>(t.wsClient(), 'subscription($id: ID!) { runTrace(runId: $id) { kind content } }', { id: started.run.id });
    held.open();
    await watched.done;
    expect(watched.errors).toEqual([]);
    const kinds = watched.events.map((event) => event.runTrace.kind);
    expect(kinds.at(-1)).toBe('END');
    expect(watched.events.find((event) => event.runTrace.kind === 'LLM')?.runTrace.content).toBe('A dog.');
  });

  it('a variable value holding {{input}} reaches the provider verbatim, never expanded', async () => {
    const setup = await kit.setup();
    const task = await createTask(setup, { promptTemplate: 'Write for {{audience}}: {{input}}' });
    setup.provider.script({ text: 'ok' });
    await runTaskOk({ task, input: 'text', variables: { audience: '{{input}} fans' } });
    expect(userMessageOf(setup.provider.requests[0]!.body)).toBe('Write for {{input}} fans: text');
  });

  it('variable faults, an unknown or inactive task and a missing default configuration start no run and send nothing', async () => {
    const setup = await kit.setup();
    const task = await createTask(setup, { promptTemplate: 'Write for {{audience}}: {{input}}' });
    const inactive = await createTask(setup, { promptTemplate: '{{input}}', isActive: false });
    const noConfiguration = uniqueIdentifier('task');
    await t.ok('mutation($input: CreateTaskInput!) { createTask(input: $input) { uid } }', { input: { identifier: noConfiguration, name: 'Task', promptTemplate: '{{input}}' } });
    const before = ((await t.database.query('SELECT COUNT(*) AS n FROM tx_nrllm_agentrun')) as { n: number | string }[])[0]!.n;
    expect((await runTask({ task, input: 'x' })).errors?.[0]).toMatchObject({ message: 'Missing variables: audience', extensions: { code: 'BAD_USER_INPUT' } });
    expect((await runTask({ task, input: 'x', variables: { audience: 'a', tone: 'b' } })).errors?.[0]).toMatchObject({ message: 'Unknown variables: tone', extensions: { code: 'BAD_USER_INPUT' } });
    expect((await runTask({ task: 'no_such_task', input: 'x' })).errors?.[0]).toMatchObject({ message: 'Task not found', extensions: { code: 'NOT_FOUND' } });
    expect((await runTask({ task: inactive, input: 'x' })).errors?.[0]).toMatchObject({ message: 'Task is not active', extensions: { code: 'BAD_USER_INPUT' } });
    const noDefault = (await runTask({ task: noConfiguration, input: 'x' })).errors?.[0];
    expect(noDefault?.extensions?.code).toBe('BAD_USER_INPUT');
    expect(noDefault?.message).toMatch(/no active default configuration with a model/);
    const after = ((await t.database.query('SELECT COUNT(*) AS n FROM tx_nrllm_agentrun')) as { n: number | string }[])[0]!.n;
    expect(Number(after)).toBe(Number(before));
    expect(setup.provider.requests).toHaveLength(0);
  });

  it('the task\'s skills follow the configuration\'s; the run stores the task\'s uid on its request and its usage is booked to the task', async () => {
    const skill = uniqueIdentifier('skill');
    await kit.createSkill({ identifier: skill, name: 'Style', body: 'Be brief.' });
    const setup = await kit.setup();
    const task = await createTask(setup, { promptTemplate: '{{input}}', skills: [skill] });
    setup.provider.script({ text: 'ok' });
    const result = await runTaskOk({ task, input: 'x' });
    expect(result.appliedSkills).toEqual([skill]);
    const [row] = (await t.database.query('SELECT q.request AS request, t.uid AS taskUid FROM promptwire_run_request q JOIN tx_nrllm_agentrun r ON r.uid = q.run_uid JOIN tx_nrllm_task t ON t.identifier = ? WHERE r.uuid = ?', [task, result.run.id])) as { request: string; taskUid: number }[];
    expect(JSON.parse(row!.request).taskUid).toBe(Number(row!.taskUid));
    // The usage ledger books the call to the task (nr_llm's task_uid).
    const booked = (await t.database.query('SELECT SUM(request_count) AS n FROM tx_nrllm_service_usage WHERE task_uid = ?', [Number(row!.taskUid)])) as { n: number | string | null }[];
    expect(Number(booked[0]!.n)).toBe(1);
  });
});
