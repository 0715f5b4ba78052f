/**
 * The text a model reads from an MCP `tools/call` result: the text items of
 * its content in order, one per line; other items (images, audio, resources)
 * are not sent to the model, and a note says how many were left out. A result
 * with no content but structured content answers that as JSON.
 */

export interface RemoteCallResult {
  content?: unknown;
  structuredContent?: unknown;
  isError?: unknown;
}

export function resultText(result: RemoteCallResult): string {
  const items = Array.isArray(result.content) ? (result.content as unknown[]) : [];
  const texts: string[] = [];
  let omitted = 0;
  for (const item of items) {
    if (typeof item === 'object' && item !== null && (item as { type?: unknown }).type === 'text' && typeof (item as { text?: unknown }).text === 'string') {
      texts.push((item as { text: string }).text);
    } else {
      omitted += 1;
    }
  }
  if (texts.length === 0 && omitted === 0 && result.structuredContent !== undefined) {
    return JSON.stringify(result.structuredContent);
  }
  const note = omitted > 0 ? `[${omitted} non-text content item(s) omitted]` : '';
  return [...texts, ...(note ? [note] : [])].join('\n');
}
