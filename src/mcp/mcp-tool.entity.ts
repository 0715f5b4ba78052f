import { Column, Entity, Index } from 'typeorm';
import { MediumTextColumn, Typo3IntColumn, Typo3SwitchColumn, Typo3UnsignedIntColumn, VarcharColumn, Typo3UidColumn } from '../db/columns';

/**
 * `tx_nrllm_mcp_tool`: the catalogue an import stored for a server, as
 * nr_llm keeps it. Written only by the import; no deleted/hidden columns.
 */
@Entity({ name: 'tx_nrllm_mcp_tool' })
@Index('tx_nrllm_mcp_tool_parent', ['pid'])
@Index('tx_nrllm_mcp_tool_server', ['server'])
@Index('tx_nrllm_mcp_tool_tool_name', ['toolName'], { unique: true })
export class McpToolEntity {
  @Typo3UidColumn({ unsigned: false })
  uid!: number;

  @Typo3IntColumn('pid')
  pid!: number;

  /** The `tx_nrllm_mcp_server` uid. */
  @Typo3UnsignedIntColumn('server')
  server!: number;

  /** `mcp_<identifier>_<remote>`: the name the model and the `tools` query see. */
  @VarcharColumn('tool_name', 190)
  toolName!: string;

  /** The name on the wire, sent verbatim in `tools/call`. */
  @VarcharColumn('remote_name', 190)
  remoteName!: string;

  @Column({ name: 'description', type: 'text', nullable: true })
  description!: string | null;

  /** The normalised JSON schema of the arguments object. */
  @MediumTextColumn({ name: 'input_schema', nullable: true })
  inputSchema!: string | null;

  /** The server's annotations (`readOnlyHint` …), for display only: nothing decides on them. */
  @Column({ name: 'remote_annotations', type: 'text', nullable: true })
  remoteAnnotations!: string | null;

  /** In an earlier import, absent from the latest: kept for the operator, never offered. */
  @Typo3SwitchColumn('orphaned', 0)
  orphaned!: boolean;

  @Typo3UnsignedIntColumn('tstamp')
  tstamp!: number;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;
}
