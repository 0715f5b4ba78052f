/**
 * A real MCP server for the tests, built with the official SDK: streamable
 * HTTP on 127.0.0.1, port 0, stateless (a fresh SDK server per request, as
 * the SDK's stateless example does). Its catalogue can change between
 * imports; it records every request's headers, every tool call, and calls
 * whose client went away before the answer (a cancelled or timed-out call).
 */
import { createServer, type IncomingHttpHeaders, type Server as HttpServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { Server } from '@modelcontextprotocol/sdk/server/index.js';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import { CallToolRequestSchema, ListToolsRequestSchema } from '@modelcontextprotocol/sdk/types.js';

export interface TestTool {
  name: string;
  description?: string;
  inputSchema: Record<string, unknown>;
  annotations?: Record<string, unknown>;
  /** Answers the call: text content, or `{ error }` for an isError result; may throw. */
  run: (args: Record<string, unknown>, signal: AbortSignal, headers: IncomingHttpHeaders) => Promise<string | { error: string }> | string | { error: string };
}

export interface RecordedCall {
  name: string;
  arguments: Record<string, unknown>;
  headers: IncomingHttpHeaders;
  /** The client closed the connection before the answer was written. */
  abandoned: boolean;
  /** The JSON-RPC id of the request. */
  requestId: string | number;
}

export const standardTools = (): TestTool[] => [
  {
    name: 'echo',
    description: 'Answers the text it is given.',
    inputSchema: { type: 'object', properties: { text: { type: 'string' } }, required: ['text'], additionalProperties: false },
    annotations: { readOnlyHint: true },
    run: (args) => String(args.text),
  },
  {
    name: 'add',
    description: 'Adds two numbers.',
    inputSchema: { type: 'object', properties: { a: { type: 'number' }, b: { type: 'number' } }, required: ['a', 'b'] },
    run: (args) => String(Number(args.a) + Number(args.b)),
  },
  {
    name: 'fail',
    description: 'Always reports an error.',
    inputSchema: { type: 'object', properties: {} },
    run: () => ({ error: 'internal detail: database password is hunter2' }),
  },
  {
    name: 'slow',
    description: 'Answers after the given milliseconds.',
    inputSchema: { type: 'object', properties: { ms: { type: 'number' } }, required: ['ms'] },
    run: (args, signal) =>
      new Promise((resolve) => {
        const timer = setTimeout(() => resolve('slow done'), Number(args.ms));
        signal.addEventListener('abort', () => clearTimeout(timer));
      }),
  },
  {
    name: 'big',
    description: 'Answers the given number of bytes.',
    inputSchema: { type: 'object', properties: { bytes: { type: 'number' } }, required: ['bytes'] },
    run: (args) => 'x'.repeat(Number(args.bytes)),
  },
  {
    name: 'refd',
    description: 'Its schema uses $ref, which the import refuses.',
    inputSchema: { type: 'object', properties: { a: { $ref: '#/$defs/a' } }, $defs: { a: { type: 'string' } } },
    run: () => 'never',
  },
];

export class McpTestServer {
  tools: TestTool[];
  readonly requests: IncomingHttpHeaders[] = [];
  readonly calls: RecordedCall[] = [];
  /** Request ids the client cancelled with `notifications/cancelled`. */
  readonly cancelled: (string | number)[] = [];
  /** When set, a request it answers is refused with that HTTP status and body before MCP sees it (a 401 that repeats the credential). */
  refuseWith: ((headers: IncomingHttpHeaders) => { status: number; body: string } | null) | null = null;
  /** When set, `tools/list` answers a JSON-RPC error with the message it gives (a server that repeats the credential). */
  listError: ((headers: IncomingHttpHeaders) => string) | null = null;
  /** When set, `tools/list` answers what it makes of the usual entries, as it is (e.g. with entries no tool list should have). */
  rawListing: ((tools: Record<string, unknown>[]) => unknown) | null = null;
  private http: HttpServer | null = null;
  private port = 0;

  private constructor(tools: TestTool[]) {
    this.tools = tools;
  }

  static async start(tools: TestTool[] = standardTools()): Promise<McpTestServer> {
    const server = new McpTestServer(tools);
    await server.listen(0);
    return server;
  }

  get url(): string {
    return `http://127.0.0.1:${this.port}/mcp`;
  }

  removeTool(name: string): void {
    this.tools = this.tools.filter((tool) => tool.name !== name);
  }

  /** Stops answering (the port is closed); `restart` listens on the same port again. */
  async stop(): Promise<void> {
    const http = this.http;
    this.http = null;
    if (!http) return;
    http.closeAllConnections();
    await new Promise<void>((resolve) => http.close(() => resolve()));
  }

  async restart(): Promise<void> {
    await this.listen(this.port);
  }

  private async listen(port: number): Promise<void> {
    const http = createServer((req, res) => {
      this.requests.push(req.headers);
      const refusal = this.refuseWith?.(req.headers) ?? null;
      if (refusal !== null) {
        req.resume();
        res.writeHead(refusal.status, { 'content-type': 'text/plain' }).end(refusal.body);
        return;
      }
      const chunks: Buffer[] = [];
      req.on('data', (chunk: Buffer) => chunks.push(chunk));
      req.on('end', () => {
        void (async () => {
          const text = Buffer.concat(chunks).toString('utf8');
          const body: unknown = text === '' ? undefined : JSON.parse(text);
          const message = body as { method?: string; params?: { requestId?: string | number } } | undefined;
          if (message?.method === 'notifications/cancelled' && message.params?.requestId !== undefined) this.cancelled.push(message.params.requestId);
          const mcp = this.sdkServer(req.headers, res);
          const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined });
          res.on('close', () => {
            void transport.close();
            void mcp.close();
          });
          await mcp.connect(transport);
          await transport.handleRequest(req, res, body);
        })().catch(() => {
          if (!res.headersSent) res.writeHead(500).end();
        });
      });
    });
    await new Promise<void>((resolve) => http.listen(port, '127.0.0.1', () => resolve()));
    this.port = (http.address() as AddressInfo).port;
    this.http = http;
  }

  private sdkServer(headers: IncomingHttpHeaders, res: import('node:http').ServerResponse): Server {
    const server = new Server({ name: 'promptwire-test-mcp', version: '1.0.0' }, { capabilities: { tools: {} } });
    server.setRequestHandler(ListToolsRequestSchema, () => {
      if (this.listError !== null) throw new Error(this.listError(headers));
      const tools = this.tools.map(({ name, description, inputSchema, annotations }) => ({ name, description, inputSchema, ...(annotations ? { annotations } : {}) }));
      return (this.rawListing === null ? { tools } : this.rawListing(tools)) as never;
    });
    server.setRequestHandler(CallToolRequestSchema, async (request, extra) => {
      const tool = this.tools.find((candidate) => candidate.name === request.params.name);
      const call: RecordedCall = { name: request.params.name, arguments: request.params.arguments ?? {}, headers, abandoned: false, requestId: extra.requestId };
      this.calls.push(call);
      const gone = new AbortController();
      res.on('close', () => {
        if (!res.writableFinished) {
          call.abandoned = true;
          gone.abort();
        }
      });
      if (!tool) return { content: [{ type: 'text' as const, text: `no tool ${request.params.name}` }], isError: true };
      const answer = await tool.run(call.arguments, gone.signal, headers);
      if (typeof answer === 'string') return { content: [{ type: 'text' as const, text: answer }] };
      return { content: [{ type: 'text' as const, text: answer.error }], isError: true };
    });
    return server;
  }
}
