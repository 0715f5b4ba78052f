import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { mcpToolGroup } from './tool-names';
import { Extensions, Field, InputType, Int, ObjectType } from 'type-graphql';
import { DateTimeScalar, JSONScalar } from '../graphql/scalars';
import { ToolInfo } from '../runs';
import { fromUnix } from '../shared/time';
import type { McpServerEntity } from './mcp-server.entity';
import type { McpToolEntity } from './mcp-tool.entity';
import { credentialState, type SkippedTool as SkippedToolRecord } from './mcp.service';

@ObjectType({ simpleResolvers: true, description: 'A tool of an MCP server\'s imported catalogue, orphaned ones included.' })
export class McpTool {
  @Field({ description: 'mcp_<identifier>_<remote name>: the name runs and the tools query use.' }) name!: string;
  @Field({ description: 'The name on the server.' }) remoteName!: string;
  @Field() description!: string;
  @Field(() => JSONScalar, { description: 'The normalised JSON schema of the arguments.' }) parameters!: Record<string, unknown>;
  @Field(() => JSONScalar, { description: 'The server\'s own annotations (readOnlyHint …), for display only: approval is the operator\'s decision.' }) annotations!: Record<string, unknown>;
  @Field({ description: 'Gone from the server at the last import: kept, never offered.' }) orphaned!: boolean;
}

@ObjectType({ simpleResolvers: true, description: 'A tool an import of an MCP server\'s catalogue left out, and why.' })
export class SkippedTool {
  @Field({ description: 'The name the server advertised ("" when it gave none; a name that is not a string as its JSON text), cut to 100 characters.' }) name!: string;
  @Field({ description: 'Why it was not imported.' }) reason!: string;
}

@ObjectType({ simpleResolvers: true, description: 'An MCP server whose tools runs can call. Its credential is write-only.' })
export class McpServer {
  @Field(() => Int) uid!: number;
  @Field() identifier!: string;
  @Field() name!: string;
  @Field(() => String, { nullable: true }) description!: string | null;
  @Field() url!: string;
  @Field({ description: 'Off until an administrator switches it on.' }) enabled!: boolean;
  @Field({ description: 'Every tool of the server waits for a person\'s approval (default true).' }) requiresApproval!: boolean;
  @Field({ description: 'Whether a credential is set; the credential itself is never readable.' }) hasCredential!: boolean;
  @Field({ description: 'none, stored (encrypted here), environment (env:NAME) or external (a TYPO3 vault identifier this service cannot read).' }) credentialSource!: string;
  @Field({ description: 'bearer (Authorization: Bearer …) or header (authHeaderName).' }) authPlacement!: string;
  @Field() authHeaderName!: string;
  @Field({ description: 'nr_llm\'s data class of what the server returns; stored, not interpreted here.' }) dataClass!: string;
  @Field({ description: 'never_imported, ok, partial (some tools skipped, see importError) or error.' }) importStatus!: string;
  @Field(() => String, { nullable: true }) importError!: string | null;
  @Field(() => DateTimeScalar, { nullable: true }) lastImported!: Date | null;
  @Field(() => Int) toolCount!: number;
  @Field(() => DateTimeScalar, { nullable: true, description: 'The last successful round trip (import or call).' }) lastContact!: Date | null;
  @Field(() => Int, { description: 'Duration of the round trip at lastContact.' }) lastLatencyMs!: number;
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [ToolInfo], { description: 'The imported tools that are not orphaned, as runs see them.' }) tools!: ToolInfo[];
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [McpTool], { description: 'The whole stored catalogue, orphaned tools last.' }) catalogue!: McpTool[];
  @Extensions(listRows(CATALOGUE_ROWS))
  @Field(() => [SkippedTool], {
    nullable: true,
    description: 'In the answer of importMcpTools: the tools that import left out, and why ([] when it took them all, or failed as a whole: see importStatus). null in other answers; importError keeps the last import\'s reasons as text.',
  })
  skippedTools!: SkippedTool[] | null;
}

function readObject(text: string | null): Record<string, unknown> {
  try {
    const value = JSON.parse(text ?? '') as unknown;
    return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}

/** `skippedTools`: what the import that answers with this server left out; null outside an import's answer. */
export function toMcpServer(row: McpServerEntity, catalogue: readonly McpToolEntity[], skippedTools: readonly SkippedToolRecord[] | null = null): McpServer {
  const source = credentialState(row.authCredential);
  const tools = catalogue.filter((tool) => tool.server === row.uid);
  return {
    uid: row.uid,
    identifier: row.identifier,
    name: row.name,
    description: row.description,
    url: row.url,
    enabled: row.enabled,
    requiresApproval: row.requiresApproval,
    hasCredential: source !== 'none',
    credentialSource: source,
    authPlacement: row.authPlacement,
    authHeaderName: row.authHeaderName,
    dataClass: row.dataClass,
    importStatus: row.importStatus,
    importError: row.importError === '' ? null : row.importError,
    lastImported: row.lastImported > 0 ? fromUnix(row.lastImported) : null,
    toolCount: row.toolCount,
    lastContact: row.lastContact > 0 ? fromUnix(row.lastContact) : null,
    lastLatencyMs: row.lastLatencyMs,
    tools: tools
      .filter((tool) => !tool.orphaned)
      .map((tool) => ({
        name: tool.toolName,
        description: tool.description ?? '',
        parameters: readObject(tool.inputSchema),
        enabledByDefault: false,
        requiresApproval: row.requiresApproval,
        group: mcpToolGroup(row.identifier),
      })),
    catalogue: tools.map((tool) => ({
      name: tool.toolName,
      remoteName: tool.remoteName,
      description: tool.description ?? '',
      parameters: readObject(tool.inputSchema),
      annotations: readObject(tool.remoteAnnotations),
      orphaned: tool.orphaned,
    })),
    skippedTools: skippedTools === null ? null : skippedTools.map(({ name, reason }) => ({ name, reason })),
  };
}

@InputType()
export class CreateMcpServerInput {
  @Field({ description: '^[a-z0-9_]{1,32}$; prefixes every imported tool name.' }) identifier!: string;
  @Field() name!: string;
  @Field({ description: 'The server\'s streamable HTTP endpoint (http or https).' }) url!: string;
  @Field(() => String, { nullable: true, description: 'Write-only; stored encrypted. "env:NAME" reads the variable NAME at connection time; NAME must start with PROMPTWIRE_PROVIDER_KEY_ or be listed in PROVIDER_KEY_ENV_ALLOW, as for provider keys.' }) credential?: string | null;
  @Field(() => String, { nullable: true, description: 'bearer (default) or header.' }) authPlacement?: string | null;
  @Field(() => String, { nullable: true, description: 'The header that carries the credential when authPlacement is header.' }) authHeaderName?: string | null;
  @Field(() => Boolean, { nullable: true, description: 'Default true.' }) requiresApproval?: boolean | null;
  @Field(() => Boolean, { nullable: true, description: 'Default false.' }) enabled?: boolean | null;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field(() => String, { nullable: true }) dataClass?: string | null;
}

@InputType()
export class UpdateMcpServerInput {
  @Field(() => String, { nullable: true, description: 'Changing it clears the catalogue (the names carry it); import again.' }) identifier?: string | null;
  @Field(() => String, { nullable: true }) name?: string | null;
  @Field(() => String, { nullable: true }) url?: string | null;
  @Field(() => String, { nullable: true, description: 'Write-only. null or "" removes it.' }) credential?: string | null;
  @Field(() => String, { nullable: true }) authPlacement?: string | null;
  @Field(() => String, { nullable: true }) authHeaderName?: string | null;
  @Field(() => Boolean, { nullable: true }) requiresApproval?: boolean | null;
  @Field(() => Boolean, { nullable: true }) enabled?: boolean | null;
  @Field(() => String, { nullable: true }) description?: string | null;
  @Field(() => String, { nullable: true }) dataClass?: string | null;
}
