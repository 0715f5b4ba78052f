/**
 * The imported MCP tools as tools a run can offer.
 *
 * A run offers one only when its server is enabled and the run names it
 * (they are never enabled by default). Each run gets its own registrations;
 * its budget of remote calls is counted from its stored steps (TOOL steps
 * marked as remote calls), so an approval pause or a takeover does not
 * reset it. A call's arguments have passed the
 * tool's schema before `execute` runs (the registry checks them); the call
 * is then charged to the budget, made with the run's cancellation signal and
 * the request time limit, and any failure (unreachable server, timeout, an
 * error the remote tool reports) reaches the model only as
 * `Error: tool "NAME" failed.`, the details going to the log. A server that
 * is down therefore affects only the runs that call it.
 */
import { mcpToolGroup } from './tool-names';
import type { ValidateFunction } from 'ajv';
import type { Logger } from '../logger';
import { ToolInputError, type ExternalTool, type ExternalToolSource, type ToolInfo } from '../runs';
import { resultText } from './call-result';
import { withoutCredential, type McpClient } from './mcp-client';
import type { McpServerEntity } from './mcp-server.entity';
import type { McpService } from './mcp.service';
import type { McpRepository, UsableTool } from './mcp.repository';
import { budgetExhaustedMessage, RemoteCallBudget, REMOTE_CALLS_PER_RUN } from './remote-call-budget';

interface CompiledSchema {
  parameters: Record<string, unknown>;
  validate: ValidateFunction;
}

export class McpToolSource implements ExternalToolSource {
  /** Compiled argument checks by stored schema text: an import changes the text, so stale entries are never used. */
  private readonly compiled = new Map<string, CompiledSchema | null>();

  constructor(
    private readonly repository: McpRepository,
    private readonly service: McpService,
    private readonly client: McpClient,
    private readonly logger: Logger,
    private readonly callsPerRun = REMOTE_CALLS_PER_RUN,
  ) {}

  async list(): Promise<ToolInfo[]> {
    return (await this.usable()).map(({ tool, server, schema }) => ({
      name: tool.toolName,
      description: describe(server, tool.description),
      parameters: schema.parameters,
      enabledByDefault: false,
      requiresApproval: server.requiresApproval,
      group: mcpToolGroup(server.identifier),
    }));
  }

  async toolsForRun(): Promise<ExternalTool[]> {
    // Calls made through these registrations, for callers that do not say how many the run made (outside a run's loop).
    let madeHere = 0;
    // Where and how to connect is read once per run and server (the credential is a database read and a decryption).
    const endpoints = new Map<number, ReturnType<McpService['endpointFor']>>();
    const endpointOf = (server: McpServerEntity) => {
      let endpoint = endpoints.get(server.uid);
      if (endpoint === undefined) {
        endpoint = this.service.endpointFor(server);
        endpoints.set(server.uid, endpoint);
        endpoint.catch(() => endpoints.delete(server.uid));
      }
      return endpoint;
    };
    return (await this.usable()).map(({ tool, server, schema }) => ({
      validate: schema.validate,
      registration: {
        name: tool.toolName,
        description: describe(server, tool.description),
        parameters: schema.parameters,
        enabledByDefault: false,
        requiresApproval: server.requiresApproval,
        group: mcpToolGroup(server.identifier),
        execute: async (args, context) => {
          // The run's count comes from its stored steps, so it survives an approval pause and a takeover.
          const budget = new RemoteCallBudget(this.callsPerRun, context.remoteCallsMade ?? madeHere);
          if (!budget.tryConsume()) {
            // ToolInputError's message reaches the model after "Error: ".
            throw new ToolInputError(budgetExhaustedMessage(budget.limit, tool.toolName).slice('Error: '.length));
          }
          madeHere += 1;
          context.countRemoteCall?.();
          const endpoint = await endpointOf(server);
          if (typeof endpoint === 'string') throw new Error(`MCP server "${server.identifier}" cannot be used: ${endpoint}`);
          // A signal per call: the SDK leaves its listener on the signal it is given, and a run makes up to 20 calls.
          const call = new AbortController();
          const abort = () => call.abort(context.signal.reason);
          context.signal.addEventListener('abort', abort, { once: true });
          if (context.signal.aborted) abort();
          let result;
          try {
            result = await this.client.callTool(endpoint, tool.remoteName, args, call.signal);
          } finally {
            context.signal.removeEventListener('abort', abort);
          }
          const text = resultText(result);
          if (result.isError === true) {
            // A server may repeat the credential it was sent in its error text; redacted before the cut, which could halve it.
            const remoteError = withoutCredential(text.slice(0, 2000 + 3 * endpoint.credential.length), endpoint.credential).slice(0, 2000);
            this.logger.warn({ tool: tool.toolName, server: server.identifier, remoteError }, 'A remote MCP tool reported an error');
            throw new Error(`The remote tool "${tool.remoteName}" reported an error.`);
          }
          return text;
        },
      },
    }));
  }

  private async usable(): Promise<(UsableTool & { schema: CompiledSchema })[]> {
    const usable: (UsableTool & { schema: CompiledSchema })[] = [];
    for (const entry of await this.repository.usableTools()) {
      const schema = this.compile(entry.tool.inputSchema ?? '');
      if (schema === null) {
        this.logger.warn({ tool: entry.tool.toolName }, 'An imported MCP tool has no usable argument schema; it is not offered');
        continue;
      }
      usable.push({ ...entry, schema });
    }
    return usable;
  }

  private compile(text: string): CompiledSchema | null {
    const cached = this.compiled.get(text);
    if (cached !== undefined) return cached;
    let compiled: CompiledSchema | null = null;
    try {
      const parameters = JSON.parse(text) as unknown;
      if (typeof parameters === 'object' && parameters !== null && !Array.isArray(parameters) && (parameters as { type?: unknown }).type === 'object') {
        compiled = { parameters: parameters as Record<string, unknown>, validate: this.service.schemaCompiler.compile(parameters) };
      }
    } catch {
      compiled = null;
    }
    if (this.compiled.size > 5000) this.compiled.clear();
    this.compiled.set(text, compiled);
    return compiled;
  }
}

/** nr_llm's description: the model is told the tool is a remote server's. */
function describe(server: McpServerEntity, description: string | null): string {
  const origin = `[via the external MCP server "${server.name}"]`;
  const remote = (description ?? '').trim();
  return remote === '' ? origin : `${origin} ${remote}`;
}
