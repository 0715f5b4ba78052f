/**
 * Writing a large answer without holding the event loop.
 *
 * `response.end(text)` encodes the whole text to UTF-8 and hands it to the
 * socket in one synchronous step: for an answer of several megabytes (a page
 * of configurations with their 50 kB effective prompts is 5 MB) that step
 * took 50–150 ms, during which no other client was served. An answer longer
 * than `SLICE_CHARACTERS` is therefore written in slices, one per event-loop
 * turn (and once the socket drained, when it is full), with chunked transfer
 * encoding; a short one is written as before, with its Content-Length.
 */
import type { ServerResponse } from 'node:http';

/** UTF-16 code units per slice: some 64–192 kB of UTF-8. */
export const SLICE_CHARACTERS = 64 * 1024;

const nextTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** Writes `text` as the whole body and ends the response; resolves once it is handed to the socket (or the client is gone). */
export async function sendText(response: ServerResponse, text: string): Promise<void> {
  if (text.length <= SLICE_CHARACTERS) {
    response.end(text);
    return;
  }
  response.removeHeader('content-length');
  let from = 0;
  while (from < text.length) {
    if (response.destroyed) return;
    let to = Math.min(from + SLICE_CHARACTERS, text.length);
    // A surrogate pair is never split between two slices (each slice is encoded on its own).
    const last = text.charCodeAt(to - 1);
    if (to < text.length && last >= 0xd800 && last <= 0xdbff) to -= 1;
    const roomLeft = response.write(text.slice(from, to));
    from = to;
    if (from >= text.length) break;
    // A full socket is waited for; either way the next slice waits for the next turn (a
    // drained socket reports so at once on loopback, without the loop turning).
    if (!roomLeft) await drained(response);
    await nextTurn();
  }
  response.end();
}

/** Resolves once the response's socket has room again (`drain`) or is gone (`close`). */
export function drained(response: ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      response.off('drain', done);
      response.off('close', done);
      resolve();
    };
    response.once('drain', done);
    response.once('close', done);
  });
}
