/**
 * Starts the real server on port 0 against a fresh database and speaks to it
 * the way clients do: GraphQL over HTTP, and graphql-ws.
 */
import pino from 'pino';
import { createClient, type Client } from 'graphql-ws';
import WebSocket from 'ws';
import { loadConfig, type AppConfig } from '../../src/config';
import { createServer, type RunningServer, type ServerOptions } from '../../src/server';
import { createTestDatabase, type TestDatabase, type TestDialect } from './databases';

export const ADMIN_TOKEN = 'test-admin-token-0123456789abcdef';

export interface GraphQLResponse<T = Record<string, unknown>> {
  data?: T | null;
  errors?: { message: string; path?: string[]; extensions?: { code?: string; field?: string; [key: string]: unknown } }[];
}

export interface TestServer {
  dialect: TestDialect;
  server: RunningServer;
  database: TestDatabase;
  url: string;
  /** POST a GraphQL operation; the admin token unless `token` is given (null = none). */
  gql<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>, token?: string | null): Promise<GraphQLResponse<T>>;
  /** POST a GraphQL operation and return the response body as sent, unparsed (for exact JSON bytes). */
  gqlText(query: string, variables?: Record<string, unknown>, token?: string | null): Promise<string>;
  /** Like gql, but fails the test on any GraphQL error and returns data. */
  ok<T = Record<string, unknown>>(query: string, variables?: Record<string, unknown>, token?: string | null): Promise<T>;
  /** A graphql-ws client; closed by stop(). */
  wsClient(token?: string | null, options?: { retryAttempts?: number }): Client;
  tokenFor(role: 'ADMIN' | 'EDITOR' | 'VIEWER'): Promise<string>;
  stop(): Promise<void>;
}

export interface TestServerOptions {
  env?: Record<string, string>;
  server?: ServerOptions;
  /** Reuse an existing database (e.g. one a TYPO3 fixture created). */
  database?: TestDatabase;
  /** Keep the database when stopping (to restart on it). */
  keepDatabase?: boolean;
}

export async function startTestServer(dialect: TestDialect, options: TestServerOptions = {}): Promise<TestServer> {
  const database = options.database ?? (await createTestDatabase(dialect));
  const databaseUrl = database.config.kind === 'sqlite' ? `sqlite:${database.config.file}` : database.config.url;
  const config: AppConfig = loadConfig({
    PORT: '0',
    HOST: '127.0.0.1',
    DATABASE_URL: databaseUrl,
    ADMIN_TOKEN,
    SECRET_KEY: 'test-secret-key-for-provider-keys',
    SEED_EXAMPLES: 'false',
    LOG_LEVEL: 'silent',
    ...options.env,
  });
  const server = await createServer(config, { logger: pino({ level: 'silent' }), ...options.server });
  const clients: Client[] = [];

  const gqlText = async (query: string, variables?: Record<string, unknown>, token: string | null = ADMIN_TOKEN): Promise<string> => {
    const response = await fetch(server.url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: JSON.stringify({ query, variables }),
    });
    return response.text();
  };
  const gql = async <T>(query: string, variables?: Record<string, unknown>, token: string | null = ADMIN_TOKEN): Promise<GraphQLResponse<T>> =>
    JSON.parse(await gqlText(query, variables, token)) as GraphQLResponse<T>;

  const tokens = new Map<string, string>();
  const testServer: TestServer = {
    dialect,
    server,
    database,
    url: server.url,
    gql,
    gqlText,
    async ok<T>(query: string, variables?: Record<string, unknown>, token?: string | null) {
      const result = await gql<T>(query, variables, token);
      if (result.errors?.length) throw new Error(`GraphQL errors: ${JSON.stringify(result.errors)}`);
      return result.data as T;
    },
    wsClient(token: string | null = ADMIN_TOKEN, clientOptions = {}) {
      const client = createClient({
        url: server.wsUrl,
        webSocketImpl: WebSocket,
        connectionParams: token ? { authorization: `Bearer ${token}` } : {},
        retryAttempts: clientOptions.retryAttempts ?? 0,
        lazy: true,
      });
      clients.push(client);
      return client;
    },
    async tokenFor(role) {
      const existing = tokens.get(role);
      if (existing) return existing;
      const data = await testServer.ok<{ createApiToken: { token: string } }>(
        'mutation($name: String!, $role: Role!) { createApiToken(name: $name, role: $role) { token } }',
        { name: `${role.toLowerCase()} test token`, role },
      );
      tokens.set(role, data.createApiToken.token);
      return data.createApiToken.token;
    },
    async stop() {
      await Promise.all(clients.map((client) => client.dispose()));
      await server.stop();
      if (!options.keepDatabase) await database.drop();
    },
  };
  return testServer;
}

/** Collects every event of a subscription until it completes (or errors). */
export function collect<T>(client: Client, query: string, variables: Record<string, unknown>): { events: T[]; errors: unknown[]; done: Promise<void> } {
  const events: T[] = [];
  const errors: unknown[] = [];
  const done = new Promise<void>((resolve) => {
    client.subscribe<T>(
      { query, variables },
      {
        next: (value) => {
          if (value.errors) errors.push(...value.errors);
          if (value.data) events.push(value.data as T);
        },
        error: (error) => {
          errors.push(error);
          resolve();
        },
        complete: () => resolve(),
      },
    );
  });
  return { events, errors, done };
}
