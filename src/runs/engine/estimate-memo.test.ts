import type { ChatMessage, ToolDefinition } from '../../providers/adapters/types';
import { estimateTokens } from './context-window';
import { ARGUMENT_ENTRIES, ARGUMENT_MAX_CHARS, rememberedArgumentBytes, rememberedByMessage, rememberedSchemaBytes } from './estimate-memo';

describe('estimate-memo', () => {
  it('measures an argument text once, and again only after the memo was full and forgotten', () => {
    const measured: string[] = [];
    const measure = (text: string) => {
      measured.push(text);
      return text.length * 2;
    };
    const text = `{"unique":"${Math.random()}"}`;
    expect(rememberedArgumentBytes(text, measure)).toBe(text.length * 2);
    expect(rememberedArgumentBytes(text, measure)).toBe(text.length * 2);
    expect(measured).toEqual([text]);
    // Filling the memo forgets everything at once; the text is measured anew, with the same result.
    for (let i = 0; i < ARGUMENT_ENTRIES; i += 1) rememberedArgumentBytes(`{"filler":${i},"r":"${text}"}`, measure);
    expect(rememberedArgumentBytes(text, measure)).toBe(text.length * 2);
    expect(measured.filter((t) => t === text)).toHaveLength(2);
  });

  it('never keeps a text longer than the limit', () => {
    let calls = 0;
    const long = 'x'.repeat(ARGUMENT_MAX_CHARS + 1);
    const measure = () => (calls += 1);
    rememberedArgumentBytes(long, measure);
    rememberedArgumentBytes(long, measure);
    expect(calls).toBe(2);
  });

  it('measures a tool definition once, a null (unencodable) result included', () => {
    let calls = 0;
    const tool: ToolDefinition = { name: 'x', description: '', parameters: {} };
    const measure = () => {
      calls += 1;
      return null;
    };
    expect(rememberedSchemaBytes(tool, measure)).toBeNull();
    expect(rememberedSchemaBytes(tool, measure)).toBeNull();
    expect(calls).toBe(1);
    // Another definition object with the same content is measured on its own.
    expect(rememberedSchemaBytes({ ...tool }, () => 7)).toBe(7);
  });

  it('measures a message object once; an equal message made anew is measured on its own, with the same estimate', () => {
    let calls = 0;
    const message: ChatMessage = { role: 'user', content: 'héllo' };
    const measure = (m: ChatMessage) => {
      calls += 1;
      return { bytes: Buffer.byteLength(m.content ?? '') };
    };
    const remembered = rememberedByMessage(measure);
    expect(remembered(message)).toEqual({ bytes: 6 });
    expect(remembered(message)).toBe(remembered(message));
    expect(calls).toBe(1);
    expect(remembered({ ...message })).toEqual({ bytes: 6 });
    expect(calls).toBe(2);
    // The estimate's own memo is another: the same message objects, measured before or not, give the same estimate.
    const messages: ChatMessage[] = [{ role: 'system', content: 'Be brief.' }, message, { role: 'assistant', content: 'ok' }];
    const first = estimateTokens(messages);
    expect(estimateTokens(messages)).toBe(first);
    expect(estimateTokens(messages.map((m) => ({ ...m }) as ChatMessage))).toBe(first);
  });
});
