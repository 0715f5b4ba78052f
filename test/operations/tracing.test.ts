/**
 * OpenTelemetry traces as an operator sees them: the real server in a child
 * process (OTel's context propagation needs a real Node process, not jest's
 * module sandbox) exporting to a real OTLP/HTTP receiver in this process,
 * over both protocols. Each traced GraphQL request (every mutation; a query
 * when its client sends a traceparent, or every query with TRACE_QUERIES=all)
 * is one SERVER span, named by its operation's type once resolved; each run is one trace below the request
 * that started it, with the GenAI conventions' spans and attributes; usage equals the
 * stored steps; message content appears only when asked for; a collector that
 * hangs never holds up a run.
 */
import crypto from 'node:crypto';
import { createTestDatabase, testDialects, type TestDatabase, type TestDialect } from '../support/databases';
import { ADMIN_TOKEN, type TestServer } from '../support/server';
import { startServerProcess, type ServerProcess } from '../support/server-process';
import { RunKit, RUN_FIELDS, type RunView } from '../runs/run-kit';
import { OtlpReceiver, type ReceivedSpan } from './otlp-receiver';

jest.setTimeout(120_000);

const SPAN_KIND = { internal: 1, server: 2, client: 3 };
const STATUS_ERROR = 2;

interface Case {
  dialect: TestDialect;
  protocol: 'http/protobuf' | 'http/json';
  capture: boolean;
}

const cases: Case[] = [
  { dialect: 'sqlite', protocol: 'http/protobuf', capture: false },
  { dialect: 'sqlite', protocol: 'http/json', capture: true },
  ...(testDialects.includes('mysql') ? [{ dialect: 'mysql' as const, protocol: 'http/protobuf' as const, capture: false }] : []),
];

/** RunKit speaks through `ok`; a server process offers `gql`. */
function asTestServer(server: ServerProcess): TestServer {
  return {
    async ok(query: string, variables?: Record<string, unknown>, token?: string | null) {
      const result = await server.gql(query, variables, token);
      if (result.errors?.length) throw new Error(`GraphQL errors: ${JSON.stringify(result.errors)}`);
      return result.data;
    },
  } as unknown as TestServer;
}

describe.each(cases)('OpenTelemetry traces ($dialect, $protocol, message content: $capture)', ({ dialect, protocol, capture }) => {
  let receiver: OtlpReceiver;
  let database: TestDatabase;
  let server: ServerProcess;
  const kit = new RunKit(() => asTestServer(server));

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
    database = await createTestDatabase(dialect);
    server = await startServerProcess(database, {
      OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url,
      OTEL_EXPORTER_OTLP_PROTOCOL: protocol,
      OTEL_EXPORTER_OTLP_HEADERS: 'x-collector-key=secret%20value',
      OTEL_SERVICE_NAME: 'promptwire-under-test',
      OTEL_BSP_SCHEDULE_DELAY: '50',
      OTEL_EXPORTER_OTLP_TIMEOUT: '2000',
      ...(capture ? { OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT: 'true' } : {}),
    });
  });
  afterAll(async () => {
    await server?.stop();
    await kit.closeProviders();
    await receiver?.close();
    await database?.drop();
  });

  /** startRun over HTTP with a W3C traceparent, as an instrumented client sends it. */
  async function startTracedRun(input: Record<string, unknown>): Promise<{ run: RunView; traceId: string; parentId: string }> {
    const traceId = crypto.randomBytes(16).toString('hex');
    const parentId = crypto.randomBytes(8).toString('hex');
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}`, traceparent: `00-${traceId}-${parentId}-01` },
      body: JSON.stringify({ query: `mutation StartTraced($input: StartRunInput!) { startRun(input: $input) { ${RUN_FIELDS} } }`, variables: { input } }),
    });
    const body = (await response.json()) as { data?: { startRun: RunView }; errors?: unknown };
    if (!body.data) throw new Error(`startRun failed: ${JSON.stringify(body.errors)}`);
    return { run: body.data.startRun, traceId, parentId };
  }

  const durationMs = (span: ReceivedSpan) => Number(span.endNs - span.startNs) / 1e6;
  const contentKeys = ['gen_ai.input.messages', 'gen_ai.output.messages', 'gen_ai.tool.call.arguments', 'gen_ai.tool.call.result', 'gen_ai.system_instructions'];

  test('a run is one trace below the request that started it, with a span per model call and per tool call', async () => {
    const setup = await kit.setup({ costInput: 100_000, costOutput: 200_000 });
    setup.provider.script(
      { toolCalls: [{ id: 'call_calc', name: 'calculator', arguments: { expression: '6 * 7' } }], usage: { prompt: 11, completion: 4 } },
      { text: 'It is 42.', usage: { prompt: 17, completion: 3 } },
    );
    const prompt = `What is 6*7? ${crypto.randomUUID()}`;
    const { run: started, traceId, parentId } = await startTracedRun({ configuration: setup.configuration, prompt, tools: ['calculator'] });
    const run = await kit.waitForRun(started.id);
    expect(run.status).toBe('COMPLETED');

    const spans = await receiver.waitFor((all) => {
      const inTrace = all.filter((span) => span.traceId === traceId);
      return inTrace.some((span) => span.name.startsWith('invoke_agent ')) && inTrace.filter((span) => span.name.startsWith('chat ')).length === 2 ? inTrace : null;
    });
    // One span for the request: no HTTP span with a GraphQL child, no leftover `POST /graphql`.
    const servers = spans.filter((span) => span.kind === SPAN_KIND.server);
    expect(servers.map((span) => span.name)).toEqual(['mutation']);
    const request = servers[0]!;
    const agent = spans.find((span) => span.name === `invoke_agent ${setup.configuration}`)!;
    const chats = spans.filter((span) => span.name === 'chat scripted-gpt').sort((a, b) => Number(a.startNs - b.startNs));
    const tools = spans.filter((span) => span.name === 'execute_tool calculator');
    expect(spans).toHaveLength(1 + 1 + 2 + 1);

    // The client's traceparent is the request span's parent; the request span is the run's.
    expect(request).toMatchObject({ parentSpanId: parentId });
    expect(request.attributes).toMatchObject({
      'http.request.method': 'POST',
      'http.route': '/graphql',
      'url.path': '/graphql',
      'http.response.status_code': 200,
      'graphql.operation.type': 'mutation',
      'graphql.operation.name': 'StartTraced',
    });
    expect(request.attributes).not.toHaveProperty('error.type');
    expect(request.status.code).not.toBe(STATUS_ERROR);
    expect(agent).toMatchObject({ parentSpanId: request.spanId, kind: SPAN_KIND.internal });
    expect(chats).toHaveLength(2);
    expect(tools).toHaveLength(1);
    for (const child of [...chats, ...tools]) expect(child.parentSpanId).toBe(agent.spanId);

    expect(agent.attributes).toMatchObject({
      'gen_ai.operation.name': 'invoke_agent',
      'gen_ai.agent.name': setup.configuration,
      'gen_ai.conversation.id': run.id,
      'gen_ai.provider.name': 'custom',
      'gen_ai.request.model': 'scripted-gpt',
      'gen_ai.usage.input_tokens': run.promptTokens,
      'gen_ai.usage.output_tokens': run.completionTokens,
      'promptwire.run.status': 'completed',
    });
    expect(agent.status.code).not.toBe(STATUS_ERROR);

    // Usage and durations are the stored LLM steps', call by call.
    const llmSteps = run.steps.filter((step) => step.kind === 'LLM');
    expect(llmSteps).toHaveLength(2);
    chats.forEach((chat, index) => {
      const step = llmSteps[index]!;
      expect(chat.kind).toBe(SPAN_KIND.client);
      expect(chat.attributes).toMatchObject({
        'gen_ai.operation.name': 'chat',
        'gen_ai.provider.name': 'custom',
        'gen_ai.request.model': 'scripted-gpt',
        'gen_ai.conversation.id': run.id,
        'gen_ai.usage.input_tokens': step.promptTokens,
        'gen_ai.usage.output_tokens': step.completionTokens,
        'gen_ai.response.finish_reasons': [index === 0 ? 'tool_calls' : 'stop'],
      });
      expect(durationMs(chat)).toBeCloseTo(step.durationMs, 1);
    });
    const toolStep = run.steps.find((step) => step.kind === 'TOOL')!;
    expect(tools[0]!.attributes).toMatchObject({
      'gen_ai.operation.name': 'execute_tool',
      'gen_ai.tool.name': 'calculator',
      'gen_ai.tool.call.id': 'call_calc',
      'gen_ai.conversation.id': run.id,
    });
    expect(durationMs(tools[0]!)).toBeCloseTo(toolStep.durationMs, 1);
    // In order: first call, the tool, second call.
    expect(tools[0]!.startNs).toBeGreaterThanOrEqual(chats[0]!.endNs);
    expect(chats[1]!.startNs).toBeGreaterThanOrEqual(tools[0]!.endNs);
    expect(agent.endNs).toBeGreaterThanOrEqual(chats[1]!.endNs);

    expect(agent.resource['service.name']).toBe('promptwire-under-test');
    expect(receiver.requests.length).toBeGreaterThan(0);
    for (const received of receiver.requests) {
      expect(received.contentType).toMatch(protocol === 'http/json' ? /^application\/json/ : /^application\/x-protobuf/);
      expect(received.headers['x-collector-key']).toBe('secret value');
    }

    const attributesText = JSON.stringify(spans.map((span) => span.attributes));
    if (capture) {
      const input = JSON.parse(String(chats[0]!.attributes['gen_ai.input.messages'])) as { role: string; parts: { type: string; content?: string }[] }[];
      expect(input.at(-1)).toEqual({ role: 'user', parts: [{ type: 'text', content: prompt }] });
      expect(JSON.parse(String(chats[0]!.attributes['gen_ai.output.messages']))).toEqual([
        { role: 'assistant', parts: [{ type: 'tool_call', id: 'call_calc', name: 'calculator', arguments: { expression: '6 * 7' } }], finish_reason: 'tool_calls' },
      ]);
      expect(JSON.parse(String(chats[1]!.attributes['gen_ai.output.messages']))).toEqual([{ role: 'assistant', parts: [{ type: 'text', content: 'It is 42.' }], finish_reason: 'stop' }]);
      expect(tools[0]!.attributes).toMatchObject({ 'gen_ai.tool.call.arguments': '{"expression":"6 * 7"}', 'gen_ai.tool.call.result': '42' });
    } else {
      for (const span of spans) for (const key of contentKeys) expect(span.attributes).not.toHaveProperty(key);
      expect(attributesText).not.toContain(prompt);
      expect(attributesText).not.toContain('It is 42.');
    }
  });

  /** A GraphQL request over HTTP with a W3C traceparent; its request span as the receiver got it. */
  async function tracedRequest(query: string, variables?: Record<string, unknown>): Promise<{ status: number; span: ReceivedSpan; parentId: string }> {
    const traceId = crypto.randomBytes(16).toString('hex');
    const parentId = crypto.randomBytes(8).toString('hex');
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}`, traceparent: `00-${traceId}-${parentId}-01` },
      body: JSON.stringify({ query, variables }),
    });
    await response.arrayBuffer();
    const span = await receiver.waitFor((all) => all.find((received) => received.traceId === traceId));
    return { status: response.status, span, parentId };
  }

  test('a request span is named by its operation type once resolved, keeps its HTTP name otherwise, and carries the error rules', async () => {
    // A named query: the operation's type names the span, its name is an attribute.
    const named = await tracedRequest('query ListSome { snippets(limit: 1) { uid } }');
    expect(named.status).toBe(200);
    expect(named.span).toMatchObject({ name: 'query', kind: SPAN_KIND.server, parentSpanId: named.parentId });
    expect(named.span.attributes).toMatchObject({ 'graphql.operation.type': 'query', 'graphql.operation.name': 'ListSome', 'http.response.status_code': 200 });
    expect(named.span.status.code).not.toBe(STATUS_ERROR);

    // Anonymous: the type alone, and no name attribute.
    const anonymous = await tracedRequest('{ snippetTags }');
    expect(anonymous.span.name).toBe('query');
    expect(anonymous.span.attributes).not.toHaveProperty('graphql.operation.name');

    // A refused input: the GraphQL code is the error type; a client's mistake is not the server's error.
    const refused = await tracedRequest('query TooMany { snippets(limit: 100000) { uid } }');
    expect(refused.span.name).toBe('query');
    expect(refused.span.attributes).toMatchObject({ 'error.type': 'BAD_USER_INPUT', 'graphql.operation.name': 'TooMany' });
    expect(refused.span.status.code).not.toBe(STATUS_ERROR);

    // A document that does not parse never resolves an operation: the span keeps its HTTP name and attributes only.
    // (Over application/json its answer is a 200 with GRAPHQL_PARSE_FAILED, as GraphQL over HTTP has it.)
    const broken = await tracedRequest('query {');
    expect(broken.span).toMatchObject({ name: 'POST /graphql', kind: SPAN_KIND.server, parentSpanId: broken.parentId });
    expect(broken.span.attributes).toMatchObject({ 'http.request.method': 'POST', 'http.route': '/graphql', 'http.response.status_code': broken.status });
    expect(broken.span.attributes).not.toHaveProperty('graphql.operation.type');
    expect(broken.span.attributes).not.toHaveProperty('error.type');
    expect(broken.span.status.code).not.toBe(STATUS_ERROR);
  });

  test('a long run (more steps than one batch of spans) has every model and tool call in its trace, in order', async () => {
    const setup = await kit.setup();
    const rounds = 20;
    setup.provider.script(
      ...Array.from({ length: rounds - 1 }, (_, index) => ({
        toolCalls: [{ id: `call_${index}`, name: 'calculator', arguments: { expression: `${index} + 1` } }],
        usage: { prompt: 10 + index, completion: 2 },
      })),
      { text: 'Counted.', usage: { prompt: 40, completion: 3 } },
    );
    const { run: started, traceId } = await startTracedRun({ configuration: setup.configuration, prompt: 'Count with the calculator.', tools: ['calculator'], maxRounds: rounds });
    const run = await kit.waitForRun(started.id);
    expect(run.status).toBe('COMPLETED');
    const spans = await receiver.waitFor((all) => {
      const inTrace = all.filter((span) => span.traceId === traceId);
      return inTrace.some((span) => span.name.startsWith('invoke_agent ')) && inTrace.filter((span) => span.name.startsWith('chat ')).length === rounds ? inTrace : null;
    });
    const agent = spans.find((span) => span.name.startsWith('invoke_agent '))!;
    const chats = spans.filter((span) => span.name.startsWith('chat ')).sort((a, b) => Number(a.startNs - b.startNs));
    const tools = spans.filter((span) => span.name === 'execute_tool calculator').sort((a, b) => Number(a.startNs - b.startNs));
    expect(chats.map((span) => span.attributes['promptwire.round'])).toEqual(Array.from({ length: rounds }, (_, index) => index + 1));
    expect(chats.map((span) => span.attributes['gen_ai.usage.input_tokens'])).toEqual([...Array.from({ length: rounds - 1 }, (_, index) => 10 + index), 40]);
    expect(tools.map((span) => span.attributes['gen_ai.tool.call.id'])).toEqual(Array.from({ length: rounds - 1 }, (_, index) => `call_${index}`));
    for (const child of [...chats, ...tools]) expect(child.parentSpanId).toBe(agent.spanId);
    // The agent's span starts with the run, before its first model call, and ends after its last.
    expect(agent.startNs).toBeLessThanOrEqual(chats[0]!.startNs);
    expect(agent.endNs).toBeGreaterThanOrEqual(chats[rounds - 1]!.endNs);
    expect(agent.attributes).toMatchObject({ 'promptwire.run.iterations': rounds, 'promptwire.run.status': 'completed' });
  });

  test('a run that pauses for approval ends its span without an error, saying what it waits for', async () => {
    const setup = await kit.setup();
    setup.provider.script({ toolCalls: [{ id: 'call_wait', name: 'calculator', arguments: { expression: '1 + 1' } }], usage: { prompt: 3, completion: 1 } });
    const { run: started, traceId } = await startTracedRun({ configuration: setup.configuration, prompt: 'Add.', tools: ['calculator'], approvalRequired: ['calculator'] });
    expect((await kit.waitForRun(started.id)).status).toBe('WAITING_FOR_APPROVAL');
    const spans = await receiver.waitFor((all) => {
      const inTrace = all.filter((span) => span.traceId === traceId);
      return inTrace.some((span) => span.name.startsWith('invoke_agent ')) ? inTrace : null;
    });
    const agent = spans.find((span) => span.name.startsWith('invoke_agent '))!;
    expect(agent.status.code).not.toBe(STATUS_ERROR);
    expect(agent.attributes).toMatchObject({ 'promptwire.run.status': 'waiting_for_approval', 'gen_ai.conversation.id': started.id });
    expect(agent.events).toEqual([expect.objectContaining({ name: 'waiting for approval', attributes: { 'gen_ai.tool.name': ['calculator'] } })]);
    // Its model call is there, below it; the tool has not run.
    expect(spans.filter((span) => span.name === 'chat scripted-gpt').map((span) => span.parentSpanId)).toEqual([agent.spanId]);
    expect(spans.some((span) => span.name.startsWith('execute_tool '))).toBe(false);
    await server.gql('mutation($id: ID!) { cancelRun(id: $id) { status } }', { id: started.id });
  });

  /** A GraphQL request over HTTP without a traceparent, as most clients send it. */
  async function plainRequest(query: string, headers: Record<string, string> = {}): Promise<void> {
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}`, ...headers },
      body: JSON.stringify({ query }),
    });
    await response.arrayBuffer();
  }

  test('a query gets a span when its client traces it (TRACE_QUERIES=parent, the default); a mutation always does', async () => {
    const marker = crypto.randomBytes(4).toString('hex');
    await plainRequest(`query Untraced_${marker} { snippetTags }`);
    // A traceparent that does not parse is no trace to join.
    await plainRequest(`query Untraced_${marker} { snippetTags }`, { traceparent: '00-not-a-trace-01' });
    await plainRequest(`mutation Unparented_${marker} { deleteSnippet(uid: 987654321) }`);
    const mutation = await receiver.waitFor((all) => all.find((span) => span.attributes['graphql.operation.name'] === `Unparented_${marker}`));
    // A root span of its own: no client trace to join.
    expect(mutation).toMatchObject({ name: 'mutation', kind: SPAN_KIND.server, parentSpanId: '' });
    expect(mutation.attributes).toMatchObject({ 'graphql.operation.type': 'mutation', 'error.type': 'NOT_FOUND', 'http.response.status_code': 200 });
    // The query ended before the mutation was sent, so its span would have been queued first.
    expect(receiver.spans.filter((span) => span.attributes['graphql.operation.name'] === `Untraced_${marker}`)).toEqual([]);
    // The span starts when the request arrives: it covers the whole request.
    expect(mutation.endNs).toBeGreaterThan(mutation.startNs);
  });

  test('a failed provider call is recorded as an error on its chat span and on the run', async () => {
    const setup = await kit.setup();
    setup.provider.script({ status: 500, errorBody: '{"error":{"message":"upstream broke"}}' });
    const { run: started, traceId } = await startTracedRun({ configuration: setup.configuration, prompt: 'x', tools: [] });
    const run = await kit.waitForRun(started.id);
    expect(run).toMatchObject({ status: 'FAILED', terminationReason: 'provider_failed' });

    const spans = await receiver.waitFor((all) => {
      const inTrace = all.filter((span) => span.traceId === traceId);
      return inTrace.some((span) => span.name.startsWith('invoke_agent ')) ? inTrace : null;
    });
    const agent = spans.find((span) => span.name.startsWith('invoke_agent '))!;
    const chat = spans.find((span) => span.name === 'chat scripted-gpt')!;
    expect(agent.status.code).toBe(STATUS_ERROR);
    expect(agent.status.message).toBe(run.error);
    expect(agent.attributes).toMatchObject({ 'promptwire.run.status': 'failed', 'promptwire.run.termination_reason': 'provider_failed', 'gen_ai.usage.input_tokens': 0 });
    expect(agent.attributes['error.type']).toEqual(expect.any(String));
    expect(agent.events.map((event) => event.name)).toContain('exception');
    expect(chat.parentSpanId).toBe(agent.spanId);
    expect(chat.status.code).toBe(STATUS_ERROR);
    expect(chat.events.map((event) => event.name)).toContain('exception');
  });

  test('a collector that does not answer never holds up a run', async () => {
    const setup = await kit.setup();
    setup.provider.script(...Array.from({ length: 3 }, () => ({ text: 'Done.', usage: { prompt: 2, completion: 1 } })));
    receiver.hang = true;
    try {
      const runs: RunView[] = [];
      for (let i = 0; i < 3; i++) runs.push(await kit.startRun({ configuration: setup.configuration, prompt: `hung ${i}`, tools: [] }));
      for (const run of runs) expect((await kit.waitForRun(run.id)).status).toBe('COMPLETED');
    } finally {
      receiver.hang = false;
    }
    // Once the collector answers again, new traces arrive.
    setup.provider.script({ text: 'Again.', usage: { prompt: 2, completion: 1 } });
    const { run: started, traceId } = await startTracedRun({ configuration: setup.configuration, prompt: 'after', tools: [] });
    expect((await kit.waitForRun(started.id)).status).toBe('COMPLETED');
    await receiver.waitFor((all) => all.some((span) => span.traceId === traceId && span.name.startsWith('invoke_agent ')));
  });
});

describe.each(['all', 'none'] as const)('OpenTelemetry traces with TRACE_QUERIES=%s', (policy) => {
  let receiver: OtlpReceiver;
  let database: TestDatabase;
  let server: ServerProcess;

  beforeAll(async () => {
    receiver = await OtlpReceiver.start();
    database = await createTestDatabase('sqlite');
    server = await startServerProcess(database, { OTEL_EXPORTER_OTLP_ENDPOINT: receiver.url, OTEL_BSP_SCHEDULE_DELAY: '50', TRACE_QUERIES: policy });
  });
  afterAll(async () => {
    await server?.stop();
    await receiver?.close();
    await database?.drop();
  });

  async function post(query: string, traceparent?: string): Promise<void> {
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}`, ...(traceparent ? { traceparent } : {}) },
      body: JSON.stringify({ query }),
    });
    expect(response.status).toBe(200);
    await response.arrayBuffer();
  }

  test(policy === 'all' ? 'every query gets a span, with or without a client trace' : 'no query gets a span, even from a traced client; a mutation still does', async () => {
    const marker = crypto.randomBytes(4).toString('hex');
    const traceparent = `00-${crypto.randomBytes(16).toString('hex')}-${crypto.randomBytes(8).toString('hex')}-01`;
    await post(`query Plain_${marker} { snippets(limit: 1) { uid } }`);
    await post(`query Traced_${marker} { snippetTags }`, traceparent);
    await post(`mutation Last_${marker} { deleteSnippet(uid: 987654321) }`, traceparent);
    // The mutation was sent last: once its span is in, every earlier request's span would be too.
    await receiver.waitFor((all) => all.some((span) => span.attributes['graphql.operation.name'] === `Last_${marker}`));
    const named = (name: string) => receiver.spans.filter((span) => span.attributes['graphql.operation.name'] === `${name}_${marker}`);
    if (policy === 'all') {
      expect(named('Plain')).toEqual([expect.objectContaining({ name: 'query', kind: SPAN_KIND.server, parentSpanId: '' })]);
      expect(named('Plain')[0]!.attributes).toMatchObject({ 'graphql.operation.type': 'query', 'http.request.method': 'POST', 'http.route': '/graphql', 'http.response.status_code': 200 });
      expect(named('Traced')).toEqual([expect.objectContaining({ name: 'query', traceId: traceparent.split('-')[1] })]);
    } else {
      expect(named('Plain')).toEqual([]);
      expect(named('Traced')).toEqual([]);
    }
    expect(named('Last')).toEqual([expect.objectContaining({ name: 'mutation', traceId: traceparent.split('-')[1] })]);
  });
});
