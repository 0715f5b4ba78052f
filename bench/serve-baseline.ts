/**
 * The baseline of the throughput benchmark: a bare, lean Apollo server
 * (node:http mount, cache control off, NODE_ENV=production) with a
 * hand-written schema whose resolvers return the same rows from raw SQL —
 * no ORM, no auth, no loaders, no validation. What the service costs on top
 * of this is its overhead.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { ApolloServer, HeaderMap } from '@apollo/server';
import { ApolloServerPluginCacheControlDisabled } from '@apollo/server/plugin/disabled';
import Database from 'better-sqlite3';
import mysql from 'mysql2/promise';

type Row = Record<string, unknown>;

const typeDefs = `#graphql
  scalar JSON
  type Provider { identifier: String! }
  type Model { modelId: String! provider: Provider }
  type Snippet { uid: Int! identifier: String! name: String! tags: [String!]! snippet: String! metadata: JSON isActive: Boolean! hidden: Boolean! sorting: Int! }
  type Configuration { identifier: String! model: Model selectedSnippets: [Snippet!]! }
  type PageInfo { hasNextPage: Boolean! endCursor: String }
  type SnippetConnection { totalCount: Int! pageInfo: PageInfo! nodes: [Snippet!]! }
  type Query { snippets(limit: Int = 50): [Snippet!]! configurations(limit: Int = 50): [Configuration!]! snippetsConnection(first: Int = 50): SnippetConnection! }
`;

async function main(): Promise<void> {
  const url = process.env.DATABASE_URL ?? '';
  let query: (sql: string, params: unknown[]) => Promise<Row[]>;
  if (url.startsWith('sqlite:')) {
    const db = new Database(url.slice('sqlite:'.length), { readonly: true });
    query = async (sql, params) => db.prepare(sql).all(...params) as Row[];
  } else {
    const pool = mysql.createPool({ uri: url, connectionLimit: 10 });
    query = async (sql, params) => (await pool.query(sql, params))[0] as Row[];
  }
  const toSnippet = (row: Row) => ({
    uid: row.uid,
    identifier: row.identifier,
    name: row.name,
    tags: String(row.tags ?? '').split(',').map((tag) => tag.trim().toLowerCase()).filter(Boolean),
    snippet: row.snippet,
    metadata: (() => {
      try {
        return JSON.parse(String(row.metadata ?? '{}'));
      } catch {
        return {};
      }
    })(),
    isActive: Number(row.is_active) !== 0,
    hidden: Number(row.hidden) !== 0,
    sorting: row.sorting,
  });
  const resolvers = {
    Query: {
      snippets: async (_: unknown, args: { limit: number }) =>
        (await query('SELECT * FROM tx_nrllm_promptsnippet WHERE deleted = 0 ORDER BY sorting, name LIMIT ?', [args.limit])).map(toSnippet),
      // The first page of the cursor list: one row more than asked (is there a next page?), a count, a cursor of the last row.
      snippetsConnection: async (_: unknown, args: { first: number }) => {
        const [rows, counted] = await Promise.all([
          query('SELECT * FROM tx_nrllm_promptsnippet WHERE deleted = 0 ORDER BY sorting, name, uid LIMIT ?', [args.first + 1]),
          query('SELECT COUNT(*) AS count FROM tx_nrllm_promptsnippet WHERE deleted = 0', []),
        ]);
        const page = rows.slice(0, args.first);
        const last = page[page.length - 1];
        return {
          totalCount: Number(counted[0]?.count ?? 0),
          pageInfo: { hasNextPage: rows.length > args.first, endCursor: last ? Buffer.from(JSON.stringify(['snippets', last.sorting, last.name, last.uid])).toString('base64url') : null },
          nodes: page.map(toSnippet),
        };
      },
      configurations: async (_: unknown, args: { limit: number }) => {
        // One raw query for configurations with model and provider, one for the active snippets.
        const [rows, snippets] = await Promise.all([
          query(
            `SELECT c.identifier, c.snippet_tags, m.model_id, p.identifier AS provider_identifier
             FROM tx_nrllm_configuration c LEFT JOIN tx_nrllm_model m ON m.uid = c.model_uid LEFT JOIN tx_nrllm_provider p ON p.uid = m.provider_uid
             WHERE c.deleted = 0 ORDER BY c.sorting, c.name LIMIT ?`,
            [args.limit],
          ),
          query('SELECT * FROM tx_nrllm_promptsnippet WHERE deleted = 0 AND is_active = 1 AND hidden = 0 ORDER BY sorting, name', []),
        ]);
        const active = snippets.map(toSnippet);
        return rows.map((row) => {
          const tags = String(row.snippet_tags ?? '').split(',').map((tag) => tag.trim().toLowerCase()).filter(Boolean);
          return {
            identifier: row.identifier,
            model: row.model_id ? { modelId: row.model_id, provider: { identifier: row.provider_identifier } } : null,
            selectedSnippets: tags.flatMap((tag) => active.filter((snippet) => snippet.tags.includes(tag))),
          };
        });
      },
    },
  };
  const apollo = new ApolloServer({ typeDefs, resolvers, plugins: [ApolloServerPluginCacheControlDisabled()] });
  await apollo.start();
  const server = http.createServer((request, response) => {
    const chunks: Buffer[] = [];
    request.on('data', (chunk: Buffer) => chunks.push(chunk));
    request.on('end', () => {
      const headers = new HeaderMap();
      for (const [key, value] of Object.entries(request.headers)) if (typeof value === 'string') headers.set(key, value);
      apollo
        .executeHTTPGraphQLRequest({
          httpGraphQLRequest: { method: request.method ?? 'POST', headers, search: '', body: JSON.parse(Buffer.concat(chunks).toString() || '{}') },
          context: async () => ({}),
        })
        .then((result) => {
          response.statusCode = result.status ?? 200;
          for (const [key, value] of result.headers) response.setHeader(key, value);
          response.end(result.body.kind === 'complete' ? result.body.string : '');
        })
        .catch(() => {
          response.statusCode = 500;
          response.end();
        });
    });
  });
  server.listen(0, '127.0.0.1', () => process.stdout.write(`READY ${(server.address() as AddressInfo).port} none\n`));
  process.on('SIGTERM', () => server.close(() => process.exit(0)));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
