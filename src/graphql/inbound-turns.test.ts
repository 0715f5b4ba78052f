import { InboundTurns, type PausableSocket } from './trace-fanout';

class FakeSocket implements PausableSocket {
  readyState = 1;
  paused = 0;
  resumed = 0;
  pause(): void {
    this.paused += 1;
  }
  resume(): void {
    this.resumed += 1;
  }
}

const nextTurn = () => new Promise((resolve) => setImmediate(resolve));

describe('InboundTurns', () => {
  it('hands out a burst a few messages at a time; another socket\'s message waits at most one turn', async () => {
    const turns = new InboundTurns(8, 64, 1024);
    const burst = new FakeSocket();
    const quiet = new FakeSocket();
    const handled: string[] = [];
    for (let i = 0; i < 5000; i += 1) turns.accept(burst, `b${i}`, (message) => handled.push(message));
    // The first share is handled at once, in order; the rest waits.
    expect(handled).toEqual(Array.from({ length: 8 }, (_, i) => `b${i}`));
    await nextTurn();
    turns.accept(quiet, 'q', (message) => handled.push(message));
    await nextTurn();
    await nextTurn();
    expect(handled).toContain('q');
    expect(handled.indexOf('q')).toBeLessThan(64);
    while (turns.waitingCount > 0) await nextTurn();
    const burstOrder = handled.filter((message) => message !== 'q');
    expect(burstOrder).toEqual(Array.from({ length: 5000 }, (_, i) => `b${i}`));
  });

  it('stops reading a socket whose backlog is long, and reads it again once it is worked off', async () => {
    const turns = new InboundTurns(8, 64, 100);
    const socket = new FakeSocket();
    let handled = 0;
    for (let i = 0; i < 300; i += 1) turns.accept(socket, 'm', () => (handled += 1));
    expect(socket.paused).toBe(1);
    while (turns.waitingCount > 0) await nextTurn();
    expect(socket.resumed).toBe(1);
    expect(handled).toBe(300);
  });

  it('drops what a closed socket still had waiting', async () => {
    const turns = new InboundTurns(8, 64, 1024);
    const socket = new FakeSocket();
    let handled = 0;
    for (let i = 0; i < 100; i += 1) turns.accept(socket, 'm', () => (handled += 1));
    socket.readyState = 3;
    while (turns.waitingCount > 0) await nextTurn();
    expect(handled).toBe(8);
  });
});
