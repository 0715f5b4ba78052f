/**
 * The operator's side of the service, built once per server: Prometheus
 * metrics, rate limits, OpenTelemetry traces, and what server.ts hooks into
 * its transports (Apollo plugins, graphql-ws hooks, the /metrics route, the
 * request span, the run observer).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApolloServerPlugin } from '@apollo/server';
import type { DocumentNode, GraphQLError } from 'graphql';
import Redis from 'ioredis';
import type { Caller } from '../auth/roles';
import type { AppConfig } from '../config';
import type { GraphQLContext } from '../graphql/context';
import type { Logger } from '../logger';
import { ServiceMetrics, rootFieldOf } from './metrics';
import { RateLimits, type LimitName } from './rate-limits';
import { combineRunObservers, type RunObserver } from './run-observer';
import { subscriptionGaugeHooks, type SubscriptionGaugeHooks } from './subscription-gauge';

export interface Operations {
  metrics: ServiceMetrics;
  /** Sees every run of this instance; null when nothing observes runs. */
  runObserver: RunObserver | null;
  apolloPlugins: ApolloServerPlugin<GraphQLContext>[];
  /** Opens the HTTP request's trace span and hands it to `handle` (opaque; `undefined` when tracing is off). */
  traceRequest<T>(request: IncomingMessage, response: ServerResponse, handle: (trace: unknown) => Promise<T>): Promise<T>;
  /** Spread into the graphql-ws server's options. */
  subscriptionHooks: SubscriptionGaugeHooks;
  /**
   * Takes a document's mutations from the caller's rate-limit budgets; the
   * error to answer instead (TOO_MANY_REQUESTS) when one is spent. Used over
   * HTTP (by the Apollo plugin) and graphql-ws alike.
   */
  rateLimitRefusal(caller: Caller | null, document: DocumentNode, operationName?: string | null): Promise<GraphQLError | null>;
  /** Answers `GET /metrics`. */
  serveMetrics(request: IncomingMessage, response: ServerResponse, authenticate: (authorization: unknown) => Promise<{ caller: Caller | null }>): Promise<void>;
  close(): Promise<void>;
}

export interface OperationsOptions {
  /** Names the database in Redis keys: instances on one database share rate-limit budgets, others never do. */
  databaseKey: string;
}

export function createOperations(config: AppConfig, logger: Logger, options: OperationsOptions): Operations {
  const metrics = new ServiceMetrics();
  // The OpenTelemetry SDK is loaded only when traces are exported: without an endpoint it costs nothing.
  // eslint-disable-next-line @typescript-eslint/no-require-imports
  const tracing = config.tracing ? (require('./tracing') as typeof import('./tracing')).startTracing(config.tracing, logger) : null;
  // Commands fail at once while Redis is away (the limiter then answers from memory), never queue.
  const redis = config.redisUrl ? new Redis(config.redisUrl, { maxRetriesPerRequest: 1, enableOfflineQueue: false }) : null;
  redis?.on('error', (error: Error) => logger.debug({ errorClass: error.name }, 'rate-limit Redis connection error'));
  const rateLimits = new RateLimits(config.rateLimits, redis ? { redis, keyPrefix: `promptwire:${options.databaseKey}:rate` } : null, logger);
  const rateLimitRefusal = async (caller: Caller | null, document: DocumentNode, operationName?: string | null) => {
    const refusal = await rateLimits.refusal(caller, document, operationName);
    if (refusal) metrics.refused(refusal.extensions.limit as LimitName);
    return refusal;
  };
  return {
    metrics,
    runObserver: combineRunObservers(tracing ? [metrics, tracing] : [metrics], logger),
    apolloPlugins: [requestDurationPlugin(metrics), rateLimitPlugin(rateLimitRefusal), ...(tracing ? [tracing.apolloPlugin] : [])],
    traceRequest: tracing ? (request, response, handle) => tracing.traceRequest(request, response, handle) : (_request, _response, handle) => handle(undefined),
    subscriptionHooks: subscriptionGaugeHooks(metrics),
    rateLimitRefusal,
    async serveMetrics(request, response, authenticate) {
      if (request.method !== 'GET' && request.method !== 'HEAD') {
        response.writeHead(405, { allow: 'GET, HEAD', 'content-type': 'text/plain; charset=utf-8' });
        response.end('Use GET for /metrics.\n');
        return;
      }
      if (!config.metricsPublic) {
        const { caller } = await authenticate(request.headers.authorization);
        if (!caller) {
          response.writeHead(401, { 'www-authenticate': 'Bearer', 'content-type': 'text/plain; charset=utf-8' });
          response.end('/metrics needs a valid API token of any role as "Authorization: Bearer TOKEN" (or METRICS_PUBLIC=true).\n');
          return;
        }
      }
      const text = await metrics.render();
      response.writeHead(200, { 'content-type': metrics.contentType, 'cache-control': 'no-store' });
      response.end(request.method === 'HEAD' ? undefined : text);
    },
    async close() {
      redis?.disconnect();
      await tracing?.shutdown();
    },
  };
}

/** Refuses a mutation over budget before anything runs: HTTP 429 with Retry-After. */
function rateLimitPlugin(refusal: Operations['rateLimitRefusal']): ApolloServerPlugin<GraphQLContext> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ document, operationName, contextValue }) {
          const refused = await refusal(contextValue.caller, document, operationName);
          if (refused) throw refused;
        },
      };
    },
  };
}

/** `promptwire_graphql_request_duration_seconds`: from the request's start to its answer. */
function requestDurationPlugin(metrics: ServiceMetrics): ApolloServerPlugin<GraphQLContext> {
  return {
    async requestDidStart() {
      const started = performance.now();
      let type = 'unknown';
      let operation = 'unknown';
      return {
        async didResolveOperation({ operation: definition }) {
          if (!definition) return;
          type = definition.operation;
          operation = rootFieldOf(definition);
        },
        async willSendResponse() {
          metrics.graphqlRequest(type, operation, (performance.now() - started) / 1000);
        },
      };
    },
  };
}
