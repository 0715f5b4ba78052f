/**
 * OpenTelemetry traces with the GenAI semantic conventions, exported over
 * OTLP/HTTP (protobuf or JSON). Loaded only when an endpoint is configured:
 * without one, nothing of the SDK is loaded and nothing runs.
 *
 * Spans:
 * - one per traced GraphQL request over HTTP, kind SERVER, child of the
 *   client's W3C `traceparent` when it sends one. Mutations are traced, and
 *   requests that never resolve an operation; queries by TRACE_QUERIES (by
 *   default those whose client sends a traceparent: a query nobody traces
 *   costs nothing here, its rate and latency are in /metrics). The span
 *   starts at the request's arrival. It is named `POST /graphql` with the
 *   HTTP attributes; once the operation is resolved it carries
 *   `graphql.operation.type` / `.name` and is named by the operation's type
 *   (`query`, `mutation`), as the GraphQL conventions name their server span
 *   (the operation name is the client's free text: an attribute, not part of
 *   the name, so span names stay a small fixed set). One span, not an HTTP
 *   span with a GraphQL child: the same information for half the SDK's work
 *   on every request;
 * - per run `invoke_agent <configuration>`, child of the request that
 *   started it, with one `chat <model>` child per model call and one
 *   `execute_tool <tool>` per tool call. Their times and usage are the stored
 *   steps' (a chat span ends when its LLM step was produced and lasts its
 *   `durationMs`), so the trace and the run's trace in the database agree.
 *
 * Parents are passed explicitly (the request's span travels in the GraphQL
 * context to `startRun`), not through a global context manager: Node 20's
 * AsyncLocalStorage would tax every promise of the process, traced or not.
 * Nothing is registered globally either.
 *
 * Spans leave in batches from a bounded queue (BatchSpanProcessor): a slow or
 * unreachable collector drops spans and logs a warning; a run never waits for
 * it. Message content is attached only with
 * OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true.
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApolloServerPlugin, GraphQLRequestListener } from '@apollo/server';
import { defaultTextMapGetter, diag, DiagLogLevel, ROOT_CONTEXT, SpanKind, SpanStatusCode, trace, type Attributes, type Context, type Span, type Tracer } from '@opentelemetry/api';
import { W3CTraceContextPropagator } from '@opentelemetry/core';
import { OTLPTraceExporter as OTLPJsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http';
import { OTLPTraceExporter as OTLPProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto';
import { defaultResource, resourceFromAttributes } from '@opentelemetry/resources';
import { AlwaysOffSampler, AlwaysOnSampler, BatchSpanProcessor, NodeTracerProvider, ParentBasedSampler, TraceIdRatioBasedSampler, type Sampler } from '@opentelemetry/sdk-trace-node';
import { ATTR_HTTP_REQUEST_METHOD, ATTR_HTTP_RESPONSE_STATUS_CODE, ATTR_HTTP_ROUTE, ATTR_URL_PATH, ATTR_ERROR_TYPE, ATTR_SERVICE_NAME } from '@opentelemetry/semantic-conventions';
import {
  ATTR_GEN_AI_AGENT_NAME,
  ATTR_GEN_AI_CONVERSATION_ID,
  ATTR_GEN_AI_INPUT_MESSAGES,
  ATTR_GEN_AI_OPERATION_NAME,
  ATTR_GEN_AI_OUTPUT_MESSAGES,
  ATTR_GEN_AI_PROVIDER_NAME,
  ATTR_GEN_AI_REQUEST_MODEL,
  ATTR_GEN_AI_RESPONSE_FINISH_REASONS,
  ATTR_GEN_AI_TOOL_CALL_ARGUMENTS,
  ATTR_GEN_AI_TOOL_CALL_ID,
  ATTR_GEN_AI_TOOL_CALL_RESULT,
  ATTR_GEN_AI_TOOL_NAME,
  ATTR_GEN_AI_TOOL_TYPE,
  ATTR_GEN_AI_USAGE_INPUT_TOKENS,
  ATTR_GEN_AI_USAGE_OUTPUT_TOKENS,
  ATTR_GRAPHQL_OPERATION_NAME,
  ATTR_GRAPHQL_OPERATION_TYPE,
} from '@opentelemetry/semantic-conventions/incubating';
import type { TraceQueries, TracingConfig } from '../config';
import type { GraphQLContext } from '../graphql/context';
import type { Logger } from '../logger';
import type { ChatMessage } from '../providers/adapters/types';
import type { LlmStep, RequestStep, LoopStep } from '../runs';
import { preciseNow, type ObservedRun, type RunObservation, type RunObserver } from './run-observer';

export interface Tracing extends RunObserver {
  /** Opens the request's server span, hands it to `handle` (for the GraphQL context), ends it with the response. */
  traceRequest<T>(request: IncomingMessage, response: ServerResponse, handle: (trace: unknown) => Promise<T>): Promise<T>;
  /** Gives the request's span its GraphQL operation (attributes, name) and the answer's error code. */
  apolloPlugin: ApolloServerPlugin<GraphQLContext>;
  /** Sends what is queued (bounded in time), then stops. */
  shutdown(): Promise<void>;
}

/** `gen_ai.provider.name` for each adapter type: the convention's well-known values where one exists. */
const PROVIDER_NAMES: Record<string, string> = {
  openai: 'openai',
  anthropic: 'anthropic',
  gemini: 'gcp.gemini',
  mistral: 'mistral_ai',
  groq: 'groq',
};

/** Paths whose requests get a span; probes and scrapes would only add noise. */
const TRACED_ROUTES = new Set(['/graphql']);

const SHUTDOWN_TIMEOUT_MS = 3_000;

/** A request span's name and attributes, made once per route and usual method (the SDK copies attributes, so sharing them is safe). */
const requestShapes = new Map<string, Map<string, { name: string; attributes: Attributes }>>();
/** Methods are the client's to choose: only these are kept, so the cache stays small. */
const STANDARD_METHODS = new Set(['GET', 'POST', 'OPTIONS', 'HEAD']);
function requestSpanShape(method: string, path: string): { name: string; attributes: Attributes } {
  const known = requestShapes.get(path)?.get(method);
  if (known) return known;
  const shape = { name: `${method} ${path}`, attributes: Object.freeze({ [ATTR_HTTP_REQUEST_METHOD]: method, [ATTR_URL_PATH]: path, [ATTR_HTTP_ROUTE]: path }) };
  if (STANDARD_METHODS.has(method)) {
    let byMethod = requestShapes.get(path);
    if (!byMethod) requestShapes.set(path, (byMethod = new Map()));
    byMethod.set(method, shape);
  }
  return shape;
}

/**
 * The request span's `error.type` and status. The GraphQL error code of a
 * resolved operation (`BAD_USER_INPUT`, `TOO_MANY_REQUESTS` …) is the more
 * specific type and wins; without one, a 5xx response's status code is the
 * type (HTTP conventions). Status ERROR for a 5xx response or an
 * INTERNAL_SERVER_ERROR; a client's mistake (4xx, a refused input) is not the
 * server's error.
 */
export function requestSpanOutcome(httpStatus: number, graphqlCode: string | null): { errorType: string | null; error: boolean } {
  const serverError = httpStatus >= 500;
  return {
    errorType: graphqlCode ?? (serverError ? String(httpStatus) : null),
    error: serverError || graphqlCode === 'INTERNAL_SERVER_ERROR',
  };
}

/** Whether a resolved operation of this type gets a span: mutations always; queries by TRACE_QUERIES. */
export function tracesOperation(type: string, policy: TraceQueries, clientTraces: boolean): boolean {
  if (type !== 'query') return true;
  return policy === 'all' || (policy === 'parent' && clientTraces);
}

/**
 * The request as it travels in the GraphQL context (opaque to everyone
 * else). Its span is opened only once the request is known to get one (see
 * `tracesOperation`), with the request's arrival as its start, so a query
 * that is not traced never reaches the SDK.
 */
class RequestTrace {
  span: Span | null = null;
  /** Whether the span was opened, or the request was found not to get one. */
  decided = false;
  /** The first error's code in the answer of a resolved operation. */
  graphqlCode: string | null = null;
  resolved = false;
  constructor(
    private readonly tracer: Tracer,
    /** The client's trace (ROOT_CONTEXT when it sent no traceparent). */
    readonly parent: Context,
    readonly clientTraces: boolean,
    private readonly method: string,
    private readonly path: string,
    private readonly response: ServerResponse,
    private readonly startTime: number,
  ) {}

  /** Opens the span (named `name`, or by the HTTP conventions) unless decided; it ends with the response. */
  open(name?: string): Span | null {
    if (this.decided) return this.span;
    this.decided = true;
    const shape = requestSpanShape(this.method, this.path);
    const span = this.tracer.startSpan(name ?? shape.name, { kind: SpanKind.SERVER, attributes: shape.attributes, startTime: this.startTime }, this.parent);
    this.span = span;
    // Not sampled: nothing to add or end; the span still carries the trace context (and its decision) to a run.
    if (!span.isRecording()) return span;
    // 'close' follows 'finish' when the response is complete, and comes alone when the connection dropped: one listener serves both.
    if (this.response.closed) this.end();
    else this.response.once('close', () => this.end());
    return span;
  }

  /** A query that gets no span. */
  skip(): void {
    this.decided = true;
  }

  /** The context a run started by this request hangs below: its span, else the client's trace. */
  context(): Context {
    return this.span ? trace.setSpan(ROOT_CONTEXT, this.span) : this.parent;
  }

  /** The response is complete (or its connection dropped): the span ends with its status code. */
  private end(): void {
    const span = this.span!;
    const { errorType, error } = requestSpanOutcome(this.response.statusCode, this.graphqlCode);
    span.setAttribute(ATTR_HTTP_RESPONSE_STATUS_CODE, this.response.statusCode);
    if (errorType !== null) span.setAttribute(ATTR_ERROR_TYPE, errorType);
    if (error) span.setStatus({ code: SpanStatusCode.ERROR });
    span.end(preciseNow());
  }
}

/** One listener for every traced request: its state is the context's RequestTrace, so nothing is allocated per request here. */
function operationListener(policy: TraceQueries): GraphQLRequestListener<GraphQLContext> {
  return {
    async didResolveOperation({ contextValue, operation, operationName }) {
      const request = contextValue.trace as RequestTrace;
      if (!operation || request.decided) return;
      const type = operation.operation;
      if (!tracesOperation(type, policy, request.clientTraces)) return request.skip();
      const span = request.open(type);
      if (!span?.isRecording()) return;
      request.resolved = true;
      span.setAttribute(ATTR_GRAPHQL_OPERATION_TYPE, type);
      if (operationName) span.setAttribute(ATTR_GRAPHQL_OPERATION_NAME, operationName);
    },
    async willSendResponse({ contextValue, response }) {
      const request = contextValue.trace as RequestTrace;
      if (!request.resolved || response.body.kind !== 'single') return;
      const code = response.body.singleResult.errors?.[0]?.extensions?.code;
      if (typeof code === 'string') request.graphqlCode = code;
    },
  };
}

export function startTracing(config: TracingConfig, logger: Logger): Tracing {
  // The SDK reports export failures through its diagnostic logger: to the log, as warnings, without the headers.
  diag.setLogger(
    {
      error: (message) => logger.warn({ component: 'opentelemetry' }, message),
      warn: (message) => logger.warn({ component: 'opentelemetry' }, message),
      info: () => undefined,
      debug: () => undefined,
      verbose: () => undefined,
    },
    DiagLogLevel.WARN,
  );
  const exporterOptions = { url: config.endpoint, headers: config.headers, timeoutMillis: config.exportTimeoutMs };
  const exporter = config.protocol === 'http/json' ? new OTLPJsonTraceExporter(exporterOptions) : new OTLPProtobufTraceExporter(exporterOptions);
  const provider = new NodeTracerProvider({
    resource: defaultResource().merge(resourceFromAttributes({ ...config.resourceAttributes, [ATTR_SERVICE_NAME]: config.serviceName })),
    sampler: samplerOf(config.sampler),
    spanProcessors: [
      new BatchSpanProcessor(exporter, {
        scheduledDelayMillis: config.scheduleDelayMs,
        maxQueueSize: config.maxQueueSize,
        maxExportBatchSize: Math.min(512, config.maxQueueSize),
        exportTimeoutMillis: config.exportTimeoutMs,
      }),
    ],
  });
  // Not registered globally: the service passes parents itself (see above), and nothing else in the process traces.
  const tracer = provider.getTracer('promptwire');
  const propagator = new W3CTraceContextPropagator();
  const listener = operationListener(config.traceQueries);

  return {
    traceRequest(request, response, handle) {
      const url = request.url ?? '/';
      const query = url.indexOf('?');
      const path = query === -1 ? url : url.slice(0, query);
      if (!TRACED_ROUTES.has(path)) return handle(undefined);
      // Only a client that sends a traceparent has a parent to extract; most send none.
      const parent = request.headers.traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, request.headers, defaultTextMapGetter);
      // A traceparent that does not parse is no trace to join.
      const clientTraces = parent !== ROOT_CONTEXT && trace.getSpanContext(parent) !== undefined;
      const requestTrace = new RequestTrace(tracer, parent, clientTraces, request.method ?? 'GET', path, response, preciseNow());
      // A request that never resolved an operation (a document that does not parse, a body refused before GraphQL) gets its span now.
      return handle(requestTrace).finally(() => requestTrace.open());
    },
    apolloPlugin: {
      async requestDidStart({ contextValue }) {
        return contextValue.trace instanceof RequestTrace ? listener : undefined;
      },
    },
    runStarted: (run) => observeRun(tracer, run, run.requestTrace instanceof RequestTrace ? run.requestTrace.context() : ROOT_CONTEXT, config.captureMessageContent),
    runClosed: () => undefined,
    async shutdown() {
      await Promise.race([provider.shutdown().catch(() => undefined), new Promise((resolve) => setTimeout(resolve, SHUTDOWN_TIMEOUT_MS).unref())]);
      diag.disable();
    },
  };
}

function samplerOf(sampler: TracingConfig['sampler']): Sampler {
  const root = sampler.root === 'always_off' ? new AlwaysOffSampler() : sampler.root === 'traceidratio' ? new TraceIdRatioBasedSampler(sampler.ratio) : new AlwaysOnSampler();
  return sampler.parentBased ? new ParentBasedSampler({ root }) : root;
}

/** A run's steps are made into spans at its END, or once this many wait (a long run's spans then leave as it goes). */
const SPAN_BATCH_STEPS = 64;

/**
 * The spans of one run, built from its steps once they are stored. They are made in batches, at
 * the run's END or every SPAN_BATCH_STEPS steps (the agent's span, with the run's start as its
 * start, at the first): the SDK's code then runs warm, many spans in a row, instead of once per step
 * between the loop's own work and once at the start of every run, which costs several times as much
 * CPU. Their times are the steps' own either way.
 */
function observeRun(tracer: Tracer, run: ObservedRun, parent: Context, capture: boolean): RunObservation {
  const startTime = preciseNow();
  /** Undefined until the first batch; null when the run is not sampled. */
  let spans: RunSpans | null | undefined;
  /** Steps not yet made into spans, with when each was handed over. */
  let buffered: Array<{ step: LoopStep; at: number }> = [];
  const drain = (): void => {
    const steps = buffered;
    buffered = [];
    if (spans === undefined) spans = runSpans(tracer, run, parent, capture, startTime);
    if (spans) for (const { step, at } of steps) spans.record(step, at);
  };
  return {
    step(step: LoopStep, at: number) {
      if (spans === null) return;
      buffered.push({ step, at });
      if (step.kind === 'end' || buffered.length >= SPAN_BATCH_STEPS) drain();
    },
    finish() {
      drain();
      spans?.finish();
    },
  };
}

interface RunSpans {
  record(step: LoopStep, at: number): void;
  /** Ends the agent's span if its END never came. */
  finish(): void;
}

/** The agent's span and a maker of its children; null when the run is not sampled. */
function runSpans(tracer: Tracer, run: ObservedRun, parent: Context, capture: boolean, startTime: number): RunSpans | null {
  // Made once per run and written as fixed-shape literals (no spreads): an absent value is `undefined`, which the SDK skips.
  const provider = run.providerType ? (PROVIDER_NAMES[run.providerType] ?? run.providerType) : undefined;
  const model = run.model ?? undefined;
  const chatName = model ? `chat ${model}` : 'chat';
  const agent = tracer.startSpan(
    `invoke_agent ${run.configuration}`,
    {
      kind: SpanKind.INTERNAL,
      startTime,
      attributes: {
        [ATTR_GEN_AI_CONVERSATION_ID]: run.runId,
        [ATTR_GEN_AI_PROVIDER_NAME]: provider,
        [ATTR_GEN_AI_REQUEST_MODEL]: model,
        [ATTR_GEN_AI_OPERATION_NAME]: 'invoke_agent',
        [ATTR_GEN_AI_AGENT_NAME]: run.configuration,
        'promptwire.run.dry_run': run.dryRun,
      },
    },
    parent,
  );
  // Not sampled: its model and tool calls would not be either (they follow the agent's decision), so none is asked for.
  if (!agent.isRecording()) return null;
  const inRun = trace.setSpan(parent, agent);
  /** The model call in flight: its REQUEST step and when it was produced. */
  let pending: { step: RequestStep; at: number } | null = null;
  let ended = false;
  /** The tools whose calls wait for a person when the run paused for approval; null otherwise. */
  let waitingFor: string[] | null = null;

  // What a sampler may decide by (the conventions ask for these at a span's start), made once per run;
  // the rest is set on the span itself, so the SDK validates it once instead of copying it twice more.
  const chatStart = { [ATTR_GEN_AI_OPERATION_NAME]: 'chat', [ATTR_GEN_AI_PROVIDER_NAME]: provider, [ATTR_GEN_AI_REQUEST_MODEL]: model };
  const toolStart = { [ATTR_GEN_AI_OPERATION_NAME]: 'execute_tool' };

  /** A model call's span; `answer` is its LLM step, null when the call never answered. */
  const chatSpan = (startTime: number, request: RequestStep | null, answer: LlmStep | null): Span => {
    const span = tracer.startSpan(chatName, { kind: SpanKind.CLIENT, startTime, attributes: chatStart }, inRun);
    span.setAttribute(ATTR_GEN_AI_CONVERSATION_ID, run.runId);
    if (answer) {
      span.setAttribute(ATTR_GEN_AI_RESPONSE_FINISH_REASONS, [answer.rawFinishReason ?? answer.finishReason]);
      span.setAttribute(ATTR_GEN_AI_USAGE_INPUT_TOKENS, answer.promptTokens);
      span.setAttribute(ATTR_GEN_AI_USAGE_OUTPUT_TOKENS, answer.completionTokens);
      span.setAttribute('promptwire.round', answer.round);
      if (answer.estimatedCost !== null) span.setAttribute('promptwire.cost.usd', answer.estimatedCost);
    }
    if (capture && request) span.setAttribute(ATTR_GEN_AI_INPUT_MESSAGES, JSON.stringify(request.messagesSent.map(messageParts)));
    return span;
  };

  const record = (step: LoopStep, at: number): void => {
    switch (step.kind) {
      case 'request':
        pending = { step, at };
        break;
      case 'llm': {
        const span = chatSpan(at - step.durationMs, pending?.step ?? null, step);
        if (capture) span.setAttribute(ATTR_GEN_AI_OUTPUT_MESSAGES, JSON.stringify([outputMessage(step)]));
        span.end(at);
        pending = null;
        break;
      }
      case 'tool': {
        const span = tracer.startSpan(`execute_tool ${step.toolName}`, { kind: SpanKind.INTERNAL, startTime: at - step.durationMs, attributes: toolStart }, inRun);
        span.setAttribute(ATTR_GEN_AI_CONVERSATION_ID, run.runId);
        span.setAttribute(ATTR_GEN_AI_TOOL_NAME, step.toolName);
        span.setAttribute(ATTR_GEN_AI_TOOL_CALL_ID, step.toolCallId);
        span.setAttribute(ATTR_GEN_AI_TOOL_TYPE, 'function');
        span.setAttribute('promptwire.round', step.round);
        if (capture) {
          span.setAttribute(ATTR_GEN_AI_TOOL_CALL_ARGUMENTS, typeof step.toolArguments === 'string' ? step.toolArguments : JSON.stringify(step.toolArguments));
          span.setAttribute(ATTR_GEN_AI_TOOL_CALL_RESULT, step.toolResult);
        }
        if (step.toolIsError) {
          span.setAttribute(ATTR_ERROR_TYPE, 'tool_error');
          // The result is what the model was told; it is content, so it is only on the span when content is captured.
          span.setStatus({ code: SpanStatusCode.ERROR, ...(capture ? { message: step.toolResult } : {}) });
        }
        span.end(at);
        break;
      }
      case 'end': {
        if (pending) {
          // The call in flight never answered: the provider failed, or the run was cancelled.
          const span = chatSpan(pending.at, pending.step, null);
          if (step.status === 'CANCELLED') {
            span.setAttribute(ATTR_ERROR_TYPE, 'cancelled');
          } else {
            span.setAttribute(ATTR_ERROR_TYPE, step.errorClass ?? 'error');
            span.recordException({ name: step.errorClass ?? 'Error', message: step.error ?? 'The provider call failed.' }, at);
            span.setStatus({ code: SpanStatusCode.ERROR, message: step.error ?? undefined });
          }
          span.end(at);
          pending = null;
        }
        agent.setAttributes({
          [ATTR_GEN_AI_USAGE_INPUT_TOKENS]: step.promptTokens,
          [ATTR_GEN_AI_USAGE_OUTPUT_TOKENS]: step.completionTokens,
          'promptwire.run.status': step.status.toLowerCase(),
          'promptwire.run.termination_reason': step.terminationReason,
          'promptwire.run.iterations': step.iterations,
          'promptwire.cost.usd': step.estimatedCost ?? undefined,
        });
        if (step.status === 'FAILED') {
          agent.setAttribute(ATTR_ERROR_TYPE, step.errorClass ?? step.terminationReason);
          agent.recordException({ name: step.errorClass ?? 'Error', message: step.error ?? step.terminationReason }, at);
          agent.setStatus({ code: SpanStatusCode.ERROR, message: step.error ?? undefined });
        }
        agent.end(at);
        ended = true;
        break;
      }
      case 'approval':
        // Calls that wait for a person: this stretch of the run ends here, and the run goes on below the request that decides them.
        waitingFor = step.pendingToolCalls?.map((call) => call.name) ?? null;
        break;
      case 'assembled':
      case 'context':
        break;
    }
  };
  return {
    record,
    finish() {
      if (ended) return;
      ended = true;
      if (waitingFor) {
        // Not an error: the run waits for a person's decision (WAITING_FOR_APPROVAL).
        agent.setAttribute('promptwire.run.status', 'waiting_for_approval');
        agent.addEvent('waiting for approval', { [ATTR_GEN_AI_TOOL_NAME]: waitingFor });
        agent.end(preciseNow());
        return;
      }
      agent.setStatus({ code: SpanStatusCode.ERROR, message: 'The run ended without its END step.' });
      agent.end(preciseNow());
    },
  };
}

type MessagePart =
  | { type: 'text'; content: string }
  | { type: 'tool_call'; id: string; name: string; arguments: unknown }
  | { type: 'tool_call_response'; id: string; response: string };

/** A message in the GenAI conventions' `gen_ai.input.messages` shape. */
function messageParts(message: ChatMessage): { role: string; parts: MessagePart[] } {
  const parts: MessagePart[] = [];
  if (message.role === 'tool') {
    parts.push({ type: 'tool_call_response', id: message.tool_call_id, response: message.content ?? '' });
    return { role: 'tool', parts };
  }
  if (typeof message.content === 'string' && message.content !== '') parts.push({ type: 'text', content: message.content });
  if (message.role === 'assistant') {
    for (const call of message.tool_calls ?? []) parts.push({ type: 'tool_call', id: call.id, name: call.function.name, arguments: parseArguments(call.function.arguments) });
  }
  return { role: message.role, parts };
}

/** The answer in the `gen_ai.output.messages` shape. */
function outputMessage(step: LlmStep): { role: 'assistant'; parts: MessagePart[]; finish_reason: string } {
  const parts: MessagePart[] = [];
  if (step.content !== '') parts.push({ type: 'text', content: step.content });
  for (const call of step.requestedToolCalls) parts.push({ type: 'tool_call', id: call.id, name: call.name, arguments: call.arguments });
  return { role: 'assistant', parts, finish_reason: step.finishReason };
}

function parseArguments(text: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch {
    return text;
  }
}
