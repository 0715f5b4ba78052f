import { Column, Entity, Index } from 'typeorm';
import { Typo3IntColumn, Typo3StandardFlagColumn, Typo3SwitchColumn, Typo3UnsignedIntColumn, VarcharColumn, Typo3UidColumn } from '../db/columns';

/**
 * `tx_nrllm_mcp_server`: an MCP server an administrator registered, column
 * for column as nr_llm's `ext_tables.sql` defines it, so that a server set up
 * in TYPO3 works here and the other way round.
 */
@Entity({ name: 'tx_nrllm_mcp_server' })
@Index('tx_nrllm_mcp_server_parent', ['pid'])
@Index('tx_nrllm_mcp_server_identifier', ['identifier'])
export class McpServerEntity {
  @Typo3UidColumn({ unsigned: false })
  uid!: number;

  @Typo3IntColumn('pid')
  pid!: number;

  /** Prefixes every imported tool name: `^[a-z0-9_]{1,32}$`. */
  @VarcharColumn('identifier', 32)
  identifier!: string;

  @VarcharColumn('name', 255)
  name!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  /** The absolute http(s) endpoint of the server's streamable HTTP transport. */
  @VarcharColumn('url', 2048)
  url!: string;

  /**
   * Never a secret in itself: TYPO3 writes an identifier of its vault here,
   * this service `promptwire:` (the encrypted value lives in
   * `promptwire_mcp_credential`) or `env:NAME`. `''` = unauthenticated server.
   */
  @VarcharColumn('auth_credential', 64)
  authCredential!: string;

  /** `bearer` (Authorization: Bearer …) or `header` (the header `auth_header_name`). */
  @VarcharColumn('auth_placement', 32, { default: 'bearer' })
  authPlacement!: string;

  @VarcharColumn('auth_header_name', 190)
  authHeaderName!: string;

  /** nr_llm's data classification of everything the server returns; kept, not interpreted here. */
  @VarcharColumn('data_class', 32)
  dataClass!: string;

  /** Every tool of the server waits for a person unless this is 0 (the operator's decision, never the server's). */
  @Typo3SwitchColumn('requires_approval', 1)
  requiresApproval!: boolean;

  /** Off until an administrator switches it on. */
  @Typo3SwitchColumn('enabled', 0)
  enabled!: boolean;

  /** `never_imported`, `ok`, `partial` or `error`. */
  @VarcharColumn('import_status', 20, { default: 'never_imported' })
  importStatus!: string;

  @Column({ name: 'import_error', type: 'text', nullable: true })
  importError!: string | null;

  @Typo3UnsignedIntColumn('last_imported')
  lastImported!: number;

  @Typo3UnsignedIntColumn('tool_count')
  toolCount!: number;

  /** Unix seconds of the last successful round trip (import or call); 0 = never reached. */
  @Typo3UnsignedIntColumn('last_contact')
  lastContact!: number;

  @Typo3UnsignedIntColumn('last_latency_ms')
  lastLatencyMs!: number;

  @Typo3UnsignedIntColumn('tstamp')
  tstamp!: number;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;

  @Typo3StandardFlagColumn('deleted')
  deleted!: boolean;

  @Typo3StandardFlagColumn('hidden')
  hidden!: boolean;
}
