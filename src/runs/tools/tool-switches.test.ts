import { allowedToolGroupsOf, isToolSwitchedOn, NO_SWITCHES, type ToolSwitches } from './tool-switches';
import { createToolRegistry, type ToolRegistration } from './tool-registry';

function tool(name: string, group?: string): ToolRegistration {
  return { name, description: name, parameters: { type: 'object' }, enabledByDefault: true, ...(group ? { group } : {}), execute: () => Promise.resolve(name) };
}

const switches = (tools: Record<string, boolean>, groups: Record<string, boolean> = {}): ToolSwitches => ({ tools: new Map(Object.entries(tools)), groups: new Map(Object.entries(groups)) });

describe('TYPO3\'s tool switches', () => {
  it('a tool without a row is on; a row with enabled 0 turns it off', () => {
    expect(isToolSwitchedOn(tool('calculator'), NO_SWITCHES)).toBe(true);
    expect(isToolSwitchedOn(tool('calculator'), switches({ calculator: false }))).toBe(false);
    expect(isToolSwitchedOn(tool('calculator'), switches({ other: false }))).toBe(true);
  });

  it('a group switched off covers its tools, and a tool switched on cannot re-enable one (fail closed)', () => {
    expect(isToolSwitchedOn(tool('mcp_shop_search', 'mcp_shop'), switches({ mcp_shop_search: true }, { mcp_shop: false }))).toBe(false);
    expect(isToolSwitchedOn(tool('calculator'), switches({}, { promptwire: false }))).toBe(false);
    expect(isToolSwitchedOn(tool('calculator'), switches({}, { mcp_shop: false }))).toBe(true);
  });

  it('allowed tool groups keep only tools of those groups; none means no restriction', () => {
    expect(isToolSwitchedOn(tool('mcp_shop_search', 'mcp_shop'), NO_SWITCHES, ['mcp_shop'])).toBe(true);
    expect(isToolSwitchedOn(tool('calculator'), NO_SWITCHES, ['mcp_shop'])).toBe(false);
    expect(isToolSwitchedOn(tool('calculator'), NO_SWITCHES, [])).toBe(true);
  });

  it('reads allowed_tool_groups as nr_llm does: comma-separated, trimmed, empty entries dropped', () => {
    expect(allowedToolGroupsOf(' content, ,mcp_shop ,')).toEqual(['content', 'mcp_shop']);
    expect(allowedToolGroupsOf('')).toEqual([]);
    expect(allowedToolGroupsOf(null)).toEqual([]);
  });

  it('a filtered registry offers and knows only the tools switched on', () => {
    const registry = createToolRegistry([tool('one'), tool('two'), tool('mcp_x_y', 'mcp_x')]);
    const on = registry.filtered((candidate) => isToolSwitchedOn(candidate, switches({ two: false })));
    expect(on.list().map((listed) => [listed.name, listed.group])).toEqual([
      ['one', 'promptwire'],
      ['mcp_x_y', 'mcp_x'],
    ]);
    expect(on.has('two')).toBe(false);
    expect(on.resolveOffered(['one', 'two']).map((offered) => offered.name)).toEqual(['one']);
    expect(registry.has('two')).toBe(true);
  });
});
