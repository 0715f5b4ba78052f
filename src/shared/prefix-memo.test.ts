import { PrefixMemo, PROBES, type Fold } from './prefix-memo';

interface Item {
  v: number;
}

/** A sum: a fold whose remove lets a memo correct mismatches. */
interface Sum {
  total: number;
  count: number;
}

const sum: Fold<Item, Sum> = {
  empty: () => ({ total: 0, count: 0 }),
  copy: (s) => ({ ...s }),
  add: (s, item) => {
    s.count += 1;
    s.total += item.v;
  },
  remove: (s, item) => {
    s.count -= 1;
    s.total -= item.v;
  },
};

/** An order-sensitive fold with no remove: only exact prefixes may be reused. */
const sequence: Fold<Item, number[]> = { empty: () => [], copy: (s) => s.slice(), add: (s, item) => void s.push(item.v) };

const items = (n: number, base = 0): Item[] => Array.from({ length: n }, (_, i) => ({ v: base + i }));
const plain = <S>(fold: Fold<Item, S>, list: readonly Item[]): S => {
  const state = fold.empty();
  for (const item of list) fold.add(state, item);
  return state;
};

describe('PrefixMemo', () => {
  it('folds a list that extends a remembered one from where that one ended, as a turn of a conversation does', () => {
    const memo = new PrefixMemo(sequence);
    let history = items(500);
    expect(memo.of(history)).toEqual(plain(sequence, history));
    for (let turn = 0; turn < 20; turn += 1) {
      history = [...history, { v: 1000 + turn }, { v: 2000 + turn }];
      expect(memo.of(history)).toEqual(plain(sequence, history));
    }
    expect(memo.counts).toEqual({ extended: 20, folded: 1 });
  });

  it('finds the fold before a list’s last item: the next assembly replaces the prompt with its stored copy and adds more', () => {
    const memo = new PrefixMemo(sum, 4);
    const history = items(300);
    const first = [{ v: -1 }, ...history, { v: 7 }];
    memo.of(first);
    // Same history, another system message in front, the stored prompt, an answer and a new prompt.
    const next = [{ v: -2 }, ...history, { v: 7 }, { v: 8 }, { v: 9 }];
    expect(memo.of(next)).toEqual(plain(sum, next));
    expect(memo.counts.extended).toBe(1);
  });

  it('keeps one remembered fold per growing list: the one it extended is let go, both of its entries', () => {
    const memo = new PrefixMemo(sequence);
    const first = items(10);
    memo.of(first);
    memo.of([...first, { v: 100 }, { v: 101 }]);
    expect(memo.counts).toEqual({ extended: 1, folded: 1 });
    // The first fold's entries (at its end and before its last item) are gone: these are folded anew.
    expect(memo.of(first.slice(0, 9))).toEqual(plain(sequence, first.slice(0, 9)));
    expect(memo.counts).toEqual({ extended: 1, folded: 2 });
    expect(memo.of(first)).toEqual(plain(sequence, first));
    expect(memo.counts).toEqual({ extended: 2, folded: 2 });
  });

  it('a list folded again as it is keeps the state before its last item: a turn’s second fit does not hide it from the next turn', () => {
    const memo = new PrefixMemo(sum, 4);
    const history = items(50);
    const turn = [{ v: -1 }, ...history, { v: 7 }];
    memo.of(turn);
    // The loop measures the same list again, with its system message made anew.
    const again = [{ v: -5 }, ...turn.slice(1)];
    expect(memo.of(again)).toEqual(plain(sum, again));
    const next = [{ v: -2 }, ...history, { v: 7 }, { v: 8 }, { v: 9 }];
    expect(memo.of(next)).toEqual(plain(sum, next));
    expect(memo.counts).toEqual({ extended: 2, folded: 1 });
  });

  it('corrects up to its limit of positions holding other objects, and folds from the start beyond it', () => {
    const memo = new PrefixMemo(sum, 2);
    const base = items(100);
    memo.of(base);
    const two = base.map((item, i) => (i === 3 || i === 50 ? { v: item.v * 10 } : item));
    expect(memo.of(two)).toEqual(plain(sum, two));
    expect(memo.counts).toEqual({ extended: 1, folded: 1 });
    const three = two.map((item, i) => (i === 0 || i === 1 || i === 2 ? { v: 99 } : item));
    expect(memo.of(three)).toEqual(plain(sum, three));
    expect(memo.counts).toEqual({ extended: 1, folded: 2 });
  });

  it('never takes a mismatch for an exact fold: one without remove reuses exact prefixes only', () => {
    expect(() => new PrefixMemo(sequence, 1)).toThrow(/remove/);
    const memo = new PrefixMemo(sequence);
    const base = items(50);
    memo.of(base);
    const changed = base.map((item, i) => (i === 10 ? { v: -10 } : item));
    expect(memo.of(changed)).toEqual(plain(sequence, changed));
    expect(memo.counts.folded).toBe(2);
  });

  it('does not trust an array the caller changed after the fold', () => {
    const memo = new PrefixMemo(sequence);
    const list = items(20);
    memo.of(list);
    list[5] = { v: 555 };
    expect(memo.of(list)).toEqual(plain(sequence, list));
  });

  it('gives the caller a state of its own', () => {
    const memo = new PrefixMemo(sequence);
    const list = items(10);
    memo.of(list).push(-1);
    expect(memo.of(list)).toEqual(plain(sequence, list));
  });

  it('looks for a remembered fold only near the end: a list far longer is folded from the start, with the same result', () => {
    const memo = new PrefixMemo(sequence);
    const list = items(10);
    memo.of(list);
    const longer = [...list, ...items(PROBES + 2, 100)];
    expect(memo.of(longer)).toEqual(plain(sequence, longer));
    expect(memo.counts.folded).toBe(2);
    expect(memo.of([])).toEqual([]);
  });

  it('gives the plain fold for random lists that share, extend, shorten and change each other', () => {
    const memo = new PrefixMemo(sum, 3);
    const exact = new PrefixMemo(sequence);
    const pool = items(40);
    let seed = 7;
    const random = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31;
      return seed % n;
    };
    let list: Item[] = [];
    for (let step = 0; step < 2000; step += 1) {
      const action = random(5);
      if (action === 0) list = [...list, ...Array.from({ length: 1 + random(4) }, () => pool[random(pool.length)]!)];
      else if (action === 1) list = list.slice(0, random(list.length + 1));
      else if (action === 2 && list.length > 0) list = list.map((item, i) => (i === random(list.length) ? pool[random(pool.length)]! : item));
      else if (action === 3) list = [{ v: random(1000) }, ...list.slice(1)];
      else list = [...list, { v: random(1000) }];
      expect(memo.of(list)).toEqual(plain(sum, list));
      expect(exact.of(list)).toEqual(plain(sequence, list));
    }
    expect(memo.counts.extended).toBeGreaterThan(500);
  });
});
