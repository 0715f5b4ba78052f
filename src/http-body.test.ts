import http from 'node:http';
import net, { type AddressInfo } from 'node:net';
import { answerRefusedBody, HttpError, readBody } from './http-body';

const LIMIT = 1024;

/** A server that reads bodies up to LIMIT bytes and refuses larger ones through answerRefusedBody with these bounds. */
async function refusingServer(limits: { bytes: number; ms: number }): Promise<{ port: number; close: () => Promise<void> }> {
  const server = http.createServer((request, response) => {
    readBody(request, LIMIT).then(
      (text) => response.end(`read ${text.length}`),
      (error: unknown) => {
        if (error instanceof HttpError) answerRefusedBody(request, response, error.status, JSON.stringify({ error: error.message }), limits);
      },
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => {
      server.closeAllConnections();
      return new Promise((resolve) => server.close(() => resolve()));
    },
  };
}

/** A raw connection that collects what the server sends and says when the server closed it. */
function connect(port: number): { socket: net.Socket; received: () => string; closed: Promise<void> } {
  const socket = net.connect(port, '127.0.0.1');
  let received = '';
  socket.on('data', (chunk: Buffer) => (received += chunk.toString('latin1')));
  socket.on('error', () => undefined);
  const closed = new Promise<void>((resolve) => socket.once('close', () => resolve()));
  return { socket, received: () => received, closed };
}

const head = (length: number) => `POST / HTTP/1.1\r\nhost: x\r\ncontent-length: ${length}\r\n\r\n`;
const until = async (check: () => boolean) => {
  while (!check()) await new Promise((resolve) => setTimeout(resolve, 5));
};

describe('answerRefusedBody', () => {
  it('answers at once, reads the rest of the body, and keeps the connection for the next request', async () => {
    const server = await refusingServer({ bytes: 64 * 1024 * 1024, ms: 10_000 });
    try {
      const client = connect(server.port);
      client.socket.write(head(3 * 1024 * 1024));
      client.socket.write(Buffer.alloc(512 * 1024, 'x'));
      // The answer arrives whole while the body is still being sent.
      await until(() => client.received().includes('"error"'));
      expect(client.received()).toMatch(/^HTTP\/1\.1 413 /);
      client.socket.write(Buffer.alloc(3 * 1024 * 1024 - 512 * 1024, 'x'));
      client.socket.write(`${head(2)}{}`);
      await until(() => client.received().includes('read 2'));
      client.socket.destroy();
    } finally {
      await server.close();
    }
  });

  it('cuts a body that goes on past its bound in bytes, and one that stalls past its bound in time, after answering', async () => {
    const server = await refusingServer({ bytes: 256 * 1024, ms: 200 });
    try {
      // Chunked, so that no declared length says in advance that it is too large.
      const large = connect(server.port);
      large.socket.write('POST / HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\n');
      const piece = Buffer.alloc(64 * 1024, 'x');
      const frame = Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]);
      for (let sent = 0; sent < 8 * 1024 * 1024 && !large.socket.destroyed; sent += piece.length) {
        if (!large.socket.write(frame)) await new Promise((resolve) => large.socket.once('drain', resolve).once('close', resolve));
      }
      await large.closed;
      expect(large.received()).toMatch(/^HTTP\/1\.1 413 [^]*"error"/);

      const stalled = connect(server.port);
      const stalledAt = Date.now();
      stalled.socket.write(head(128 * 1024));
      stalled.socket.write(Buffer.alloc(4096, 'x'));
      await stalled.closed;
      expect(stalled.received()).toMatch(/^HTTP\/1\.1 413 [^]*"error"/);
      expect(Date.now() - stalledAt).toBeGreaterThanOrEqual(150);
    } finally {
      await server.close();
    }
  });
});
