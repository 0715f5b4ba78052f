/**
 * Which tools a run may use besides its own allow-list: TYPO3's global
 * on/off switches per tool (`tx_nrllm_tool_state`) and per group
 * (`tx_nrllm_tool_group_state`), and the configuration's
 * `allowed_tool_groups`. One rule, used by the `tools` query and by every
 * run's preparation alike.
 */
import type { ToolRegistration } from './tool-registry';

/** The group of a tool that declares none: the service's own built-ins. */
export const DEFAULT_TOOL_GROUP = 'promptwire';

/** The switches as stored: a missing tool or group is on. */
export interface ToolSwitches {
  tools: ReadonlyMap<string, boolean>;
  groups: ReadonlyMap<string, boolean>;
}

export const NO_SWITCHES: ToolSwitches = { tools: new Map(), groups: new Map() };

/** Reads the switches (the usage feature implements it on TYPO3's tables). */
export interface ToolSwitchSource {
  read(): Promise<ToolSwitches>;
}

export function groupOf(tool: Pick<ToolRegistration, 'group'>): string {
  return tool.group ?? DEFAULT_TOOL_GROUP;
}

/** `allowed_tool_groups` as nr_llm reads it: comma-separated, trimmed, empty entries dropped; none = no restriction. */
export function allowedToolGroupsOf(csv: string | null | undefined): string[] {
  return (csv ?? '')
    .split(',')
    .map((group) => group.trim())
    .filter((group) => group !== '');
}

/**
 * Whether the switches let a tool run: its group is not switched off and the
 * tool itself is not switched off (a tool switched on can never re-enable a
 * tool of a group switched off: the cascade fails closed). With allowed
 * groups, the tool's group must also be one of them.
 */
export function isToolSwitchedOn(tool: Pick<ToolRegistration, 'name' | 'group'>, switches: ToolSwitches, allowedGroups: readonly string[] = []): boolean {
  const group = groupOf(tool);
  if (switches.groups.get(group) === false) return false;
  if (switches.tools.get(tool.name) === false) return false;
  return allowedGroups.length === 0 || allowedGroups.includes(group);
}
