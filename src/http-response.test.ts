import http, { type IncomingHttpHeaders } from 'node:http';
import type { AddressInfo } from 'node:net';
import { SLICE_CHARACTERS, sendText } from './http-response';

/** Serves `text` once through sendText and reads it back as bytes, with the response headers. */
async function roundTrip(text: string): Promise<{ body: Buffer; headers: IncomingHttpHeaders; turns: number }> {
  let turns = 0;
  const server = http.createServer((_request, response) => {
    response.setHeader('content-type', 'application/json');
    response.setHeader('content-length', Buffer.byteLength(text));
    // Counts event-loop turns while the answer is written.
    let writing = true;
    const tick = () => {
      if (!writing) return;
      turns += 1;
      setImmediate(tick);
    };
    setImmediate(tick);
    void sendText(response, text).finally(() => (writing = false));
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const port = (server.address() as AddressInfo).port;
    return await new Promise((resolve, reject) => {
      http
        .get({ host: '127.0.0.1', port, path: '/' }, (response) => {
          const chunks: Buffer[] = [];
          response.on('data', (chunk: Buffer) => chunks.push(chunk));
          response.on('end', () => resolve({ body: Buffer.concat(chunks), headers: response.headers, turns }));
        })
        .once('error', reject);
    });
  } finally {
    await new Promise((resolve) => server.close(resolve));
  }
}

describe('sendText', () => {
  it('writes a short answer at once, with its Content-Length', async () => {
    const { body, headers } = await roundTrip('{"data":{"a":1}}');
    expect(body.toString('utf8')).toBe('{"data":{"a":1}}');
    expect(headers['content-length']).toBe('16');
  });

  it('writes a long answer in slices, byte for byte, never splitting a surrogate pair', async () => {
    // Emoji (two UTF-16 units) straddling every slice boundary, and three-byte characters.
    const unit = `€${'x'.repeat(SLICE_CHARACTERS - 3)}😀`;
    const text = `{"data":"${unit.repeat(6)}é"}`;
    const { body, headers, turns } = await roundTrip(text);
    expect(body.equals(Buffer.from(text, 'utf8'))).toBe(true);
    expect(headers['transfer-encoding']).toBe('chunked');
    expect(headers['content-length']).toBeUndefined();
    // The event loop turned between the slices (seven of them) instead of writing them all at once.
    expect(turns).toBeGreaterThanOrEqual(6);
  });

  it('stops writing when the client is gone', async () => {
    const text = 'y'.repeat(SLICE_CHARACTERS * 200);
    let finished: Promise<void> | null = null;
    const server = http.createServer((_request, response) => {
      finished = sendText(response, text);
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    const port = (server.address() as AddressInfo).port;
    await new Promise<void>((resolve) => {
      const request = http.get({ host: '127.0.0.1', port, path: '/' }, (response) => {
        response.once('data', () => {
          request.destroy();
          resolve();
        });
      });
      request.once('error', () => undefined);
    });
    await finished;
    await new Promise((resolve) => server.close(resolve));
  });
});
