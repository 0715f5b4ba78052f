/**
 * Newline-delimited JSON (Ollama's stream) from raw body chunks. Chunks may
 * split anywhere, including inside a multi-byte UTF-8 character or a line;
 * yields each complete non-blank line as text, the last one even without a
 * final newline.
 */

/** A single line longer than this is refused rather than buffered forever. */
const MAX_LINE_CHARS = 16 * 1024 * 1024;

export class NdjsonFramingError extends Error {}

export async function* decodeNdjsonLines(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<string, void, undefined> {
  const decoder = new TextDecoder('utf-8');
  let buffer = '';
  for await (const chunk of chunks) {
    buffer += decoder.decode(chunk, { stream: true });
    let start = 0;
    for (let newline = buffer.indexOf('\n'); newline !== -1; newline = buffer.indexOf('\n', start)) {
      const line = buffer.slice(start, newline).trim();
      start = newline + 1;
      if (line !== '') yield line;
    }
    buffer = buffer.slice(start);
    if (buffer.length > MAX_LINE_CHARS) throw new NdjsonFramingError(`line longer than ${MAX_LINE_CHARS} characters`);
  }
  const last = (buffer + decoder.decode()).trim();
  if (last !== '') yield last;
}
