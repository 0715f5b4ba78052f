import net from 'node:net';
import type { WebSocket } from 'ws';
import { batchSends, SocketBatcher } from './socket-batcher';

/** A connected pair of real TCP sockets on 127.0.0.1, and every chunk the reader gets. */
async function pair(): Promise<{ writer: net.Socket; chunks: Buffer[]; close(): Promise<void> }> {
  const chunks: Buffer[] = [];
  const server = net.createServer((socket) => socket.on('data', (chunk: Buffer) => chunks.push(chunk)));
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const writer = net.connect((server.address() as net.AddressInfo).port, '127.0.0.1');
  await new Promise((resolve) => writer.once('connect', resolve));
  return {
    writer,
    chunks,
    close: async () => {
      writer.destroy();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const turn = () => new Promise((resolve) => setImmediate(resolve));
const settle = () => new Promise((resolve) => setTimeout(resolve, 30));

describe('SocketBatcher', () => {
  it('sends what was written to a held socket within one turn as one chunk, at the end of the turn', async () => {
    const { writer, chunks, close } = await pair();
    try {
      const batcher = new SocketBatcher(1_000);
      for (const part of ['one ', 'two ', 'three']) {
        batcher.hold(writer);
        writer.write(part);
      }
      expect(writer.writableLength).toBe('one two three'.length);
      await turn();
      await settle();
      expect(Buffer.concat(chunks).toString()).toBe('one two three');
      expect(chunks).toHaveLength(1);
    } finally {
      await close();
    }
  });

  it('lets the writes go once the window has passed, without waiting for the end of the turn', async () => {
    const { writer, close } = await pair();
    try {
      const batcher = new SocketBatcher(5);
      batcher.hold(writer);
      writer.write('early');
      expect(batcher.heldBytes(writer)).toBe(5);
      const until = Date.now() + 10;
      while (Date.now() < until) {
        // the window passes inside one turn
      }
      batcher.hold(writer);
      expect(batcher.heldBytes(writer)).toBe(0);
    } finally {
      await close();
    }
  });

  it('ignores a destroyed socket', async () => {
    const { writer, close } = await pair();
    writer.destroy();
    const batcher = new SocketBatcher(5);
    expect(() => batcher.hold(writer)).not.toThrow();
    expect(batcher.heldBytes(writer)).toBe(0);
    await close();
  });
});

describe('batchSends', () => {
  it('transforms each message, acknowledges at once while little is held, and waits for the write once 64 KiB are', async () => {
    const { writer, chunks, close } = await pair();
    try {
      const underlying: { data: unknown; deferred: boolean }[] = [];
      const fake = {
        send(data: unknown, callback?: (error?: Error) => void) {
          underlying.push({ data, deferred: callback !== undefined });
          writer.write(String(data), () => callback?.());
        },
      } as unknown as WebSocket;
      batchSends(fake, writer, new SocketBatcher(1_000), (message) => message.toUpperCase());
      const acknowledged: string[] = [];
      fake.send('small', () => acknowledged.push('small'));
      fake.send('x'.repeat(70 * 1024), () => acknowledged.push('big'));
      fake.send('after', () => acknowledged.push('after'));
      expect(acknowledged).toEqual(['small', 'big']);
      expect(underlying.map((entry) => entry.deferred)).toEqual([false, false, true]);
      expect(underlying[0]?.data).toBe('SMALL');
      await turn();
      await settle();
      expect(acknowledged).toEqual(['small', 'big', 'after']);
      expect(Buffer.concat(chunks).toString().startsWith('SMALLX')).toBe(true);
    } finally {
      await close();
    }
  });
});
