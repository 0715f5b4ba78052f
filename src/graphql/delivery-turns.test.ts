import type { IncomingMessage } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import WebSocket, { WebSocketServer } from 'ws';
import { DeliveryTurns, HELD_BYTES_LIMIT } from './trace-fanout';

interface Peer {
  /** The server's side of the connection. */
  socket: WebSocket;
  tcp: Socket;
  /** Messages the client received, and how many TCP reads carried them. */
  received: string[];
  reads: () => number;
}

/** `count` real WebSocket connections on 127.0.0.1. */
async function connect(count: number): Promise<{ peers: Peer[]; close(): Promise<void> }> {
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
    close: async () => {
      for (const client of clients) client.terminate();
      await new Promise((resolve) => server.close(resolve));
    },
  };
}

const settle = () => new Promise((resolve) => setTimeout(resolve, 50));

describe('DeliveryTurns', () => {
  it('sends a subscriber\'s burst (messages sent one after the other as each send resolves) in one write, in order', async () => {
    const { peers, close } = await connect(1);
    try {
      const turns = new DeliveryTurns(2);
      const [peer] = peers as [Peer];
      for (const message of ['one', 'two', 'three', 'four']) await turns.send(peer.socket, peer.tcp, message);
      await settle();
      expect(peer.received).toEqual(['one', 'two', 'three', 'four']);
      expect(peer.reads()).toBe(1);
    } finally {
      await close();
    }
  });

  it('starts no more sockets in a turn than it allows: the rest wait, in order, and timers run in between', async () => {
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
      const sends = peers.map((peer, index) => turns.send(peer.socket, peer.tcp, `m${index}`).then(() => order.push(`sent ${index}`)));
      expect(turns.waitingCount).toBe(19);
      await Promise.all([...sends, timer]);
      // One socket per turn; the timer, due all along, runs between turns, long before the last socket.
      expect(order[0]).toBe('sent 0');
      expect(order.indexOf('timer')).toBeLessThan(order.indexOf('sent 10'));
      expect(order.filter((entry) => entry !== 'timer')).toEqual(peers.map((_peer, index) => `sent ${index}`));
      await settle();
      expect(peers.map((peer) => peer.received)).toEqual(peers.map((_peer, index) => [`m${index}`]));
    } finally {
      await close();
    }
  });

  it('writes at most four messages of a socket at a time: the rest of its backlog waits for a later turn, behind new sockets', async () => {
    const { peers, close } = await connect(2);
    try {
      const turns = new DeliveryTurns(1);
      const [busy, other] = peers as [Peer, Peer];
      for (let n = 1; n <= 4; n += 1) await turns.send(busy.socket, busy.tcp, `b${n}`);
      const order: string[] = [];
      const fifth = turns.send(busy.socket, busy.tcp, 'b5').then(() => order.push('b5'));
      expect(turns.waitingCount).toBe(1);
      // A socket that has not written yet waits too (one socket per turn here), but goes first.
      const first = turns.send(other.socket, other.tcp, 'o1').then(() => order.push('o1'));
      await Promise.all([fifth, first]);
      expect(order).toEqual(['o1', 'b5']);
      await settle();
      expect(busy.received).toEqual(['b1', 'b2', 'b3', 'b4', 'b5']);
      expect(other.received).toEqual(['o1']);
    } finally {
      await close();
    }
  });

  it('lets a sender go on at once while little is buffered, and makes it wait for the write once HELD_BYTES_LIMIT is', async () => {
    const { peers, close } = await connect(1);
    try {
      const turns = new DeliveryTurns(2);
      const [peer] = peers as [Peer];
      const states: string[] = [];
      const small = turns.send(peer.socket, peer.tcp, 'small');
      const big = turns.send(peer.socket, peer.tcp, 'x'.repeat(HELD_BYTES_LIMIT + 1024));
      const after = turns.send(peer.socket, peer.tcp, 'after');
      void small.then(() => states.push('small'));
      void big.then(() => states.push('big'));
      void after.then(() => states.push('after'));
      await Promise.resolve();
      await Promise.resolve();
      // The third send found more than the limit buffered (the socket is corked until the chain settles).
      expect(states).toEqual(['small', 'big']);
      await Promise.all([small, big, after]);
      expect(states).toEqual(['small', 'big', 'after']);
      await settle();
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
    await expect(new DeliveryTurns(2).send(peer.socket, peer.tcp, 'late')).resolves.toBeUndefined();
    await close();
  });
});
