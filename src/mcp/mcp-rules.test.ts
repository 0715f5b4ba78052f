import { resultText } from './call-result';
import { budgetExhaustedMessage, RemoteCallBudget } from './remote-call-budget';
import { normaliseInputSchema } from './schema-normaliser';
import { localToolName } from './tool-names';

describe('MCP tool names', () => {
  it('are mcp_<identifier>_<remote>, at most 64 characters of a-zA-Z0-9_-; others are not rewritten', () => {
    expect(localToolName('shop', 'search')).toBe('mcp_shop_search');
    expect(localToolName('shop', 'Get-Item')).toBe('mcp_shop_Get-Item');
    expect(localToolName('shop', 'has space')).toBeNull();
    expect(localToolName('shop', 'dotted.name')).toBeNull();
    expect(localToolName('shop', 'x'.repeat(55))).toBe(`mcp_shop_${'x'.repeat(55)}`);
    expect(localToolName('shop', 'x'.repeat(56))).toBeNull();
    expect(localToolName('shop', 'ends\n')).toBeNull();
  });
});

describe('argument schemas from a server', () => {
  it('keep only the keys providers understand', () => {
    expect(normaliseInputSchema({ type: 'object', title: 'T', $schema: 'x', properties: { q: { type: 'string', format: 'uri' } }, required: ['q'] })).toEqual({
      ok: true,
      schema: { type: 'object', properties: { q: { type: 'string', format: 'uri' } }, required: ['q'] },
    });
  });

  it('are refused, with a reason, rather than widened or repaired', () => {
    expect(normaliseInputSchema(undefined)).toEqual({ ok: false, reason: 'the server advertised no parameter schema' });
    expect(normaliseInputSchema({ type: ['object', 'null'] })).toEqual({ ok: false, reason: 'its top-level type is not "object"' });
    expect(normaliseInputSchema({ type: 'object', properties: { a: { $ref: '#/x' } } })).toMatchObject({ ok: false, reason: expect.stringContaining('"$ref"') });
    expect(normaliseInputSchema({ type: 'object', properties: { a: 'string' } })).toEqual({ ok: false, reason: 'its properties or required list are not well formed' });
    expect(normaliseInputSchema({ type: 'object', required: 'a' })).toEqual({ ok: false, reason: 'its properties or required list are not well formed' });
    let deep: Record<string, unknown> = { type: 'string' };
    for (let level = 0; level < 7; level += 1) deep = { type: 'object', properties: { n: deep } };
    expect(normaliseInputSchema(deep)).toEqual({ ok: false, reason: 'it nests deeper than 12 levels' });
    expect(normaliseInputSchema({ type: 'object', description: 'd'.repeat(17_000) })).toEqual({ ok: false, reason: 'it exceeds 16384 bytes once stored' });
  });

  it('drop a refused keyword that sits in a key that is not kept anyway', () => {
    expect(normaliseInputSchema({ type: 'object', $defs: { a: {} }, properties: {} })).toEqual({ ok: true, schema: { type: 'object', properties: {} } });
  });
});

describe('the text of a call result', () => {
  it('joins text items and notes what it left out', () => {
    expect(resultText({ content: [{ type: 'text', text: 'a' }, { type: 'image', data: '', mimeType: 'image/png' }, { type: 'text', text: 'b' }] })).toBe('a\nb\n[1 non-text content item(s) omitted]');
    expect(resultText({ content: [], structuredContent: { n: 1 } })).toBe('{"n":1}');
    expect(resultText({})).toBe('');
  });
});

describe('the remote call budget', () => {
  it('allows 20 calls and then refuses without charging', () => {
    const budget = new RemoteCallBudget();
    for (let call = 0; call < 20; call += 1) expect(budget.tryConsume()).toBe(true);
    expect(budget.tryConsume()).toBe(false);
    expect(budget.callsMade).toBe(20);
    expect(budgetExhaustedMessage(20, 'mcp_shop_x')).toBe('Error: this run has used its budget of 20 calls to external tools; "mcp_shop_x" was not called.');
  });
});
