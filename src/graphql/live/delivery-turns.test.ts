import type { IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { DeliveryTurns, FRAMES_PER_TURN, HELD_BYTES_LIMIT } from './delivery-turns';
import { nextFrame, textFrame } from './frames';

/** An audience of more than one watcher: each live frame written at once (see DeliveryTurns.push). */
const LARGE = 1000;

interface Peer {
  /** The server's side of the connection. */
  socket: WebSocket;
  tcp: Socket;
  /** Messages the client received, and how many TCP reads carried them. */
  received: string[];
  reads: () => number;
}

/** `count` real WebSocket connections on 127.0.0.1. */
async function connect(count: number): Promise<{ peers: Peer[]; clients: WebSocket[]; close(): Promise<void> }> {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  await new Promise((resolve) => server.once('listening', resolve));
  const port = (server.address() as AddressInfo).port;
  const peers: Peer[] = [];
  const clients: WebSocket[] = [];
  for (let i = 0; i < count; i += 1) {
    const accepted = new Promise<[WebSocket, IncomingMessage]>((resolve) => server.once('connection', (socket, request) => resolve([socket, request])));
    const client = new WebSocket(`ws://127.0.0.1:${port}`);
    await new Promise((resolve) => client.once('open', resolve));
    const [socket, request] = await accepted;
    const received: string[] = [];
    let reads = 0;
    const raw = (client as unknown as { _socket: Socket })._socket;
    raw.prependListener('data', () => (reads += 1));
    client.on('message', (data: Buffer) => received.push(String(data)));
    clients.push(client);
    peers.push({ socket, tcp: request.socket, received, reads: () => reads });
  }
  return {
    peers,
    clients,
    close: async () => {
      for (const client of clients) client.terminate();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

async function eventually(check: () => boolean, timeoutMs = 5000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`not within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 5));
  }
}

describe('DeliveryTurns', () => {
  it('sends a subscriber\'s burst (messages sent one after the other as each send resolves) in one write, in order', async () => {
    const { peers, close } = await connect(1);
    try {
      const turns = new DeliveryTurns(64);
      const [peer] = peers as [Peer];
      for (const message of ['one', 'two', 'three', 'four']) await turns.send(peer.socket, peer.tcp, textFrame(message));
      await eventually(() => peer.received.length === 4);
      expect(peer.received).toEqual(['one', 'two', 'three', 'four']);
      expect(peer.reads()).toBe(1);
    } finally {
      await close();
    }
  });

  it('writes no more in a turn than it allows: the rest wait, in order, and timers run in between', async () => {
    const { peers, close } = await connect(20);
    try {
      const turns = new DeliveryTurns(1);
      const order: string[] = [];
      const timer = new Promise<void>((resolve) => setTimeout(() => (order.push('timer'), resolve()), 0));
      // Let the timer become due, so the first turn that yields runs it.
      const until = Date.now() + 5;
      while (Date.now() < until) {
        // wait
      }
      const sends = peers.map((peer, index) => turns.send(peer.socket, peer.tcp, textFrame(`m${index}`)).then(() => order.push(`sent ${index}`)));
      expect(turns.waitingCount).toBe(19);
      await Promise.all([...sends, timer]);
      // One socket per turn; the timer, due all along, runs between turns, long before the last socket.
      expect(order[0]).toBe('sent 0');
      expect(order.indexOf('timer')).toBeLessThan(order.indexOf('sent 10'));
      expect(order.filter((entry) => entry !== 'timer')).toEqual(peers.map((_peer, index) => `sent ${index}`));
      await eventually(() => peers.every((peer) => peer.received.length === 1));
      expect(peers.map((peer) => peer.received)).toEqual(peers.map((_peer, index) => [`m${index}`]));
    } finally {
      await close();
    }
  });

  it('writes a socket\'s waiting messages together, sockets in the order of their oldest waiting message', async () => {
    const { peers, close } = await connect(3);
    try {
      const turns = new DeliveryTurns(1);
      const [first, second, third] = peers as [Peer, Peer, Peer];
      // The first fills the turn; everything after it waits, in one line.
      const sends = [
        turns.send(first.socket, first.tcp, textFrame('f1')),
        turns.send(second.socket, second.tcp, textFrame('s1')),
        turns.send(third.socket, third.tcp, textFrame('t1')),
        turns.send(second.socket, second.tcp, textFrame('s2')),
        turns.send(first.socket, first.tcp, textFrame('f2')),
      ];
      expect(turns.waitingCount).toBe(4);
      const order: string[] = [];
      sends.forEach((send, index) => void send.then(() => order.push(['f1', 's1', 't1', 's2', 'f2'][index]!)));
      await Promise.all(sends);
      expect(order).toEqual(['f1', 's1', 's2', 't1', 'f2']);
      await eventually(() => second.received.length === 2 && first.received.length === 2 && third.received.length === 1);
      expect(second.received).toEqual(['s1', 's2']);
      expect(second.reads()).toBe(1);
      expect(first.received).toEqual(['f1', 'f2']);
      expect(third.received).toEqual(['t1']);
    } finally {
      await close();
    }
  });

  it('takes live frames (push) in the same line: written at once when nothing waits, else after what waits', async () => {
    const { peers, close } = await connect(2);
    try {
      const turns = new DeliveryTurns(1);
      const [busy, other] = peers as [Peer, Peer];
      expect(turns.accepts(busy.socket, busy.tcp)).toBe(true);
      turns.push(busy.socket, busy.tcp, textFrame('live 1'), 'step 1', LARGE);
      // A larger audience's live frame is not corked: on its way before the chain of work goes on.
      expect(busy.tcp.writableLength).toBe(0);
      const reply = turns.send(busy.socket, busy.tcp, textFrame('reply'));
      turns.push(other.socket, other.tcp, textFrame('other'), 'step 2', LARGE);
      turns.push(busy.socket, busy.tcp, textFrame('live 2'), 'step 3', LARGE);
      expect(turns.waitingCount).toBe(3);
      await reply;
      await eventually(() => busy.received.length === 3 && other.received.length === 1);
      expect(busy.received).toEqual(['live 1', 'reply', 'live 2']);
      expect(other.received).toEqual(['other']);
    } finally {
      await close();
    }
  });

  it('for a single watcher, corks every live frame a chain of work writes to its socket: they leave in one write once it settles', async () => {
    const { peers, close } = await connect(2);
    try {
      const turns = new DeliveryTurns(1024);
      const [watcher, other] = peers as [Peer, Peer];
      turns.push(watcher.socket, watcher.tcp, textFrame('answer'), 'step 1', 1);
      turns.push(other.socket, other.tcp, textFrame('answer'), 'step 1', 1);
      // Nothing is written inside the chain: the run's loop goes on at once.
      expect(watcher.tcp.writableCorked).toBe(1);
      expect(other.tcp.writableCorked).toBe(1);
      turns.push(watcher.socket, watcher.tcp, textFrame('tool'), 'step 2', 1);
      // Steps the chain stores after an await are still part of it.
      await Promise.resolve();
      turns.push(watcher.socket, watcher.tcp, textFrame('request'), 'step 3', 1);
      expect(watcher.tcp.writableCorked).toBe(1);
      expect(watcher.tcp.writableLength).toBeGreaterThan(0);
      await eventually(() => watcher.received.length === 3 && other.received.length === 1);
      expect(watcher.tcp.writableCorked).toBe(0);
      expect(watcher.received).toEqual(['answer', 'tool', 'request']);
      expect(watcher.reads()).toBe(1);
      expect(other.received).toEqual(['answer']);
      // The next chain (here: a timer's) is corked and written as one again.
      setTimeout(() => {
        turns.push(watcher.socket, watcher.tcp, textFrame('next answer'), 'step 4', 1);
        turns.push(watcher.socket, watcher.tcp, textFrame('next tool'), 'step 5', 1);
      }, 0);
      await eventually(() => watcher.received.length === 5);
      expect(watcher.received).toEqual(['answer', 'tool', 'request', 'next answer', 'next tool']);
      expect(watcher.reads()).toBe(2);
    } finally {
      await close();
    }
  });

  it('for more than one watcher, writes every live frame of a chain of work at once, each in its own write', async () => {
    const { peers, close } = await connect(2);
    try {
      const turns = new DeliveryTurns(1 << 20);
      for (const audience of [2, LARGE]) {
        const [watcher, other] = peers as [Peer, Peer];
        const before = watcher.received.length;
        const otherBefore = other.received.length;
        turns.push(watcher.socket, watcher.tcp, textFrame(`answer ${audience}`), `step 1 of ${audience}`, audience);
        turns.push(other.socket, other.tcp, textFrame(`answer ${audience}`), `step 1 of ${audience}`, audience);
        // Each step on its way before the chain goes on: nothing held in a cork.
        expect(watcher.tcp.writableCorked).toBe(0);
        expect(watcher.tcp.writableLength).toBe(0);
        expect(other.tcp.writableCorked).toBe(0);
        // Later in the same chain of work (after an await, before it settles): written at once as well,
        // not corked behind the first.
        await Promise.resolve();
        turns.push(watcher.socket, watcher.tcp, textFrame(`tool ${audience}`), `step 2 of ${audience}`, audience);
        expect(watcher.tcp.writableCorked).toBe(0);
        expect(watcher.tcp.writableLength).toBe(0);
        await eventually(() => watcher.received.length === before + 2 && other.received.length === otherBefore + 1);
        expect(watcher.received.slice(before)).toEqual([`answer ${audience}`, `tool ${audience}`]);
      }
    } finally {
      await close();
    }
  });

  it('writes a large audience\'s whole chain of work (some four steps to 1,000 watchers) in the turn it is stored in', async () => {
    const { peers, close } = await connect(4);
    try {
      // The production budget: the chain's four steps, each written to 1,000 sockets (here 4 sockets
      // stand for them, pushed 250 times each), leave in the turn; none waits for a later one.
      const turns = new DeliveryTurns(FRAMES_PER_TURN);
      for (let sequence = 1; sequence <= 4; sequence += 1) {
        const step = { sequence };
        for (let i = 0; i < 250; i += 1) for (const peer of peers) turns.push(peer.socket, peer.tcp, textFrame(`step ${sequence}`), step, LARGE);
        expect(turns.waitingCount).toBe(0);
      }
      // Some eight such steps fill the turn: the ones after them wait for the next turn, in order.
      for (let sequence = 5; sequence <= 12; sequence += 1) {
        const step = { sequence };
        for (let i = 0; i < 250; i += 1) for (const peer of peers) turns.push(peer.socket, peer.tcp, textFrame(`step ${sequence}`), step, LARGE);
      }
      expect(turns.waitingCount).toBeGreaterThan(0);
      await eventually(() => peers.every((peer) => peer.received.length === 12 * 250));
      const expected = Array.from({ length: 12 }, (_, i) => Array<string>(250).fill(`step ${i + 1}`)).flat();
      for (const peer of peers) expect(peer.received).toEqual(expected);
    } finally {
      await close();
    }
  });

  it('writes the rest of a step begun in a turn in that turn, past its budget; the next step waits for the next turn', async () => {
    const { peers, close } = await connect(6);
    try {
      // Room for one socket's write per turn.
      const turns = new DeliveryTurns(1);
      const step = { sequence: 7 };
      for (const peer of peers) turns.push(peer.socket, peer.tcp, textFrame('step 7'), step, LARGE);
      expect(turns.waitingCount).toBe(0);
      const next = { sequence: 8 };
      for (const peer of peers) turns.push(peer.socket, peer.tcp, textFrame('step 8'), next, LARGE);
      expect(turns.waitingCount).toBe(6);
      // Something else (a reply) while the step's frames wait: they stay in line, the step does not jump it.
      const reply = turns.send(peers[0]!.socket, peers[0]!.tcp, textFrame('reply'));
      turns.push(peers[1]!.socket, peers[1]!.tcp, textFrame('step 8 again'), next, LARGE);
      expect(turns.waitingCount).toBe(8);
      await reply;
      await eventually(() => peers[0]!.received.length === 3 && peers[1]!.received.length === 3 && peers.slice(2).every((peer) => peer.received.length === 2));
      expect(peers[0]!.received).toEqual(['step 7', 'step 8', 'reply']);
      expect(peers[1]!.received).toEqual(['step 7', 'step 8', 'step 8 again']);
      for (const peer of peers.slice(2)) expect(peer.received).toEqual(['step 7', 'step 8']);
    } finally {
      await close();
    }
  });

  it('refuses live frames for a socket that holds HELD_BYTES_LIMIT, or is closed', async () => {
    const { peers, close } = await connect(2);
    try {
      const turns = new DeliveryTurns(1);
      const [full, closed] = peers as [Peer, Peer];
      turns.push(full.socket, full.tcp, textFrame('first'), 'step 1', LARGE);
      void turns.send(full.socket, full.tcp, textFrame('x'.repeat(HELD_BYTES_LIMIT)));
      expect(turns.accepts(full.socket, full.tcp)).toBe(false);
      closed.socket.terminate();
      await settle();
      expect(turns.accepts(closed.socket, closed.tcp)).toBe(false);
      expect(turns.accepts(full.socket, full.tcp)).toBe(true);
    } finally {
      await close();
    }
  });

  it('lets a sender go on at once while little is buffered, and makes it wait for the write once HELD_BYTES_LIMIT is', async () => {
    const { peers, close } = await connect(1);
    try {
      const turns = new DeliveryTurns(64);
      const [peer] = peers as [Peer];
      const states: string[] = [];
      const small = turns.send(peer.socket, peer.tcp, textFrame('small'));
      const big = turns.send(peer.socket, peer.tcp, textFrame('x'.repeat(HELD_BYTES_LIMIT + 1024)));
      const after = turns.send(peer.socket, peer.tcp, textFrame('after'));
      void small.then(() => states.push('small'));
      void big.then(() => states.push('big'));
      void after.then(() => states.push('after'));
      await Promise.resolve();
      await Promise.resolve();
      // The third send found more than the limit buffered (the socket is corked until the chain settles).
      expect(states).toEqual(['small', 'big']);
      await Promise.all([small, big, after]);
      expect(states).toEqual(['small', 'big', 'after']);
      await eventually(() => peer.received.length === 3);
      expect(peer.received.map((message) => message.slice(0, 5))).toEqual(['small', 'xxxxx', 'after']);
    } finally {
      await close();
    }
  });

  it('resolves at once for a socket that is closed', async () => {
    const { peers, close } = await connect(1);
    const [peer] = peers as [Peer];
    peer.socket.terminate();
    await settle();
    await expect(new DeliveryTurns(2).send(peer.socket, peer.tcp, textFrame('late'))).resolves.toBeUndefined();
    await close();
  });

  it('a connection that fails with megabytes of live frames unread leaves no unhandled rejection behind', async () => {
    const { peers, close, clients } = await connect(1);
    const unhandled: unknown[] = [];
    const onUnhandled = (reason: unknown) => void unhandled.push(reason);
    process.on('unhandledRejection', onUnhandled);
    try {
      const [peer] = peers as [Peer];
      const raw = (clients[0] as unknown as { _socket: Socket })._socket;
      // The client stops reading, so the kernel's buffers fill and the server's writes wait in Node.
      raw.pause();
      const turns = new DeliveryTurns(1);
      const frame = textFrame('y'.repeat(256 * 1024));
      // One frame per turn: the rest wait and are written in later turns, by then past HELD_BYTES_LIMIT.
      for (let step = 0; step < 40; step += 1) turns.push(peer.socket, peer.tcp, frame, `step ${step}`, LARGE);
      await eventually(() => turns.waitingCount === 0 && peer.tcp.writableLength > HELD_BYTES_LIMIT, 10_000);
      // The connection fails under the pending writes (as on a reset): Node destroys the TCP socket, and ws
      // learns of it only from the socket's events, a tick later. A live step published in between is
      // written to the destroyed socket past HELD_BYTES_LIMIT, and that write fails.
      peer.tcp.destroy();
      expect(peer.socket.readyState).toBe(peer.socket.OPEN);
      turns.push(peer.socket, peer.tcp, frame, 'step 40', LARGE);
      await settle();
      raw.destroy();
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await close();
    }
  });

  it('writes frames that a WebSocket client reads as the texts they carry, at every length encoding and in UTF-8', async () => {
    const { peers, close } = await connect(1);
    const [peer] = peers as [Peer];
    try {
      const turns = new DeliveryTurns(1024);
      // 125 / 126 bytes: the last one-byte length and the first two-byte one; 65,535 / 65,536: the same for eight bytes.
      const texts = ['', 'a'.repeat(125), 'a'.repeat(126), 'b'.repeat(65_535), 'c'.repeat(65_536), 'Grüße, €, 😀 and \u0000'];
      for (const text of texts) await turns.send(peer.socket, peer.tcp, textFrame(text));
      const payload = Buffer.from('{"data":{"step":"é"}}');
      turns.push(peer.socket, peer.tcp, nextFrame(Buffer.from('{"id":"1","type":"next","payload":'), payload), payload, LARGE);
      await eventually(() => peer.received.length === texts.length + 1);
      expect(peer.received).toEqual([...texts, '{"id":"1","type":"next","payload":{"data":{"step":"é"}}}']);
    } finally {
      await close();
    }
  });
});
