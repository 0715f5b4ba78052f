/**
 * The operator's side of the service, built once per server: Prometheus
 * metrics, and what server.ts hooks into its transports (Apollo plugins,
 * graphql-ws hooks, the /metrics route, the run observer).
 */
import type { IncomingMessage, ServerResponse } from 'node:http';
import type { ApolloServerPlugin } from '@apollo/server';
import type { Caller } from '../auth/roles';
import type { AppConfig } from '../config';
import type { GraphQLContext } from '../graphql/context';
import type { Logger } from '../logger';
import { ServiceMetrics, rootFieldOf } from './metrics';
import { combineRunObservers, type RunObserver } from './run-observer';
import { subscriptionGaugeHooks, type SubscriptionGaugeHooks } from './subscription-gauge';

export interface Operations {
  metrics: ServiceMetrics;
  /** Sees every run of this instance; null when nothing observes runs. */
  runObserver: RunObserver | null;
  apolloPlugins: ApolloServerPlugin<GraphQLContext>[];
  /** Spread into the graphql-ws server's options. */
  subscriptionHooks: SubscriptionGaugeHooks;
  /** Answers `GET /metrics`. */
  serveMetrics(request: IncomingMessage, response: ServerResponse, authenticate: (authorization: unknown) => Promise<{ caller: Caller | null }>): Promise<void>;
  close(): Promise<void>;
}

export function createOperations(config: AppConfig, logger: Logger): Operations {
  const metrics = new ServiceMetrics();
  return {
    metrics,
    runObserver: combineRunObservers([metrics], logger),
    apolloPlugins: [requestDurationPlugin(metrics)],
    subscriptionHooks: subscriptionGaugeHooks(metrics),
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
    async close() {},
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
