/**
 * The names of MCP servers and of their imported tools, as nr_llm forms
 * them: a server identifier is `^[a-z0-9_]{1,32}$`; a remote tool `search`
 * of server `shop` becomes `mcp_shop_search`. A name that the
 * function-calling APIs would refuse (more than 64 characters, or a
 * character outside `a-zA-Z0-9_-`) is not rewritten but skipped: a lossy
 * rewrite could map two remote tools onto one name.
 */

export const SERVER_IDENTIFIER_PATTERN = /^[a-z0-9_]{1,32}$/;

const LOCAL_NAME_PATTERN = /^[a-zA-Z0-9_-]{1,64}$/;

/** The local tool name, or null when the two parts cannot form one. */
export function localToolName(serverIdentifier: string, remoteName: string): string | null {
  const candidate = `mcp_${serverIdentifier}_${remoteName}`;
  return LOCAL_NAME_PATTERN.test(candidate) ? candidate : null;
}

/** Whether a name is one an imported MCP tool could have (`mcp_…`). */
export function isMcpToolName(name: string): boolean {
  return name.startsWith('mcp_') && LOCAL_NAME_PATTERN.test(name);
}

/** The group of a server's tools, as nr_llm's McpTool names it: `mcp_<identifier>` (TYPO3's group switches and `allowed_tool_groups` use it). */
export function mcpToolGroup(serverIdentifier: string): string {
  return `mcp_${serverIdentifier}`;
}
