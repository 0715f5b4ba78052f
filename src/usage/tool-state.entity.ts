import { Column, Entity, Index } from 'typeorm';
import { flagTransformer, Typo3IntColumn, Typo3UidColumn, VarcharColumn } from '../db/columns';

/**
 * `tx_nrllm_tool_state`: TYPO3's global on/off switch per tool (the Tools
 * module's toggles). No row: the tool's default.
 */
@Entity({ name: 'tx_nrllm_tool_state' })
@Index('tx_nrllm_tool_state_tool_name', ['toolName'], { unique: true })
export class ToolStateEntity {
  @Typo3UidColumn({ unsigned: false })
  uid!: number;

  @Typo3IntColumn('pid')
  pid!: number;

  @VarcharColumn('tool_name', 190)
  toolName!: string;

  @Column({ name: 'enabled', type: 'smallint', width: 5, unsigned: true, default: 1, transformer: flagTransformer })
  enabled!: boolean;
}

/**
 * `tx_nrllm_tool_group_state`: TYPO3's global on/off switch per tool group.
 * No row: the group is on. A switched-off group also covers tools of that
 * group added later.
 */
@Entity({ name: 'tx_nrllm_tool_group_state' })
@Index('tx_nrllm_tool_group_state_group_name', ['groupName'], { unique: true })
export class ToolGroupStateEntity {
  @Typo3UidColumn({ unsigned: false })
  uid!: number;

  @Typo3IntColumn('pid')
  pid!: number;

  @VarcharColumn('group_name', 190)
  groupName!: string;

  @Column({ name: 'enabled', type: 'smallint', width: 5, unsigned: true, default: 1, transformer: flagTransformer })
  enabled!: boolean;
}
