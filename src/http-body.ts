import type { IncomingMessage } from 'node:http';

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
 * so the client still receives the answer (the connection closes after it).
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
      reject(error);
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
