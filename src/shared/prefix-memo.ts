/**
 * Folds over lists that grow at their end, each fold remembered so that the
 * next, longer list folds only what it adds: the performance trick behind a
 * conversation's history (its replay, its digest and its share of the token
 * estimate), in this one module.
 *
 * Why: a conversation sends its whole history on every turn, so a turn of a
 * long conversation walked every stored message several times. Few
 * instructions, but each walk touches a thousand objects spread over the
 * heap; measured inside a turn that cost 150–250 ns a message and walk
 * (bench/conversations.ts, 500 stored turns), far more than the same loop in
 * a microbenchmark whose objects sit in the CPU's cache.
 *
 * How a remembered fold is found and trusted: by one of the list's last few
 * objects (`PROBES`: the object a remembered fold ended with, or the one
 * before it), then the remembered list is compared with this one element by
 * element, by identity: two arrays of references, no message touched. A memo
 * made with `mismatches > 0` (for sums, whose `remove` takes an item's share
 * back) also takes a remembered list that holds other objects at up to that
 * many positions, and corrects the state for each (a run's assembled
 * messages differ from the last turn's in their first messages: the system
 * prompt and the user message carrying the skill block are made again).
 * Anything else is folded from the start: a result never depends on what was
 * remembered, only its cost does.
 *
 * What is kept: per list, its state and the state before its last item,
 * keyed by those items (weakly: a list's entries go with its objects). A fold
 * that extends a remembered one takes its entry over, so a conversation keeps
 * one entry per memo rather than one per turn.
 */

/** What a memo folds: states are changed in place by `add`; `copy` makes one that later adds leave alone. */
export interface Fold<T, S> {
  empty(): S;
  copy(state: S): S;
  add(state: S, item: T): void;
  /** Takes an item's share back out (sums only): what lets a memo correct a mismatch. */
  remove?(state: S, item: T): void;
}

/** How far from a list's end its remembered prefix is looked for (a turn adds its user message, the answer and the next prompt). */
export const PROBES = 8;

interface Entry<T, S> {
  list: readonly T[];
  /** The state after list[0..length). */
  length: number;
  state: S;
}

export class PrefixMemo<T extends object, S> {
  private readonly byEnd = new WeakMap<T, Entry<T, S>>();
  /** How the folds went (tests): extended a remembered fold, folded from the start. */
  readonly counts = { extended: 0, folded: 0 };

  constructor(
    private readonly fold: Fold<T, S>,
    /** Positions at which a remembered list may hold another object (0 unless the fold has `remove`). */
    private readonly mismatches = 0,
  ) {
    if (mismatches > 0 && !fold.remove) throw new Error('a prefix memo corrects mismatches only with a fold that can remove');
  }

  /** The fold over `list`: a state of the caller's own. */
  of(list: readonly T[]): S {
    const n = list.length;
    if (n === 0) return this.fold.empty();
    let state: S | null = null;
    let from = 0;
    for (let end = n; end >= Math.max(1, n - PROBES) && state === null; end -= 1) {
      const entry = this.byEnd.get(list[end - 1]!);
      if (!entry || entry.length !== end) continue;
      const differing = this.differing(entry.list, list, end);
      if (differing === null) continue;
      state = this.fold.copy(entry.state);
      for (const i of differing) {
        this.fold.remove!(state, entry.list[i]!);
        this.fold.add(state, list[i]!);
      }
      from = end;
      // Taken over: the entries made below replace it (one entry per growing list, not one per fold).
      if (end < n - 1) this.byEnd.delete(list[end - 1]!);
    }
    if (state === null) {
      state = this.fold.empty();
      this.counts.folded += 1;
    } else {
      this.counts.extended += 1;
    }
    // A copy of the list is kept: the caller may change its array later (a copy of references, no item touched).
    const kept = list.slice();
    for (let i = from; i < n - 1; i += 1) this.fold.add(state, list[i]!);
    if (from < n) {
      if (n >= 2) this.byEnd.set(list[n - 2]!, { list: kept, length: n - 1, state: this.fold.copy(state) });
      this.fold.add(state, list[n - 1]!);
    }
    this.byEnd.set(list[n - 1]!, { list: kept, length: n, state: this.fold.copy(state) });
    return state;
  }

  /** The positions below `end` where the lists hold other objects; null when more than the memo corrects. */
  private differing(remembered: readonly T[], list: readonly T[], end: number): number[] | null {
    const found: number[] = [];
    for (let i = 0; i < end; i += 1) {
      if (remembered[i] === list[i]) continue;
      if (found.length === this.mismatches) return null;
      found.push(i);
    }
    return found;
  }
}
