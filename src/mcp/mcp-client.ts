/**
 * Talks to MCP servers with the official SDK over streamable HTTP.
 *
 * One connection (an initialised SDK client and its session) per server is
 * kept and reused by every run and import; a failure closes it, and the next
 * request opens a new one. A request on a kept connection that the server no
 * longer knows (its session expired, the server restarted) is made once more
 * on a new connection; a timed-out or cancelled request is not repeated.
 * Every connection goes through the outbound address rule.
 */
import crypto from 'node:crypto';
import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport, StreamableHTTPError } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { McpError } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { Logger } from '../logger';
import { redactSecrets } from '../providers/adapters/errors';
import type { OutboundFetch } from '../shared/outbound-address';
import type { RemoteCallResult } from './call-result';

/** What a connection needs to know of a server. */
export interface McpEndpoint {
  uid: number;
  url: string;
  /** Headers every request carries (the credential, when the server has one). */
  headers: Record<string, string>;
  /** The credential the headers carry (`''`: none); only for redaction. */
  credential: string;
}

/**
 * `tools/list` as it is read: a list of entries, each checked later on its
 * own. The SDK's `listTools` validates with its own result schema, which
 * refuses the whole answer for one entry it does not accept (an array as
 * argument schema, a number as name): one odd tool would fail the import of
 * all. The SDK's generic `request` takes the result schema to use instead.
 * (Without `listTools` the SDK caches no output schemas for `callTool` to
 * check; results are read as text here, and a kept connection used for
 * calls may never have listed its tools anyway.)
 */
const ToolListPage = z.object({ tools: z.array(z.unknown()), nextCursor: z.string().optional() }).passthrough();

/** The server answered a request with something that is not what the protocol says it answers. */
export class MalformedAnswerError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'MalformedAnswerError';
  }
}

export interface McpClientOptions {
  outbound: OutboundFetch;
  /** One request's time limit (a tool call, one page of a listing). */
  timeoutMs: number;
  logger: Logger;
  /** Called after every successful round trip (nr_llm's liveness fields). */
  onContact?: (serverUid: number, latencyMs: number) => void;
}

/** A listing that does not end within this many pages is refused. */
const MAX_PAGES = 50;

interface Connection {
  fingerprint: string;
  client: Client;
  ready: Promise<void>;
}

export class McpClient {
  private readonly connections = new Map<number, Connection>();

  constructor(private readonly options: McpClientOptions) {}

  /**
   * Every entry of the server's `tools/list`, over all pages, unchecked: a
   * tool as the server describes it, or anything else a server may put
   * there. The import checks each entry on its own.
   */
  async listTools(endpoint: McpEndpoint, signal?: AbortSignal): Promise<unknown[]> {
    return this.withConnection(endpoint, signal, true, async (client) => {
      const tools: unknown[] = [];
      let cursor: string | undefined;
      for (let page = 0; page < MAX_PAGES; page += 1) {
        let result: z.infer<typeof ToolListPage>;
        try {
          result = await client.request({ method: 'tools/list', params: cursor === undefined ? {} : { cursor } }, ToolListPage, this.requestOptions(signal));
        } catch (error) {
          if (!(error instanceof z.ZodError)) throw error;
          const issue = error.issues[0];
          throw new MalformedAnswerError(`The server's answer to tools/list is not a tool list${issue ? ` (${issue.path.join('.') || 'the answer'}: ${issue.message})` : ''}.`);
        }
        tools.push(...result.tools);
        cursor = result.nextCursor;
        if (cursor === undefined) return tools;
      }
      throw new Error(`The tool listing did not end within ${MAX_PAGES} pages.`);
    });
  }

  /** Calls a tool; throws on any transport failure, timeout or cancellation. */
  async callTool(endpoint: McpEndpoint, remoteName: string, args: Record<string, unknown>, signal?: AbortSignal): Promise<RemoteCallResult> {
    return this.withConnection(endpoint, signal, false, async (client) => (await client.callTool({ name: remoteName, arguments: args }, undefined, this.requestOptions(signal))) as RemoteCallResult);
  }

  /** Closes the server's kept connection (its settings changed, or it was deleted). */
  forget(serverUid: number): void {
    const connection = this.connections.get(serverUid);
    if (connection === undefined) return;
    this.connections.delete(serverUid);
    void connection.client.close().catch(() => undefined);
  }

  async close(): Promise<void> {
    const open = [...this.connections.values()];
    this.connections.clear();
    await Promise.all(open.map((connection) => connection.client.close().catch(() => undefined)));
  }

  private requestOptions(signal: AbortSignal | undefined) {
    return { timeout: this.options.timeoutMs, ...(signal ? { signal } : {}) };
  }

  private async withConnection<T>(endpoint: McpEndpoint, signal: AbortSignal | undefined, idempotent: boolean, work: (client: Client) => Promise<T>): Promise<T> {
    const started = performance.now();
    let { connection, fresh } = this.connectionFor(endpoint, signal);
    for (;;) {
      let connected = false;
      try {
        await connection.ready;
        connected = true;
        const result = await work(connection.client);
        this.options.onContact?.(endpoint.uid, Math.round(performance.now() - started));
        return result;
      } catch (error) {
        // A server may repeat the credential in its error (an HTTP body, a JSON-RPC message): gone before anyone logs it.
        redactCredential(error, endpoint.credential);
        // A protocol answer (an error response, a timeout) leaves the session usable for other requests; anything else does not.
        if (!connected || !(error instanceof McpError)) this.drop(endpoint.uid, connection);
        const retry = !fresh && !signal?.aborted && (idempotent ? !(error instanceof McpError) : isUnknownSession(error));
        if (!retry) throw error;
        this.options.logger.debug({ server: endpoint.uid, err: error }, 'A kept MCP connection failed; reconnecting once');
        ({ connection, fresh } = this.connectionFor(endpoint, signal));
        fresh = true;
      }
    }
  }

  private connectionFor(endpoint: McpEndpoint, signal: AbortSignal | undefined): { connection: Connection; fresh: boolean } {
    const fingerprint = crypto.createHash('sha256').update(JSON.stringify([endpoint.url, endpoint.headers])).digest('hex');
    const kept = this.connections.get(endpoint.uid);
    if (kept !== undefined && kept.fingerprint === fingerprint) return { connection: kept, fresh: false };
    if (kept !== undefined) this.drop(endpoint.uid, kept);

    const client = new Client({ name: 'promptwire', version: '1' });
    const transport = new StreamableHTTPClientTransport(new URL(endpoint.url), {
      fetch: this.options.outbound.fetch,
      requestInit: { headers: endpoint.headers },
    });
    const connection: Connection = { fingerprint, client, ready: client.connect(transport, this.requestOptions(signal)) };
    // A failed connection is dropped by the request that awaits it; this only keeps the rejection from going unhandled.
    connection.ready.catch(() => undefined);
    client.onclose = () => {
      if (this.connections.get(endpoint.uid) === connection) this.connections.delete(endpoint.uid);
    };
    this.connections.set(endpoint.uid, connection);
    return { connection, fresh: true };
  }

  private drop(serverUid: number, connection: Connection): void {
    if (this.connections.get(serverUid) === connection) this.connections.delete(serverUid);
    void connection.client.close().catch(() => undefined);
  }
}

/** Text a server sent, without the credential it was sent: the rule provider errors follow (`redactSecrets`). */
export function withoutCredential(text: string, credential: string): string {
  return redactSecrets(text, credential === '' ? null : credential);
}

/**
 * Removes the credential from the message and stack of an error a request
 * raised, and of its causes. In place: the error's class and code still tell
 * callers what happened.
 */
function redactCredential(error: unknown, credential: string): void {
  let current = error;
  for (let depth = 0; depth < 5 && current instanceof Error; depth += 1) {
    current.message = withoutCredential(current.message, credential);
    if (current.stack !== undefined) current.stack = withoutCredential(current.stack, credential);
    current = current.cause;
  }
}

/** The server answered 404 to a kept session: it restarted or let the session expire. */
function isUnknownSession(error: unknown): boolean {
  return error instanceof StreamableHTTPError && error.code === 404;
}
