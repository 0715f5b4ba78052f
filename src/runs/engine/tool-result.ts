/**
 * Bounding a tool result before it goes back to the model (behaviour.md §8).
 *
 * One rule, one place: a result is made valid UTF-8 (a lone UTF-16 surrogate,
 * which has no UTF-8 form, becomes U+FFFD) and is at most
 * `TOOL_RESULT_MAX_BYTES` UTF-8 bytes **including** the truncation marker. A
 * longer result keeps its head, cut on a character boundary, and ends with
 * `TOOL_RESULT_TRUNCATION_MARKER`; a result of exactly the cap is untouched.
 * Counting the marker inside the cap means what the model receives, and what
 * the trace stores, is never larger than the cap: an ASCII result is cut to
 * exactly 50000 bytes, one cut before a multi-byte character to a few less.
 */

export const TOOL_RESULT_MAX_BYTES = 50000;

export const TOOL_RESULT_TRUNCATION_MARKER = `\n…[tool result truncated at ${TOOL_RESULT_MAX_BYTES} bytes]`;

const MARKER_BYTES = Buffer.byteLength(TOOL_RESULT_TRUNCATION_MARKER, 'utf8');

/** Whether `byte` continues a multi-byte UTF-8 sequence (`10xxxxxx`). */
function isContinuationByte(byte: number): boolean {
  return (byte & 0xc0) === 0x80;
}

/** The result as the model receives it: valid UTF-8, capped with the marker. */
export function boundToolResult(result: string): string {
  // Encoding replaces lone surrogates with U+FFFD; decoding gives the valid string.
  const bytes = Buffer.from(result, 'utf8');
  if (bytes.length <= TOOL_RESULT_MAX_BYTES) {
    return bytes.toString('utf8');
  }
  let cut = TOOL_RESULT_MAX_BYTES - MARKER_BYTES;
  // Step back to the first byte of the character the cut would split.
  while (cut > 0 && isContinuationByte(bytes[cut] as number)) {
    cut -= 1;
  }
  return bytes.subarray(0, cut).toString('utf8') + TOOL_RESULT_TRUNCATION_MARKER;
}
