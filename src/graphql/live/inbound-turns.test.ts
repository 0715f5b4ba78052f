import { InboundTurns, type InboundSource } from './inbound-turns';

/** Turns driven by hand: `turn()` runs what the next event-loop turn would. */
function manualTurns(messagesPerTurn: number, queuedPerConnection = 1000) {
  const deferred: (() => void)[] = [];
  const turns = new InboundTurns({ messagesPerTurn, queuedPerConnection, defer: (callback) => deferred.push(callback) });
  return {
    turns,
    turn() {
      const callbacks = deferred.splice(0);
      for (const callback of callbacks) callback();
    },
    get pendingTurns() {
      return deferred.length;
    },
  };
}

function source(): InboundSource & { paused: boolean; pauses: number; resumes: number } {
  const state = {
    paused: false,
    pauses: 0,
    resumes: 0,
    pause() {
      state.paused = true;
      state.pauses += 1;
    },
    resume() {
      state.paused = false;
      state.resumes += 1;
    },
  };
  return state;
}

describe('InboundTurns', () => {
  it('starts at most messagesPerTurn messages per turn; the rest wait for later turns, in order', () => {
    const { turns, turn } = manualTurns(3);
    const line = turns.open(source());
    const started: number[] = [];
    for (let i = 0; i < 8; i += 1) line.take(() => started.push(i));
    expect(started).toEqual([0, 1, 2]);
    turn();
    expect(started).toEqual([0, 1, 2, 3, 4, 5]);
    turn();
    expect(started).toEqual([0, 1, 2, 3, 4, 5, 6, 7]);
    expect(turns.waitingCount).toBe(0);
  });

  it("takes one message per connection in turn: a bystander's message does not wait behind a flood", () => {
    const { turns, turn } = manualTurns(4);
    const flood = turns.open(source());
    const bystander = turns.open(source());
    const started: string[] = [];
    for (let i = 0; i < 100; i += 1) flood.take(() => started.push(`flood${i}`));
    bystander.take(() => started.push('bystander'));
    expect(started).toHaveLength(4);
    turn();
    // The next turn starts the bystander's message among its first two.
    expect(started.slice(4, 6)).toContain('bystander');
    expect(started).toHaveLength(8);
  });

  it("keeps one connection's order while interleaving connections", () => {
    const { turns, turn } = manualTurns(2);
    const a = turns.open(source());
    const b = turns.open(source());
    const started: string[] = [];
    for (let i = 0; i < 3; i += 1) a.take(() => started.push(`a${i}`));
    for (let i = 0; i < 3; i += 1) b.take(() => started.push(`b${i}`));
    for (let i = 0; i < 4; i += 1) turn();
    expect(started.filter((name) => name.startsWith('a'))).toEqual(['a0', 'a1', 'a2']);
    expect(started.filter((name) => name.startsWith('b'))).toEqual(['b0', 'b1', 'b2']);
    expect(started.slice(2, 4).sort()).toEqual(['a2', 'b0']);
  });

  it('a message of a connection with messages waiting waits too, even when the turn has room', () => {
    const { turns, turn } = manualTurns(2);
    const a = turns.open(source());
    const started: string[] = [];
    a.take(() => started.push('a0'));
    a.take(() => started.push('a1'));
    a.take(() => started.push('a2'));
    turn(); // a2 starts; the turn has room for one more
    a.take(() => started.push('a3'));
    expect(started).toEqual(['a0', 'a1', 'a2', 'a3']);
    const b = turns.open(source());
    b.take(() => started.push('b0'));
    b.take(() => started.push('b1'));
    expect(started).toEqual(['a0', 'a1', 'a2', 'a3']);
    turn();
    expect(started).toEqual(['a0', 'a1', 'a2', 'a3', 'b0', 'b1']);
  });

  it('stops reading a connection with too many messages waiting, and reads it again once half have started', () => {
    const { turns, turn } = manualTurns(2, 6);
    const socket = source();
    const line = turns.open(socket);
    for (let i = 0; i < 10; i += 1) line.take(() => undefined);
    expect(socket.paused).toBe(true);
    expect(socket.pauses).toBe(1);
    turn(); // 6 waiting
    expect(socket.paused).toBe(true);
    turn(); // 4 waiting
    expect(socket.paused).toBe(true);
    turn(); // 2 waiting: at most half the limit
    expect(socket.paused).toBe(false);
    expect(socket.resumes).toBe(1);
  });

  it('drops what a closed connection had waiting', () => {
    const { turns, turn } = manualTurns(1);
    const line = turns.open(source());
    const started: number[] = [];
    for (let i = 0; i < 5; i += 1) line.take(() => started.push(i));
    line.close();
    line.take(() => started.push(99));
    turn();
    turn();
    expect(started).toEqual([0]);
    expect(turns.waitingCount).toBe(0);
  });

  it('schedules no turn when nothing waits', () => {
    const manual = manualTurns(2);
    const line = manual.turns.open(source());
    line.take(() => undefined);
    manual.turn();
    expect(manual.pendingTurns).toBe(0);
  });
});
