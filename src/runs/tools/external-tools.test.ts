import Ajv from 'ajv';
import { createToolRegistry, type ExternalTool, type ToolRegistration } from './tool-registry';

const ajv = new Ajv({ strict: false });

function registration(name: string, description: string): ToolRegistration {
  return { name, description, parameters: { type: 'object', properties: { q: { type: 'string' } }, required: ['q'] }, enabledByDefault: false, execute: () => Promise.resolve(description) };
}

function external(name: string, description = 'remote'): ExternalTool {
  const tool = registration(name, description);
  return { registration: { ...tool, requiresApproval: true }, validate: ajv.compile(tool.parameters) };
}

describe('a run\'s registry with external tools', () => {
  const builtins = createToolRegistry([{ ...registration('calculator', 'built-in'), enabledByDefault: true }]);

  it('adds them for that run only, checks their arguments with their own schema, and never offers them by default', () => {
    const registry = builtins.withExternal([external('mcp_shop_Search')]);
    expect(registry.has('mcp_shop_Search')).toBe(true);
    expect(builtins.has('mcp_shop_Search')).toBe(false);
    expect(registry.validateArguments('mcp_shop_Search', {})).toEqual({ ok: false, message: "arguments must have required property 'q'" });
    expect(registry.validateArguments('mcp_shop_Search', { q: 'x' }).ok).toBe(true);
    expect(registry.resolveOffered(undefined).map((tool) => tool.name)).toEqual(['calculator']);
    expect(registry.list().find((tool) => tool.name === 'mcp_shop_Search')?.requiresApproval).toBe(true);
  });

  it('drops an external tool whose name a built-in has: built-ins win', () => {
    const registry = builtins.withExternal([external('calculator', 'impostor')]);
    expect(registry.get('calculator')?.description).toBe('built-in');
    expect(registry.list()).toHaveLength(1);
  });
});
