/**
 * The SQL of the MCP feature: `tx_nrllm_mcp_server`, `tx_nrllm_mcp_tool` and
 * the service's own `promptwire_mcp_credential`. Rows may have been written
 * by TYPO3; deleted servers are invisible, hidden ones are listed but never
 * offered to runs.
 */
import type { DataSource, EntityManager } from 'typeorm';
import { In } from 'typeorm';
import { McpCredentialEntity } from './mcp-credential.entity';
import { McpServerEntity } from './mcp-server.entity';
import { McpToolEntity } from './mcp-tool.entity';

/** One tool of an import, ready to store. */
export interface CatalogueEntry {
  toolName: string;
  remoteName: string;
  description: string;
  inputSchema: string;
  remoteAnnotations: string;
}

/** A tool a run may offer, with its server. */
export interface UsableTool {
  tool: McpToolEntity;
  server: McpServerEntity;
}

export class McpRepository {
  constructor(private readonly dataSource: DataSource) {}

  async listServers(): Promise<McpServerEntity[]> {
    return this.dataSource.getRepository(McpServerEntity).find({ where: { deleted: false }, order: { name: 'ASC', uid: 'ASC' } });
  }

  async findServer(uid: number, manager: EntityManager = this.dataSource.manager): Promise<McpServerEntity | null> {
    return manager.getRepository(McpServerEntity).findOne({ where: { uid, deleted: false } });
  }

  /** Other live servers using the identifier (their tools would share names). */
  async serversWithIdentifier(identifier: string, manager: EntityManager = this.dataSource.manager): Promise<McpServerEntity[]> {
    return manager.getRepository(McpServerEntity).find({ where: { identifier, deleted: false } });
  }

  async saveServer(row: McpServerEntity, manager: EntityManager = this.dataSource.manager): Promise<McpServerEntity> {
    return manager.getRepository(McpServerEntity).save(row);
  }

  /** Soft-deletes the server; its catalogue goes (the catalogue has no deleted flag) and so does its credential. */
  async deleteServer(uid: number, now: number, manager: EntityManager): Promise<void> {
    await manager.update(McpServerEntity, { uid }, { deleted: true, tstamp: now });
    await manager.delete(McpToolEntity, { server: uid });
    await manager.delete(McpCredentialEntity, { serverUid: uid });
  }

  /** Every tool of the servers, orphaned ones last, each group by name. */
  async catalogueOf(serverUids: readonly number[]): Promise<McpToolEntity[]> {
    if (serverUids.length === 0) return [];
    return this.dataSource.getRepository(McpToolEntity).find({ where: { server: In([...serverUids]) }, order: { orphaned: 'ASC', toolName: 'ASC' } });
  }

  /** The tools runs may offer: not orphaned, of enabled, visible, live servers. */
  async usableTools(): Promise<UsableTool[]> {
    const servers = await this.dataSource.getRepository(McpServerEntity).find({ where: { deleted: false, hidden: false, enabled: true } });
    if (servers.length === 0) return [];
    const byUid = new Map(servers.map((server) => [server.uid, server]));
    const tools = await this.dataSource.getRepository(McpToolEntity).find({ where: { server: In([...byUid.keys()]), orphaned: false }, order: { toolName: 'ASC' } });
    return tools.map((tool) => ({ tool, server: byUid.get(tool.server)! }));
  }

  /**
   * Stores an import: tools present are written (new ones inserted), tools
   * no longer advertised are marked orphaned and kept. Answers how many are
   * orphaned now.
   */
  async reconcileCatalogue(server: McpServerEntity, entries: readonly CatalogueEntry[], now: number, manager: EntityManager): Promise<number> {
    const repository = manager.getRepository(McpToolEntity);
    const existing = new Map((await repository.find({ where: { server: server.uid } })).map((row) => [row.toolName, row]));
    const seen = new Set<string>();
    for (const entry of entries) {
      seen.add(entry.toolName);
      const row = existing.get(entry.toolName) ?? repository.create({ server: server.uid, toolName: entry.toolName, crdate: now });
      Object.assign(row, {
        pid: server.pid,
        remoteName: entry.remoteName,
        description: entry.description,
        inputSchema: entry.inputSchema,
        remoteAnnotations: entry.remoteAnnotations,
        orphaned: false,
        tstamp: now,
      });
      await repository.save(row);
    }
    let orphaned = 0;
    for (const [toolName, row] of existing) {
      if (seen.has(toolName)) continue;
      orphaned += 1;
      if (!row.orphaned) await repository.update({ uid: row.uid }, { orphaned: true, tstamp: now });
    }
    return orphaned;
  }

  async recordImportOutcome(uid: number, outcome: { status: string; error: string; toolCount: number; now: number }, manager: EntityManager = this.dataSource.manager): Promise<void> {
    await manager.update(McpServerEntity, { uid }, { importStatus: outcome.status, importError: outcome.error, toolCount: outcome.toolCount, lastImported: outcome.now });
  }

  /** nr_llm's liveness fields, written after every successful round trip. */
  async recordContact(uid: number, now: number, latencyMs: number): Promise<void> {
    await this.dataSource.getRepository(McpServerEntity).update({ uid }, { lastContact: now, lastLatencyMs: Math.max(0, Math.round(latencyMs)) });
  }

  async credentialOf(serverUid: number): Promise<string | null> {
    const row = await this.dataSource.getRepository(McpCredentialEntity).findOne({ where: { serverUid } });
    return row?.credential ?? null;
  }

  async storeCredential(serverUid: number, encrypted: string | null, now: number, manager: EntityManager): Promise<void> {
    if (encrypted === null) {
      await manager.delete(McpCredentialEntity, { serverUid });
      return;
    }
    await manager.getRepository(McpCredentialEntity).save({ serverUid, credential: encrypted, tstamp: now });
  }

  async transaction<T>(work: (manager: EntityManager) => Promise<T>): Promise<T> {
    return this.dataSource.transaction(work);
  }
}
