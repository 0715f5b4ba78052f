import { TOOL_RESULT_MAX_BYTES, TOOL_RESULT_TRUNCATION_MARKER, boundToolResult } from './tool-result';

const bytes = (text: string): number => Buffer.byteLength(text, 'utf8');

/** Compares long strings without printing 50 KB when they differ. */
function expectSame(actual: string, expected: string): void {
  expect({ length: actual.length, head: actual.slice(0, 20), tail: actual.slice(-60) }).toEqual({
    length: expected.length,
    head: expected.slice(0, 20),
    tail: expected.slice(-60),
  });
  expect(actual === expected).toBe(true);
}
const markerBytes = bytes(TOOL_RESULT_TRUNCATION_MARKER);

describe('boundToolResult', () => {
  it('uses the exact marker of behaviour.md', () => {
    expect(TOOL_RESULT_TRUNCATION_MARKER).toBe('\n…[tool result truncated at 50000 bytes]');
    expect(TOOL_RESULT_MAX_BYTES).toBe(50000);
  });

  it('leaves a short result untouched', () => {
    expect(boundToolResult('42')).toBe('42');
    expect(boundToolResult('')).toBe('');
  });

  it('leaves a result of exactly 50000 bytes untouched', () => {
    const exact = 'x'.repeat(50000);
    expectSame(boundToolResult(exact), exact);
  });

  it('leaves a multi-byte result of exactly 50000 bytes untouched', () => {
    const exact = '€'.repeat(16666) + 'xx';
    expect(bytes(exact)).toBe(50000);
    expectSame(boundToolResult(exact), exact);
  });

  it('cuts a longer result to 50000 bytes including the marker, keeping the head', () => {
    const result = boundToolResult('START' + 'x'.repeat(60000));
    expect(bytes(result)).toBe(50000);
    expect(result.startsWith('START')).toBe(true);
    expect(result.endsWith('\n…[tool result truncated at 50000 bytes]')).toBe(true);
  });

  it('cuts one byte over the cap', () => {
    const result = boundToolResult('y'.repeat(50001));
    expect(bytes(result)).toBe(50000);
    expectSame(result, 'y'.repeat(50000 - markerBytes) + TOOL_RESULT_TRUNCATION_MARKER);
  });

  it('cuts before a multi-byte character that straddles the cut, never inside it', () => {
    const keep = 50000 - markerBytes;
    // "€" (3 bytes) occupies bytes keep−1 … keep+1: the cut would split it.
    const input = 'a'.repeat(keep - 1) + '€' + 'b'.repeat(100);
    const result = boundToolResult(input);
    expectSame(result, 'a'.repeat(keep - 1) + TOOL_RESULT_TRUNCATION_MARKER);
    expect(bytes(result)).toBe(49999);
    expect(result).not.toContain('\uFFFD');
  });

  it('keeps a multi-byte character that ends exactly at the cut', () => {
    const keep = 50000 - markerBytes;
    const input = 'a'.repeat(keep - 3) + '€' + 'b'.repeat(100);
    expectSame(boundToolResult(input), 'a'.repeat(keep - 3) + '€' + TOOL_RESULT_TRUNCATION_MARKER);
  });

  it('cuts before a four-byte character (a surrogate pair) at the cut', () => {
    const keep = 50000 - markerBytes;
    const input = 'a'.repeat(keep - 2) + '😀' + 'b'.repeat(100);
    const result = boundToolResult(input);
    expectSame(result, 'a'.repeat(keep - 2) + TOOL_RESULT_TRUNCATION_MARKER);
    expect(result).not.toContain('\uFFFD');
  });

  it('replaces a lone surrogate, which has no UTF-8 form, with U+FFFD', () => {
    expect(boundToolResult('a\uD800b')).toBe('a\uFFFDb');
    expect(boundToolResult('\uDC00')).toBe('\uFFFD');
  });
});
