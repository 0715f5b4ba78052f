/**
 * The transport: serve(app) → { url, stop } is one node:http server carrying
 * GraphQL over HTTP (Apollo, mounted directly for speed), graphql-ws
 * subscriptions on the same path, the health, metrics and console routes.
 * The app it serves is built by app.ts; createServer(config) composes both
 * and is what main.ts and the tests use.
 */
import crypto from 'node:crypto';
import http, { type IncomingMessage, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer, HeaderMap, type ApolloServerPlugin, type HTTPGraphQLRequest } from '@apollo/server';
import { ApolloServerPluginCacheControlDisabled } from '@apollo/server/plugin/disabled';
import { ApolloServerPluginDrainHttpServer } from '@apollo/server/plugin/drainHttpServer';
import { type ExecutionResult, getOperationAST, GraphQLError, type GraphQLSchema, NoSchemaIntrospectionCustomRule, specifiedRules } from 'graphql';
import { WebSocketServer } from 'ws';
import { type App, type AppOptions, closeAfterFailedStart, createApp } from './app';
import type { Caller } from './auth/roles';
import type { AppConfig } from './config';
import { createConsoleRoutes } from './console/console-routes';
import { type ChatEndpoint, createChatEndpoint } from './conversations';
import { createReadinessCheck } from './db/readiness';
import type { GraphQLContext } from './graphql/context';
import { DocumentCache } from './graphql/document-cache';
import { createErrorFormatter } from './graphql/format-error';
import { createLoaders } from './graphql/loaders';
import { costRefusal, overBudgetAnswer, oversizedAnswer, parseOptionsFor, type QueryLimits, validationRulesFor } from './graphql/query-limits';
import { stringifyResponse } from './graphql/raw-json';
import { buildAppSchema } from './graphql/schema';
import { type GuardedConnection, revokedTokenError, SocketGuards } from './graphql/socket-guards';
import { serveSubscriptions } from './graphql/live';
import { illFormedTextError, wellFormedTextPlugin } from './graphql/well-formed-text';
import { answerRefusedBody, CLIENT_GONE, HttpError, readBody } from './http-body';
import { sendText } from './http-response';
import type { Logger } from './logger';
import { RequestQueue } from './request-queue';
import type { Services } from './services';
import { AnswerBudget } from './shared/answer-budget';

/**
 * How long an idle keep-alive connection stays open (Node's default is 5 s).
 * Longer than clients (undici: 4 s) and proxies (typically 60 s) keep theirs,
 * so the service never closes a connection a request is already on its way
 * over: after a busy few seconds its timers would otherwise close connections
 * that clients had just reused, and those requests would fail with a reset.
 */
export const SERVER_KEEP_ALIVE_MS = 65_000;

/** The app's options: createServer passes them to createApp. */
export type ServerOptions = AppOptions;

export interface RunningServer {
  url: string;
  wsUrl: string;
  port: number;
  services: Services;
  logger: Logger;
  stop(): Promise<void>;
}

let cachedSchema: Promise<GraphQLSchema> | null = null;

/** Type-graphql's metadata is global, so the schema is built once per process. */
export function getSchema(): Promise<GraphQLSchema> {
  return (cachedSchema ??= buildAppSchema());
}

/** Builds the app (app.ts) and serves it. */
export async function createServer(config: AppConfig, options: ServerOptions = {}): Promise<RunningServer> {
  return serve(await createApp(config, options));
}

/** The transport for a built app: stop() is the app's close() with the transport closed in its place. */
export async function serve(app: App): Promise<RunningServer> {
  const transport = new Transport(app.logger);
  try {
    return await listen(app, transport);
  } catch (error) {
    await closeAfterFailedStart(() => app.close(() => transport.close()), app.logger);
    throw error;
  }
}

/** What of the transport is open so far; close() closes it in order. */
class Transport {
  apollo: ApolloServer<GraphQLContext> | null = null;
  wsServer: WebSocketServer | null = null;
  inFlight = 0;
  stopWatchingRevocations: (() => void) | null = null;
  chat: ChatEndpoint | null = null;

  constructor(private readonly logger: Logger) {}

  async close(): Promise<void> {
    await this.apollo?.stop();
    this.chat?.close();
    for (let waited = 0; this.inFlight > 0 && waited < 10_000; waited += 10) await new Promise((resolve) => setTimeout(resolve, 10));
    this.logger.debug('HTTP closed; closing WebSockets');
    const wsServer = this.wsServer;
    if (wsServer) {
      await new Promise<void>((resolve) => wsServer.close(() => resolve()));
    }
    this.stopWatchingRevocations?.();
  }
}

async function listen(app: App, transport: Transport): Promise<RunningServer> {
  const { config, services, logger, operations } = app;
  const schema = await getSchema();
  const limits: QueryLimits = { maxDepth: config.maxQueryDepth, ...config.queryLimits };
  const validationRules = validationRulesFor(limits);
  const parseOptions = parseOptionsFor(limits);
  const httpServer = http.createServer({ keepAliveTimeout: SERVER_KEEP_ALIVE_MS });
  const readiness = createReadinessCheck(services.dataSource, config.database);
  const consoleRoutes = config.ui ? createConsoleRoutes(config.consoleDirectory ?? undefined) : null;
  const authenticate = async (authorization: unknown): Promise<{ caller: Caller | null; authProblem: string | null }> => {
    const header = typeof authorization === 'string' ? authorization.trim() : '';
    if (header === '') return { caller: null, authProblem: null };
    const token = header.replace(/^Bearer\s+/i, '');
    const caller = await services.tokens.authenticate(token);
    return { caller, authProblem: caller ? null : 'The token is not valid (unknown or revoked)' };
  };
  // useChat's endpoint (POST /api/chat, GET /api/chat/{id}/stream): see conversations/chat-endpoint.
  const chat = createChatEndpoint({ conversations: () => services.conversations, authenticate, bodyLimitBytes: config.bodyLimitBytes, logger });
  transport.chat = chat;
  const contextFor = async (authorization: unknown, requestId: string, trace?: unknown): Promise<GraphQLContext> => ({
    ...(await authenticate(authorization)),
    services,
    loaders: createLoaders(services),
    logger,
    requestId,
    trace,
    answer: new AnswerBudget(limits.maxResponseBytes),
  });

  const formatError = createErrorFormatter(logger);
  const formatErrors = (errors: readonly GraphQLError[]) => errors.map((error) => formatError(error.toJSON(), error));
  const formatResult = <T extends ExecutionResult>(result: T): T =>
    result.errors?.length ? { ...result, errors: formatErrors(result.errors) as unknown as GraphQLError[] } : result;
  // Apollo adds the introspection rule itself when INTROSPECTION=false; graphql-ws needs it here.
  const wsValidationRules = [...specifiedRules, ...validationRules, ...(config.introspection ? [] : [NoSchemaIntrospectionCustomRule])];
  const wsDocuments = new DocumentCache(schema, wsValidationRules, parseOptions);
  const wsServer = new WebSocketServer({ server: httpServer, path: '/graphql', maxPayload: config.bodyLimitBytes });
  transport.wsServer = wsServer;
  const guards = new SocketGuards(
    { perConnection: config.maxSubscriptionsPerConnection, perToken: config.maxSubscriptionsPerToken },
    async (authorization) => (await authenticate(authorization)).caller,
  );
  transport.stopWatchingRevocations = services.tokens.onRevoked((tokenUid) => guards.revoked(tokenUid));
  // Live events are executed and serialised once per group of identical subscriptions and written in turns (see graphql/live).
  const wsCleanup = serveSubscriptions<Record<string, unknown>, { context?: GraphQLContext; guarded?: GuardedConnection }>(
    {
      schema,
      // Every operation over the socket is parsed, validated and costed here, by the same rules as over HTTP.
      onSubscribe: async (ctx, id, payload) => {
        // The token is checked again on every operation: a revoked one stops working at once.
        const guarded = ctx.extra.guarded;
        const caller = guarded ? await guards.recheck(guarded) : null;
        if (!guarded || !caller) return [revokedTokenError()];
        // Parsed and validated once per distinct text (every watcher sends the same subscription).
        const prepared = wsDocuments.prepare(payload.query);
        if (prepared.errors) {
          const code = prepared.stage === 'parse' ? 'GRAPHQL_PARSE_FAILED' : 'GRAPHQL_VALIDATION_FAILED';
          return prepared.errors.map((error) => withCode(error, code));
        }
        const document = prepared.document;
        // A subscription over the limits is refused before the costly checks (a burst of them stays cheap).
        const isSubscription = getOperationAST(document, payload.operationName)?.operation === 'subscription';
        const full = isSubscription ? guards.subscriptionRefusal(guarded) : null;
        if (full) return [full];
        const refusal = costRefusal(limits, schema, document, payload.variables, payload.operationName);
        if (refusal) return [refusal];
        // The same text rule as over HTTP (wellFormedTextPlugin).
        const illFormed = illFormedTextError(payload.variables);
        if (illFormed) return [illFormed];
        const overRate = await operations.rateLimitRefusal(caller, document, payload.operationName);
        if (overRate) return [overRate];
        // Last: admitting takes one of the connection's and the token's subscription slots.
        if (isSubscription) {
          const overLimit = guards.admitSubscription(guarded, id);
          if (overLimit) return [overLimit];
        }
        return { schema, document, variableValues: payload.variables, operationName: payload.operationName };
      },
      onConnect: async (ctx) => {
        const context = await contextFor(ctx.connectionParams?.authorization, crypto.randomUUID());
        if (!context.caller) return false; // graphql-ws closes with 4403 Forbidden
        ctx.extra.context = context;
        const guarded = guards.opened({
          tokenUid: context.caller.tokenUid,
          authorization: String(ctx.connectionParams?.authorization),
          socket: ctx.extra.socket,
          operations: () => ctx.subscriptions,
        });
        ctx.extra.guarded = guarded;
        ctx.extra.socket.once('close', () => guards.closed(guarded));
        return true;
      },
      // A query's answer has its own budget; a subscription's events are each checked when written (refuse).
      context: (ctx, _id, _payload, args) => ({
        ...(ctx.extra.context as GraphQLContext),
        loaders: createLoaders(services),
        answer: getOperationAST(args.document, args.operationName)?.operation === 'subscription' ? AnswerBudget.unlimited() : new AnswerBudget(limits.maxResponseBytes),
      }),
      // Errors over the socket get the same codes and masking as over HTTP.
      onError: (_ctx, _id, _payload, errors) => formatErrors(errors) as unknown as GraphQLError[],
      ...operations.subscriptionHooks,
    },
    wsServer,
    {
      contextKey: (context) => (context as GraphQLContext).caller?.role ?? null,
      finish: formatResult,
      // No answer over the socket is larger than over HTTP.
      refuse: (json) => oversizedAnswer(limits, json),
      refuseResult: (result, args) => overBudgetAnswer(limits, result, (args.contextValue as GraphQLContext | undefined)?.answer),
      onInternalError: (error) => logger.error({ err: error }, 'graphql-ws message handling failed'),
    },
  );

  const apollo = new ApolloServer<GraphQLContext>({
    schema,
    introspection: config.introspection,
    csrfPrevention: true,
    // main.ts owns SIGTERM/SIGINT: it drains runs first, then stops Apollo. Apollo's own
    // handlers would race it and re-raise the signal (a stop that hung under load).
    stopOnTerminationSignals: false,
    includeStacktraceInErrorResponses: false,
    validationRules,
    parseOptions,
    formatError,
    // JSON fields may carry exact JSON text (RawJson: PHP's integers, floats and key order).
    stringifyResult: (result) => stringifyResponse(result) + '\n',
    plugins: [
      ApolloServerPluginCacheControlDisabled(),
      ApolloServerPluginDrainHttpServer({ httpServer }),
      {
        async serverWillStart() {
          return { drainServer: async () => wsCleanup.dispose() };
        },
      },
      jsonClientStatusPlugin(),
      {
        // An answer its readers stopped, or too large to serialise, is replaced by one clear error before it is written.
        async requestDidStart() {
          return {
            async willSendResponse({ response, contextValue }) {
              if (response.body.kind !== 'single') return;
              const refused = overBudgetAnswer(limits, response.body.singleResult, contextValue.answer);
              if (refused) response.body.singleResult = formatResult(refused) as typeof response.body.singleResult;
            },
          };
        },
      },
      {
        // The cost needs the variables, which validation rules do not see.
        async requestDidStart() {
          return {
            async didResolveOperation({ request, document, operationName, operation }) {
              // Executed over HTTP, a subscription field would run as a query without its event: refuse it as input.
              if (operation?.operation === 'subscription') {
                throw new GraphQLError('Subscriptions are served over graphql-ws (a WebSocket to this same /graphql URL); HTTP serves queries and mutations.', {
                  extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } },
                });
              }
              const refusal = costRefusal(limits, schema, document, request.variables, operationName);
              if (refusal) throw refusal;
            },
          };
        },
      },
      wellFormedTextPlugin(),
      ...operations.apolloPlugins,
    ],
  });
  await apollo.start();
  transport.apollo = apollo;

  // Requests whose handler is still working, even if their client went away: the database stays open until they finish.
  const queue = new RequestQueue({ limit: config.maxQueuedRequests });
  httpServer.on('request', (request: IncomingMessage, response: ServerResponse) => {
    // A client's request id is echoed only when it is a plain token; anything else gets a fresh one.
    const offered = request.headers['x-request-id'];
    const requestId = typeof offered === 'string' && REQUEST_ID_PATTERN.test(offered) ? offered : crypto.randomUUID();
    response.setHeader('x-request-id', requestId);
    const started = process.hrtime.bigint();
    response.once('finish', () => {
      if (request.url === '/healthz' || request.url === '/readyz') return;
      logger.info(
        { requestId, method: request.method, path: request.url?.split('?')[0], status: response.statusCode, ms: Number(process.hrtime.bigint() - started) / 1e6 },
        'request',
      );
    });
    const start = () => {
      // The connection closed, or a shutdown is closing it, while the request waited: no
      // answer could reach the client, so the request is not executed (a mutation would
      // otherwise take effect without its client ever learning of it).
      if (!response.socket?.writable) {
        transport.inFlight -= 1;
        request.resume();
        return;
      }
      operations
        .traceRequest(request, response, (trace) => handle(request, response, requestId, trace))
        .finally(() => {
          transport.inFlight -= 1;
        })
        .catch((error: unknown) => {
          logger.error({ err: error, requestId }, 'request failed');
          if (!response.headersSent) sendJson(response, 500, { errors: [{ message: 'Internal server error', extensions: { code: 'INTERNAL_SERVER_ERROR' } }] });
          else response.end();
        });
    };
    // Probes answer at once, even when the queue is long.
    const probe = request.url === '/healthz' || request.url === '/readyz';
    if (probe || queue.offer(start)) {
      transport.inFlight += 1;
      if (probe) start();
      return;
    }
    response.setHeader('retry-after', '1');
    sendJson(response, 503, {
      errors: [{ message: `The server is busy: ${queue.length} requests are waiting. Retry in a second, or raise MAX_QUEUED_REQUESTS.`, extensions: { code: 'SERVICE_UNAVAILABLE' } }],
    });
  });

  async function handle(request: IncomingMessage, response: ServerResponse, requestId: string, trace: unknown): Promise<void> {
    const url = new URL(request.url ?? '/', 'http://localhost');
    if (url.pathname === '/healthz') return sendJson(response, 200, { status: 'ok' });
    if (url.pathname === '/readyz') {
      const problem = await readiness();
      if (problem === null) return sendJson(response, 200, { status: 'ready' });
      logger.warn({ problem: problem.slice(0, 500) }, 'not ready: the database does not answer');
      return sendJson(response, 503, { status: 'database unavailable' });
    }
    if (url.pathname === '/metrics') return operations.serveMetrics(request, response, authenticate);
    if (chat.owns(url.pathname)) return chat.handle(request, response, url.pathname, { requestId, trace });
    if (consoleRoutes?.handle(request, response, url.pathname)) return;
    if (url.pathname !== '/graphql') return sendJson(response, 404, { error: 'Not found. GraphQL is served at /graphql.' });

    const headers = new HeaderMap();
    for (const [key, value] of Object.entries(request.headers)) {
      if (value !== undefined) headers.set(key, Array.isArray(value) ? value.join(', ') : value);
    }
    let body: unknown = undefined;
    if (request.method === 'POST') {
      let text: string;
      try {
        text = await readBody(request, config.bodyLimitBytes);
      } catch (error) {
        if (error instanceof HttpError && error.status === CLIENT_GONE) {
          // An ordinary event (a closed tab, a cut network), not a failure of the server.
          logger.info({ requestId }, 'the client closed the connection before its request body was read');
          return;
        }
        if (error instanceof HttpError) {
          // The rest of the body is read before the response ends, so that the client receives the answer.
          return answerRefusedBody(request, response, error.status, JSON.stringify({ errors: [{ message: error.message, extensions: { code: 'BAD_USER_INPUT' } }] }));
        }
        throw error;
      }
      const contentType = headers.get('content-type') ?? '';
      if (/application\/(graphql-response\+)?json/i.test(contentType)) {
        try {
          body = text === '' ? undefined : JSON.parse(text);
        } catch {
          return sendJson(response, 400, { errors: [{ message: 'The request body is not valid JSON.', extensions: { code: 'BAD_USER_INPUT' } }] });
        }
      } else {
        body = text;
      }
    }
    const httpGraphQLRequest: HTTPGraphQLRequest = { method: (request.method ?? 'GET').toUpperCase(), headers, search: url.search, body };
    const result = await apollo.executeHTTPGraphQLRequest({
      httpGraphQLRequest,
      context: () => contextFor(request.headers.authorization, requestId, trace),
    });
    let status = result.status ?? 200;
    if (result.headers.has(REQUEST_ERROR_MARK)) {
      result.headers.delete(REQUEST_ERROR_MARK);
      if (status === 400 && /^application\/json/i.test(result.headers.get('content-type') ?? '')) status = 200;
    }
    for (const [key, value] of result.headers) response.setHeader(key, value);
    response.statusCode = status;
    if (result.body.kind === 'complete') {
      const oversized = oversizedAnswer(limits, result.body.string);
      if (oversized) {
        response.removeHeader('content-length');
        response.statusCode = 200;
        response.end(JSON.stringify(formatResult(oversized)));
        return;
      }
      await sendText(response, result.body.string);
      return;
    }
    for await (const chunk of result.body.asyncIterator) response.write(chunk);
    response.end();
  }

  await new Promise<void>((resolve, reject) => {
    httpServer.once('error', reject);
    httpServer.listen(config.port, config.host, () => resolve());
  });
  const port = (httpServer.address() as AddressInfo).port;
  const host = config.host.includes(':') ? `[${config.host}]` : config.host;
  logger.info({ port, host: config.host, database: services.dialect }, 'promptwire is serving GraphQL at /graphql');

  let stopping: Promise<void> | null = null;
  return {
    url: `http://${host}:${port}/graphql`,
    wsUrl: `ws://${host}:${port}/graphql`,
    port,
    services,
    logger,
    stop: () => (stopping ??= app.close(() => transport.close()).then(() => logger.info('stopped'))),
  };
}

const REQUEST_ID_PATTERN = /^[\w.:-]{1,100}$/;

/** A graphql-js error (parse or validation) carrying the code Apollo gives it over HTTP. */
function withCode(error: unknown, code: string): GraphQLError {
  if (error instanceof GraphQLError) return new GraphQLError(error.message, { nodes: error.nodes, source: error.source, positions: error.positions, extensions: { ...error.extensions, code } });
  return new GraphQLError(error instanceof Error ? error.message : String(error), { extensions: { code } });
}

function sendJson(response: ServerResponse, status: number, payload: unknown): void {
  response.statusCode = status;
  response.setHeader('content-type', 'application/json; charset=utf-8');
  response.end(JSON.stringify(payload));
}

/** Set by jsonClientStatusPlugin, removed by the HTTP handler before anything is sent. */
const REQUEST_ERROR_MARK = 'x-promptwire-request-error';

/**
 * GraphQL over HTTP: a request that carried a GraphQL document which then
 * failed parsing, validation or variable coercion gets 400 when answered as
 * `application/graphql-response+json`, but 200 when answered as
 * `application/json` (the errors are in the body). Apollo answers 400 either
 * way. Which media type Apollo picks (no Accept header and `*\/*` mean
 * application/json) is only known once the response is built, so the plugin
 * marks such responses and the HTTP handler settles the status. A request
 * without a document (no query at all) keeps its 400.
 */
function jsonClientStatusPlugin(): ApolloServerPlugin<GraphQLContext> {
  return {
    async requestDidStart() {
      return {
        async willSendResponse({ source, response }) {
          if (source !== undefined && response.http.status === 400) response.http.headers.set(REQUEST_ERROR_MARK, '1');
        },
      };
    },
  };
}
