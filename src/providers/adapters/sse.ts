/**
 * Server-sent events from raw body chunks. Chunks may split anywhere — inside
 * a multi-byte UTF-8 character, inside a line, between `\r` and `\n` — so
 * bytes go through a streaming TextDecoder and lines through
 * `eventsource-parser`, which keeps partial lines across feeds.
 */
import { createParser, type EventSourceMessage } from 'eventsource-parser';

/** An SSE stream that buffers more than this without finishing an event is refused (a broken or hostile server). */
const MAX_EVENT_BUFFER_CHARS = 16 * 1024 * 1024;

export type SseEvent = EventSourceMessage;

export class SseFramingError extends Error {}

export async function* decodeSse(chunks: AsyncIterable<Uint8Array>): AsyncGenerator<SseEvent, void, undefined> {
  const decoder = new TextDecoder('utf-8');
  let pending: SseEvent[] = [];
  let failure: Error | null = null;
  const parser = createParser({
    maxBufferSize: MAX_EVENT_BUFFER_CHARS,
    onEvent: (event) => {
      pending.push(event);
    },
    onError: (error) => {
      // Unknown fields and bad `retry:` values are ignorable per the SSE spec; only the size guard is fatal.
      if (error.type === 'max-buffer-size-exceeded') failure = new SseFramingError(error.message);
    },
  });

  const drain = function* (): Generator<SseEvent, void, undefined> {
    if (failure !== null) throw failure;
    const ready = pending;
    pending = [];
    yield* ready;
  };

  for await (const chunk of chunks) {
    parser.feed(decoder.decode(chunk, { stream: true }));
    yield* drain();
  }
  // Flush a trailing partial character, then end the last event even if the server omitted the blank line.
  parser.feed(`${decoder.decode()}\n\n`);
  yield* drain();
}
