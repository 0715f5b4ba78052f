/**
 * The pure pieces under the adapters: stream framing, think-tag splitting,
 * tool-call and usage normalisation, credentials.
 */
import { isVaultIdentifier } from '../../src/providers/adapters/credentials';
import { decodeNdjsonLines } from '../../src/providers/adapters/ndjson';
import { decodeSse } from '../../src/providers/adapters/sse';
import { ThinkTagSplitter, splitThinkTags } from '../../src/providers/adapters/think-tags';
import { normaliseToolCall, normaliseToolCalls, serialiseArguments, uniqueToolCallIds } from '../../src/providers/adapters/tool-calls';
import { buildUsage } from '../../src/providers/adapters/usage';

async function* chunksOf(bytes: Uint8Array, size: number): AsyncGenerator<Uint8Array> {
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

async function collect<T>(items: AsyncIterable<T>): Promise<T[]> {
  const out: T[] = [];
  for await (const item of items) out.push(item);
  return out;
}

const encode = (text: string): Uint8Array => new TextEncoder().encode(text);

describe('decodeSse', () => {
  const stream = [
    ': OPENROUTER PROCESSING',
    '',
    'event: content_block_delta',
    'data: {"text":"Grüße 👋"}',
    '',
    'data: {"a":1}\r\n\r\ndata: {"b":"ü"}\r\n\r\nretry: 1000',
    '',
    'data: line one',
    'data: line two',
    '',
  ].join('\n');

  it.each([1, 2, 3, 4, 5, 6, 7, 64])('gives the same events when cut every %i bytes', async (size) => {
    const events = await collect(decodeSse(chunksOf(encode(stream), size)));
    expect(events.map(({ event, data }) => ({ event, data }))).toEqual([
      { event: 'content_block_delta', data: '{"text":"Grüße 👋"}' },
      { event: undefined, data: '{"a":1}' },
      { event: undefined, data: '{"b":"ü"}' },
      { event: undefined, data: 'line one\nline two' },
    ]);
  });

  it('ends the last event even without the closing blank line', async () => {
    const events = await collect(decodeSse(chunksOf(encode('data: {"x":1}\n\ndata: {"y":2}'), 3)));
    expect(events.map((event) => event.data)).toEqual(['{"x":1}', '{"y":2}']);
  });

  it('decodes a character whose bytes arrive in separate chunks', async () => {
    const bytes = encode('data: 🤔\n\n');
    // Split inside the 4-byte emoji: 'data: ' is 6 bytes, the emoji 7..10.
    const parts = [bytes.subarray(0, 7), bytes.subarray(7, 9), bytes.subarray(9)];
    async function* source() {
      for (const part of parts) yield part;
    }
    const events = await collect(decodeSse(source()));
    expect(events.map((event) => event.data)).toEqual(['🤔']);
  });
});

describe('decodeNdjsonLines', () => {
  const text = '{"a":"Köln"}\n\n{"b":"👋"}\r\n{"c":3}';

  it.each([1, 2, 3, 4, 5, 6, 7])('gives the same lines when cut every %i bytes, the last one without a newline', async (size) => {
    expect(await collect(decodeNdjsonLines(chunksOf(encode(text), size)))).toEqual(['{"a":"Köln"}', '{"b":"👋"}', '{"c":3}']);
  });
});

describe('think tags', () => {
  it('moves <think> text to thinking, whatever the case, and trims around it', () => {
    expect(splitThinkTags('<THINK>plan</Think>\n\nanswer')).toEqual({ content: 'answer', thinking: 'plan' });
  });

  it('leaves content without tags untouched', () => {
    expect(splitThinkTags('  a < b and <thin ice>  ')).toEqual({ content: '  a < b and <thin ice>  ', thinking: null });
  });

  it('keeps everything after an unclosed <think> as thinking', () => {
    expect(splitThinkTags('<think>ran out of tok')).toEqual({ content: '', thinking: 'ran out of tok' });
  });

  it('joins several think blocks with a blank line', () => {
    expect(splitThinkTags('<think>one</think>A<think>two</think>B')).toEqual({ content: 'AB', thinking: 'one\n\ntwo' });
  });

  it('splits the same at every cut point of a stream', () => {
    const text = 'Vorher <think>Denke über Köln nach 🤔</THINK>\n\nAntwort: Ja. <thi';
    const whole = splitThinkTags(text);
    for (let cut = 0; cut <= text.length; cut++) {
      const splitter = new ThinkTagSplitter();
      const segments = [...splitter.push(text.slice(0, cut)), ...splitter.push(text.slice(cut)), ...splitter.end()];
      expect(splitter.result()).toEqual(whole);
      expect(segments.filter((s) => s.kind === 'thinking').map((s) => s.text).join('')).toBe('Denke über Köln nach 🤔');
    }
    // A trailing partial tag that never completes is ordinary text.
    expect(whole).toEqual({ content: 'Vorher \n\nAntwort: Ja. <thi', thinking: 'Denke über Köln nach 🤔' });
  });

  it('does not misplace a tag after text whose lower case is longer', () => {
    // 'İ' lower-cases to two code units; a toLowerCase-based search would be off by one.
    expect(splitThinkTags('İİ<think>x</think>y')).toEqual({ content: 'İİy', thinking: 'x' });
  });
});

describe('tool calls', () => {
  const context = { provider: 'p', logger: { warn: jest.fn() }, newToolCallId: () => 'call_new' };

  it.each([
    [undefined, '{}'],
    [null, '{}'],
    ['', '{}'],
    ['   ', '{}'],
    ['{"a": 1}', '{"a": 1}'],
    [{ a: 'ü' }, '{"a":"ü"}'],
    ['{"a": 1', null],
    ['[1, 2]', null],
    ['"text"', null],
    [42, null],
    [[1], null],
  ])('arguments %p serialise to %p', (input, expected) => {
    expect(serialiseArguments(input)).toBe(expected);
  });

  it('skips a call without a name and logs why, without the arguments', () => {
    const warn = jest.fn();
    expect(normaliseToolCall({ id: 'c1', name: '  ', arguments: '{"secret":"x"}' }, { ...context, logger: { warn } })).toBeNull();
    expect(warn).toHaveBeenCalledWith({ provider: 'p', toolCallId: 'c1', toolName: null }, 'skipped a tool call without a function name');
    expect(JSON.stringify(warn.mock.calls)).not.toContain('secret');
  });

  it('keeps every call of an answer that repeats an id: later ones get the first free `<id>#n`, the provider\'s id in wireId', () => {
    const call = (id: string, args = '{}') => ({ id, type: 'function' as const, function: { name: 'f', arguments: args } });
    const calls = [call('a', '{"n":1}'), call('a', '{"n":2}'), call('a#2'), call('a', '{"n":3}'), call('b')];
    expect(uniqueToolCallIds(calls)).toEqual([
      call('a', '{"n":1}'),
      { ...call('a#3', '{"n":2}'), wireId: 'a' },
      call('a#2'),
      { ...call('a#4', '{"n":3}'), wireId: 'a' },
      call('b'),
    ]);
    // The same answer read again gives the same ids; the calls given are not changed.
    expect(uniqueToolCallIds(calls)).toEqual(uniqueToolCallIds(calls));
    expect(calls[1]!.id).toBe('a');
    expect(normaliseToolCalls([{ id: 'x', name: 'f' }, { id: 'x', name: 'g' }], context).map((c) => [c.id, c.wireId])).toEqual([
      ['x', undefined],
      ['x#2', 'x'],
    ]);
  });

  it('invents an id when the provider sent none', () => {
    expect(normaliseToolCall({ name: 'f', arguments: {} }, context)).toEqual({
      id: 'call_new',
      type: 'function',
      function: { name: 'f', arguments: '{}' },
    });
  });
});

describe('usage', () => {
  it('clamps negative and odd counts to whole numbers ≥ 0 and totals prompt + completion', () => {
    expect(buildUsage({ prompt: -5, completion: 10.4, cachedInput: -1, reasoning: Number.NaN })).toEqual({
      promptTokens: 0,
      completionTokens: 10,
      totalTokens: 10,
      cachedInputTokens: 0,
    });
  });
});

describe('vault identifiers', () => {
  it.each([
    ['01890a5d-ac96-774b-bcce-b302099a8057', true],
    ['%vault(openai_key)%', true],
    ['sk-proj-abc123', false],
    // A v4 UUID is not what nr-vault writes; keys of some providers look like that.
    ['9b2c3f4e-1a2b-4c3d-8e9f-0a1b2c3d4e5f', false],
    ['Abc123def456', false],
  ])('%s → %p', (value, expected) => {
    expect(isVaultIdentifier(value)).toBe(expected);
  });
});
