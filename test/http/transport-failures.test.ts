/**
 * What the HTTP door does when things go wrong below or in front of it:
 * /readyz reports a database that is gone, a refused oversized body's 413
 * reaches the client every time (also twenty 10 MB bodies at once, whether
 * the client keeps the connection or asks to close it), and a client that
 * hangs up mid-body is an ordinary event in the log, not a server error.
 */
import fs from 'node:fs';
import http from 'node:http';
import net from 'node:net';
import mysql from 'mysql2/promise';
import { testDialects } from '../support/databases';
import { DISCARD_LIMIT_MS } from '../../src/http-body';
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

/** What a client of node:http saw: the answer, and every error its request, response or socket reported. */
interface NodeHttpOutcome {
  status: number | null;
  body: string;
  errors: string[];
}

/**
 * Posts `body` with node:http as most clients do (`request.end(body)`: the
 * whole body is handed over at once, the answer is read when it comes), and
 * waits for the socket to close, so that an error after the answer counts too.
 */
function postOverNodeHttp(url: string, body: Buffer, agent: http.Agent | false): Promise<NodeHttpOutcome> {
  return new Promise((resolve) => {
    const outcome: NodeHttpOutcome = { status: null, body: '', errors: [] };
    const failed = (error: NodeJS.ErrnoException) => outcome.errors.push(`${error.code ?? ''} ${error.message}`);
    const request = http.request(
      url,
      // Without an agent the client asks the server to close the connection after the answer; with a keep-alive one, to keep it.
      { method: 'POST', agent, headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}`, 'content-length': String(body.length) } },
      (response) => {
        outcome.status = response.statusCode ?? null;
        response.setEncoding('utf8');
        response.on('data', (chunk: string) => (outcome.body += chunk));
        response.on('error', failed);
        response.on('aborted', () => outcome.errors.push('response aborted'));
      },
    );
    request.on('error', failed);
    request.on('socket', (socket) => socket.on('error', failed));
    request.on('close', () => resolve(outcome));
    request.end(body);
  });
}

describe.each(testDialects)('the HTTP door under failure (%s)', (dialect) => {
  describe('bodies of 10 MB from many clients at once, with the default limit of 1 MB', () => {
    let t: TestServer;
    beforeAll(async () => {
      t = await startTestServer(dialect);
    });
    afterAll(async () => {
      await t?.stop();
    });

    it('20 clients posting 10 MB at once all receive the 413 with its JSON error; none sees EPIPE or ECONNRESET; the server answers others meanwhile', async () => {
      const body = Buffer.alloc(10 * 1024 * 1024, 'x');
      const keepAlive = new http.Agent({ keepAlive: true });
      const uploads = Array.from({ length: 20 }, (_, index) => postOverNodeHttp(t.url, body, index % 2 === 0 ? false : keepAlive));
      // Another client, while the uploads are being refused, is served without waiting for the bodies to be read
      // (a generous bound: the time the server gives a refused body at most).
      const asked = Date.now();
      expect(await t.ok('{ __typename }')).toEqual({ __typename: 'Query' });
      expect(Date.now() - asked).toBeLessThan(DISCARD_LIMIT_MS);
      const outcomes = await Promise.all(uploads);
      expect(outcomes.filter((outcome) => outcome.errors.length > 0 || outcome.status !== 413)).toEqual([]);
      for (const outcome of outcomes) {
        expect(JSON.parse(outcome.body)).toMatchObject({ errors: [{ message: expect.stringMatching(/larger than 1048576 bytes/), extensions: { code: 'BAD_USER_INPUT' } }] });
      }
      expect(await t.ok('{ __typename }')).toEqual({ __typename: 'Query' });
      keepAlive.destroy();
    });
  });

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
