import { Column, Entity, PrimaryColumn } from 'typeorm';
import { UnsignedIntColumn } from '../db/columns';

/**
 * The credential of an MCP server, encrypted (AES-256-GCM, the provider-key
 * scheme). TYPO3's `auth_credential` column holds 64 characters, too few for
 * an encrypted token, and the service never widens a TYPO3 column; the
 * server row carries the marker `promptwire:` instead.
 */
@Entity({ name: 'promptwire_mcp_credential' })
export class McpCredentialEntity {
  @PrimaryColumn({ name: 'server_uid', type: 'int', unsigned: true })
  serverUid!: number;

  @Column({ name: 'credential', type: 'text' })
  credential!: string;

  @UnsignedIntColumn('tstamp')
  tstamp!: number;
}
