/**
 * What the HTTP door does when things go wrong below or in front of it:
 * /readyz reports a database that is gone, a refused oversized body's 413
 * reaches the client every time, and a client that hangs up mid-body is an
 * ordinary event in the log, not a server error.
 */
import fs from 'node:fs';
import net from 'node:net';
import mysql from 'mysql2/promise';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../support/server';
import { captureLog, type CapturedLog } from './support/log-capture';

/**
 * Posts `size` bytes over a plain socket the way many clients do: the whole
 * body is written before the answer is read. Resolves with the answer's
 * status line and body, or with the socket error that replaced them.
 */
function postLarge(url: string, size: number, chunked: boolean): Promise<{ status: number; body: string } | { error: string }> {
  const { port } = new URL(url);
  return new Promise((resolve) => {
    const socket = net.connect(Number(port), '127.0.0.1');
    socket.pause();
    let received = Buffer.alloc(0);
    const settle = () => {
      const text = received.toString('utf8');
      const split = text.indexOf('\r\n\r\n');
      const length = /content-length: (\d+)/i.exec(text)?.[1];
      if (split < 0 || length === undefined || received.length < split + 4 + Number(length)) return false;
      resolve({ status: Number(text.slice(9, 12)), body: text.slice(split + 4, split + 4 + Number(length)) });
      socket.destroy();
      return true;
    };
    socket.on('data', (chunk: Buffer) => {
      received = Buffer.concat([received, chunk]);
      settle();
    });
    socket.on('error', (error: NodeJS.ErrnoException) => resolve({ error: `${error.code ?? ''} ${error.message}` }));
    socket.on('close', () => settle() || resolve({ error: `closed after ${received.length} bytes` }));
    const framing = chunked ? 'transfer-encoding: chunked' : `content-length: ${size}`;
    socket.write(`POST /graphql HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\nauthorization: Bearer ${ADMIN_TOKEN}\r\n${framing}\r\n\r\n`);
    const piece = Buffer.alloc(64 * 1024, 'x');
    const frame = chunked ? Buffer.concat([Buffer.from(`${piece.length.toString(16)}\r\n`), piece, Buffer.from('\r\n')]) : piece;
    let sent = 0;
    const pump = () => {
      while (sent < size) {
        sent += piece.length;
        if (!socket.write(frame)) return void socket.once('drain', pump);
      }
      if (chunked) socket.write('0\r\n\r\n');
      // Only now does this client read.
      socket.resume();
    };
    socket.once('connect', pump);
  });
}

describe.each(testDialects)('the HTTP door under failure (%s)', (dialect) => {
  describe('oversized bodies and clients that hang up', () => {
    let t: TestServer;
    let log: CapturedLog;

    beforeAll(async () => {
      log = captureLog('debug');
      t = await startTestServer(dialect, { env: { BODY_LIMIT_BYTES: '2048' }, server: { logger: log.logger } });
    });
    afterAll(async () => {
      await t?.stop();
    });

    it.each([
      ['with a content-length', false],
      ['chunked', true],
    ])('the 413 for a 4 MB body sent %s reaches a client that reads only after writing, every time', async (_name, chunked) => {
      const answers = [];
      for (let attempt = 0; attempt < 10; attempt += 1) answers.push(await postLarge(t.url, 4 * 1024 * 1024, chunked));
      expect(answers.filter((answer) => 'error' in answer)).toEqual([]);
      for (const answer of answers) {
        expect(answer).toMatchObject({ status: 413 });
        expect(JSON.parse((answer as { body: string }).body)).toMatchObject({ errors: [{ extensions: { code: 'BAD_USER_INPUT' } }] });
      }
      expect(await t.ok('{ __typename }')).toEqual({ __typename: 'Query' });
    });

    it('a client that disconnects mid-body is logged as an ordinary event, without an error or a stack', async () => {
      const { port } = new URL(t.url);
      for (let attempt = 0; attempt < 5; attempt += 1) {
        const socket = net.connect(Number(port), '127.0.0.1');
        await new Promise((resolve) => socket.once('connect', resolve));
        socket.write(`POST /graphql HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 2000\r\nx-request-id: gone-${attempt}\r\n\r\n{"query":"`);
        await new Promise((resolve) => setTimeout(resolve, 50));
        // A reset, as a crashed client or a cut connection gives, and a plain close.
        if (attempt % 2 === 0) socket.resetAndDestroy();
        else socket.destroy();
      }
      // The server has seen every hang-up once a later request is answered after them.
      await new Promise((resolve) => setTimeout(resolve, 200));
      expect(await t.ok('{ __typename }')).toEqual({ __typename: 'Query' });
      const entries = log.entries();
      expect(entries.filter((entry) => Number(entry.level) >= 40)).toEqual([]);
      expect(log.text()).not.toMatch(/"stack"/);
      const gone = entries.filter((entry) => String(entry.requestId ?? '').startsWith('gone-'));
      expect(gone.length).toBeGreaterThan(0);
      for (const entry of gone) expect(Number(entry.level)).toBeLessThanOrEqual(30);
    });
  });

  it('/readyz answers 503 once the database is gone, and 200 before', async () => {
    const t = await startTestServer(dialect);
    try {
      const origin = new URL(t.url).origin;
      expect((await fetch(`${origin}/readyz`)).status).toBe(200);
      if (t.database.config.kind === 'sqlite') {
        const { file } = t.database.config;
        for (const suffix of ['', '-wal', '-shm']) fs.rmSync(`${file}${suffix}`, { force: true });
      } else {
        const url = new URL(t.database.config.url);
        const admin = await mysql.createConnection(process.env.TEST_MYSQL_URL!);
        await admin.query(`DROP DATABASE \`${url.pathname.slice(1)}\``);
        await admin.end();
      }
      const response = await fetch(`${origin}/readyz`);
      expect(response.status).toBe(503);
      expect(await response.json()).toEqual({ status: 'database unavailable' });
      expect((await fetch(`${origin}/healthz`)).status).toBe(200);
    } finally {
      await t.stop().catch(() => undefined);
    }
  });
});
