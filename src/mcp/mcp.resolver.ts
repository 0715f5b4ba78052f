import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { Arg, Authorized, Ctx, Extensions, Int, Mutation, Query, Resolver } from 'type-graphql';
import { Role } from '../auth/roles';
import type { GraphQLContext } from '../graphql/context';
import type { McpServerEntity } from './mcp-server.entity';
import type { SkippedTool } from './mcp.service';
import { CreateMcpServerInput, McpServer, toMcpServer, UpdateMcpServerInput } from './mcp.types';

@Resolver(() => McpServer)
export class McpServerResolver {
  @Authorized(Role.ADMIN)
  @Query(() => [McpServer], { description: 'Every MCP server with its imported catalogue, by name.' })
  @Extensions(listRows(CATALOGUE_ROWS))
  async mcpServers(@Ctx() { services }: GraphQLContext): Promise<McpServer[]> {
    const rows = await services.mcp.list();
    const catalogue = await services.mcp.catalogueOf(rows.map((row) => row.uid));
    return rows.map((row) => toMcpServer(row, catalogue));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => McpServer)
  async createMcpServer(@Ctx() { services }: GraphQLContext, @Arg('input', () => CreateMcpServerInput) input: CreateMcpServerInput): Promise<McpServer> {
    return withCatalogue(services, await services.mcp.create(input));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => McpServer)
  async updateMcpServer(
    @Ctx() { services }: GraphQLContext,
    @Arg('uid', () => Int) uid: number,
    @Arg('input', () => UpdateMcpServerInput) input: UpdateMcpServerInput,
  ): Promise<McpServer> {
    return withCatalogue(services, await services.mcp.update(uid, input));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => Boolean, { description: 'Deletes the server (soft) with its catalogue and credential.' })
  async deleteMcpServer(@Ctx() { services }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<boolean> {
    return services.mcp.delete(uid);
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => McpServer, {
    description: 'Connects, lists the server\'s tools and stores the catalogue; the outcome is in importStatus and importError, the tools it left out in skippedTools.',
  })
  async importMcpTools(@Ctx() { services }: GraphQLContext, @Arg('uid', () => Int) uid: number): Promise<McpServer> {
    const { server, skippedTools } = await services.mcp.importTools(uid);
    return withCatalogue(services, server, skippedTools);
  }
}

async function withCatalogue(services: GraphQLContext['services'], row: McpServerEntity, skippedTools: readonly SkippedTool[] | null = null): Promise<McpServer> {
  return toMcpServer(row, await services.mcp.catalogueOf([row.uid]), skippedTools);
}
