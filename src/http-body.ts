import type { IncomingMessage, ServerResponse } from 'node:http';

/** The status readBody reports when the client is gone (nginx's 499: nothing can be answered). */
export const CLIENT_GONE = 499;

export class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

/**
 * Reads a request body up to `limit` bytes. A larger body is refused with 413
 * as soon as it crosses the limit; the stream is paused rather than destroyed,
 * so the client still receives the answer (see `discardRestOfBody`).
 */
export function readBody(request: IncomingMessage, limit: number): Promise<string> {
  const tooLarge = () => new HttpError(413, `Request body is larger than ${limit} bytes; send less, or raise BODY_LIMIT_BYTES`);
  const gone = () => new HttpError(CLIENT_GONE, 'The connection closed before the request body was read');
  if (Number(request.headers['content-length'] ?? 0) > limit) return Promise.reject(tooLarge());
  if (request.destroyed) return Promise.reject(gone());
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    const onData = (chunk: Buffer) => {
      size += chunk.length;
      if (size > limit) {
        cleanup();
        request.pause();
        reject(tooLarge());
        return;
      }
      chunks.push(chunk);
    };
    const onEnd = () => {
      cleanup();
      resolve(Buffer.concat(chunks).toString('utf8'));
    };
    const onError = (error: Error) => {
      cleanup();
      // Node reports a connection cut mid-body as an error ("aborted"): the client is gone, nothing failed here.
      reject(request.destroyed || (error as NodeJS.ErrnoException).code === 'ECONNRESET' ? gone() : error);
    };
    // Without this, a request whose connection closed before its body was read would wait forever.
    const onClose = () => {
      cleanup();
      reject(gone());
    };
    const cleanup = () => {
      request.off('data', onData);
      request.off('end', onEnd);
      request.off('error', onError);
      request.off('close', onClose);
    };
    request.on('data', onData);
    request.on('end', onEnd);
    request.on('error', onError);
    request.on('close', onClose);
  });
}

/**
 * Bytes of a refused body read and thrown away after its 413 was sent. A
 * connection closed while the client is still sending is reset (TCP RST),
 * and a reset makes the client's system drop what it had not read yet — the
 * 413 with it, for a client that writes its whole body before reading. So
 * the rest of the body is read and discarded, and the connection stays open
 * for the next request; beyond this many bytes the connection is cut.
 */
export const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * Call when refusing a request whose body was not read to its end (before
 * the answer is sent): its rest is read and discarded, up to `limit` bytes.
 * A body declared larger than that is not waited for: the connection is
 * closed after the answer.
 */
export function discardRestOfBody(request: IncomingMessage, response: ServerResponse, limit = DISCARD_LIMIT_BYTES): void {
  if (request.complete) return;
  if (Number(request.headers['content-length'] ?? 0) > limit) {
    response.setHeader('connection', 'close');
    response.once('finish', () => request.destroy());
    return;
  }
  let discarded = 0;
  request.removeAllListeners('data');
  request.on('data', (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > limit) request.destroy();
  });
  // A connection cut while discarding is nothing to report.
  request.on('error', () => undefined);
  request.resume();
}
