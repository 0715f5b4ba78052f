import { createBuiltinToolRegistry, createBuiltinTools } from './builtin-tools';
import { createInMemorySnippetSource } from '../../../test/support/in-memory-snippet-source';
import { ToolRegistry, createToolRegistry, toToolDefinition, type ToolRegistration } from './tool-registry';

function tool(name: string, enabledByDefault = true, parameters: Record<string, unknown> = { type: 'object' }): ToolRegistration {
  return { name, description: `The ${name} tool.`, parameters, enabledByDefault, execute: () => Promise.resolve(name) };
}

describe('ToolRegistry', () => {
  it('lists registered tools in registration order, without their code', () => {
    const registry = createToolRegistry([tool('b'), tool('a', false)]);
    expect(registry.list()).toEqual([
      { name: 'b', description: 'The b tool.', parameters: { type: 'object' }, enabledByDefault: true, requiresApproval: false, group: 'promptwire' },
      { name: 'a', description: 'The a tool.', parameters: { type: 'object' }, enabledByDefault: false, requiresApproval: false, group: 'promptwire' },
    ]);
    expect(registry.has('a')).toBe(true);
    expect(registry.get('zzz')).toBeUndefined();
  });

  it('refuses a duplicate name, a malformed name and a schema that does not compile', () => {
    const registry = new ToolRegistry();
    registry.register(tool('echo'));
    expect(() => registry.register(tool('echo'))).toThrow('already registered');
    expect(() => registry.register(tool('Echo Tool'))).toThrow('must be 1 to 64 characters');
    expect(() => registry.register(tool('bad', true, { type: 'object', properties: { a: { type: 'nonsense' } } }))).toThrow();
  });

  describe('resolveOffered', () => {
    const registry = createToolRegistry([tool('one'), tool('two', false), tool('three')]);
    const names = (tools: ToolRegistration[]): string[] => tools.map((offered) => offered.name);

    it('offers the tools enabled by default when the allow-list is absent', () => {
      expect(names(registry.resolveOffered(undefined))).toEqual(['one', 'three']);
      expect(names(registry.resolveOffered(null))).toEqual(['one', 'three']);
    });

    it('offers nothing for an empty allow-list', () => {
      expect(registry.resolveOffered([])).toEqual([]);
    });

    it('offers exactly the listed tools, enabled by default or not, in registration order', () => {
      expect(names(registry.resolveOffered(['three', 'two']))).toEqual(['two', 'three']);
      expect(names(registry.resolveOffered(['two', 'two', 'ghost']))).toEqual(['two']);
    });
  });

  it('reports the unknown names of an allow-list, each once', () => {
    const registry = createToolRegistry([tool('one')]);
    expect(registry.unknownNames(['one', 'ghost', 'phantom', 'ghost'])).toEqual(['ghost', 'phantom']);
    expect(registry.unknownNames(undefined)).toEqual([]);
    expect(registry.unknownNames([])).toEqual([]);
  });

  describe('validateArguments', () => {
    const registry = createToolRegistry([
      tool('calc', true, {
        type: 'object',
        properties: { expression: { type: 'string' } },
        required: ['expression'],
        additionalProperties: false,
      }),
    ]);

    it('accepts arguments the schema accepts', () => {
      expect(registry.validateArguments('calc', { expression: '1+1' })).toEqual({ ok: true, args: { expression: '1+1' } });
    });

    it('says what is wrong', () => {
      expect(registry.validateArguments('calc', {})).toEqual({
        ok: false,
        message: "arguments must have required property 'expression'",
      });
      expect(registry.validateArguments('calc', { expression: 3 })).toEqual({
        ok: false,
        message: 'arguments/expression must be string',
      });
      expect(registry.validateArguments('calc', { expression: '1', extra: true })).toEqual({
        ok: false,
        message: 'arguments must NOT have additional properties',
      });
    });

    it('requires a JSON object', () => {
      expect(registry.validateArguments('calc', [1])).toEqual({ ok: false, message: 'arguments must be a JSON object' });
      expect(registry.validateArguments('calc', 'x')).toEqual({ ok: false, message: 'arguments must be a JSON object' });
      expect(registry.validateArguments('calc', null)).toEqual({ ok: false, message: 'arguments must be a JSON object' });
    });
  });

  it('gives the provider definition of a tool', () => {
    expect(toToolDefinition(tool('echo'))).toEqual({
      name: 'echo',
      description: 'The echo tool.',
      parameters: { type: 'object' },
    });
  });
});

describe('built-in tools', () => {
  it('are calculator, search_snippets and get_snippet, all enabled by default', () => {
    const source = createInMemorySnippetSource([]);
    expect(createBuiltinTools(source).map((builtin) => [builtin.name, builtin.enabledByDefault])).toEqual([
      ['calculator', true],
      ['search_snippets', true],
      ['get_snippet', true],
    ]);
    const registry = createBuiltinToolRegistry(source);
    expect(registry.resolveOffered(undefined).map((offered) => offered.name)).toEqual([
      'calculator',
      'search_snippets',
      'get_snippet',
    ]);
  });
});
