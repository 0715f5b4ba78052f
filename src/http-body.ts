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
 * so the client still receives the answer (see `answerRefusedBody`).
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
 * Bytes of a refused body read and thrown away after its answer, at most. A
 * connection closed while the client is still sending is reset (TCP RST),
 * and a reset makes the client's system drop what it had not read yet — the
 * answer with it, for a client that writes its whole body before reading —
 * and fails the client's write (EPIPE, ECONNRESET). So the rest of the body
 * is read and discarded before the connection closes (RFC 9112 §9.6: a
 * server reads on after its last answer); beyond this many bytes the
 * connection is cut.
 */
export const DISCARD_LIMIT_BYTES = 64 * 1024 * 1024;
/** Milliseconds the rest of a refused body is read for, at most: a client that sends slowly is cut then. */
export const DISCARD_LIMIT_MS = 5_000;

export interface DiscardLimits {
  bytes: number;
  ms: number;
}

/**
 * Answers `status` with the JSON `body` to a request whose body is refused
 * before it was read to its end (413), and reads the rest of that body.
 *
 * The answer is written at once, whole (with its Content-Length, so a client
 * that reads while it sends has it complete), but the response ends only once
 * the body has been read to its end: only then may Node close the connection
 * (as it does after the answer when the client sent `Connection: close`), so
 * no unread byte turns the close into a reset. A keep-alive connection stays
 * open for the next request. A body declared larger than `limits.bytes`, or
 * one still arriving after that many bytes or `limits.ms`, is not waited for:
 * the connection is closed.
 */
export function answerRefusedBody(request: IncomingMessage, response: ServerResponse, status: number, body: string, limits: DiscardLimits = { bytes: DISCARD_LIMIT_BYTES, ms: DISCARD_LIMIT_MS }): void {
  const text = Buffer.from(body, 'utf8');
  response.statusCode = status;
  response.setHeader('content-type', 'application/json; charset=utf-8');
  response.setHeader('content-length', text.length);
  if (request.complete) {
    response.end(text);
    return;
  }
  if (Number(request.headers['content-length'] ?? 0) > limits.bytes) {
    response.setHeader('connection', 'close');
    response.once('finish', () => request.destroy());
    response.end(text);
    return;
  }
  response.write(text);
  let discarded = 0;
  const settle = (cut: boolean) => {
    clearTimeout(timer);
    request.off('data', onData);
    request.off('end', onEnd);
    request.off('close', onClose);
    if (cut) response.destroy();
    else response.end();
  };
  const onData = (chunk: Buffer) => {
    discarded += chunk.length;
    if (discarded > limits.bytes) settle(true);
  };
  const onEnd = () => settle(false);
  // The client went away first (after reading the answer, or not): nothing more to wait for.
  const onClose = () => settle(true);
  const timer = setTimeout(() => settle(true), limits.ms);
  request.removeAllListeners('data');
  request.on('data', onData);
  request.once('end', onEnd);
  request.once('close', onClose);
  // A connection cut while discarding is nothing to report.
  request.on('error', () => undefined);
  request.resume();
}
