/**
 * The MCP feature, built once by the composition root: the service behind
 * the GraphQL surface and the tool source runs read their MCP tools from.
 */
import type { DataSource } from 'typeorm';
import type { AppConfig } from '../config';
import type { IdentifierLock } from '../db/identifier-lock';
import type { Logger } from '../logger';
import { createOutboundFetch } from '../shared/outbound-address';
import type { SecretBox } from '../shared/secret-box';
import { McpClient } from './mcp-client';
import { McpToolSource } from './mcp-tool-source';
import { McpRepository } from './mcp.repository';
import { McpService } from './mcp.service';

export type { McpService } from './mcp.service';

export interface McpFeature {
  service: McpService;
  toolSource: McpToolSource;
}

export function createMcpFeature(
  dataSource: DataSource,
  identifiers: IdentifierLock,
  config: AppConfig,
  secrets: SecretBox,
  logger: Logger,
  builtinToolNames: () => readonly string[],
): McpFeature {
  const repository = new McpRepository(dataSource);
  const outbound = createOutboundFetch({ allowedHosts: config.webhookAllowedHosts });
  let service: McpService | null = null;
  const client = new McpClient({
    outbound,
    timeoutMs: config.mcpTimeoutMs,
    logger,
    onContact: (serverUid, latencyMs) => {
      service?.recordContact(serverUid, latencyMs).catch((error: unknown) => logger.warn({ err: error, server: serverUid }, 'Recording MCP server contact failed'));
    },
  });
  service = new McpService(repository, client, secrets, identifiers, logger, {
    allowedHosts: config.webhookAllowedHosts,
    builtinToolNames,
    environment: config,
    timeoutMs: config.mcpTimeoutMs,
    close: async () => {
      await client.close();
      await outbound.close();
    },
  });
  return { service, toolSource: new McpToolSource(repository, service, client, logger) };
}
