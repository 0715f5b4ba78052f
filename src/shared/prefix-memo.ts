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
 * What is kept: per list folded, a copy of it, its state and the state
 * before its last item, under those two items (weakly: it goes with its
 * objects). A fold that extends a remembered one takes its place, so a
 * growing conversation keeps one per memo, not one per turn; it takes over
 * that one's states and its copy of the list too (the copy cut and
 * extended), instead of copying them again.
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

/** One remembered fold: the list as it was folded (the memo's own copy), its state, and the state before its last item. */
interface Remembered<T, S> {
  list: readonly T[];
  atEnd: S;
  beforeEnd: S | null;
}

export class PrefixMemo<T extends object, S> {
  /** Each remembered fold under its last two items. */
  private readonly byEnd = new WeakMap<T, Remembered<T, S>>();
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
    /** The state before the last item, when the remembered fold had this very list (an exact hit keeps it). */
    let knownBeforeEnd: S | null = null;
    /** The remembered fold taken over: its copy of the list becomes this list's (see below). */
    let taken: { list: T[]; differing: readonly number[] } | null = null;
    for (let end = n; end >= Math.max(1, n - PROBES) && state === null; end -= 1) {
      const remembered = this.byEnd.get(list[end - 1]!);
      if (!remembered) continue;
      const length = remembered.list.length;
      const known = end === length ? remembered.atEnd : end === length - 1 ? remembered.beforeEnd : null;
      if (known === null) continue;
      const differing = this.differing(remembered.list, list, end);
      if (differing === null) continue;
      if (end === n && end === length && remembered.beforeEnd !== null) {
        knownBeforeEnd = this.fold.copy(remembered.beforeEnd);
        this.correct(knownBeforeEnd, remembered.list, list, differing, n - 1);
      }
      // Taken over: the fold made below replaces it (one remembered fold per growing list, not one per turn).
      // Nothing else holds its states or its list, so they are used as they are instead of copied.
      state = known;
      this.correct(state, remembered.list, list, differing, end);
      from = end;
      this.byEnd.delete(remembered.list[length - 1]!);
      if (length >= 2) this.byEnd.delete(remembered.list[length - 2]!);
      taken = { list: remembered.list as T[], differing };
    }
    if (state === null) {
      state = this.fold.empty();
      this.counts.folded += 1;
    } else {
      this.counts.extended += 1;
    }
    for (let i = from; i < n - 1; i += 1) this.fold.add(state, list[i]!);
    const beforeEnd = from < n ? (n >= 2 ? this.fold.copy(state) : null) : knownBeforeEnd;
    if (from < n) this.fold.add(state, list[n - 1]!);
    // A copy of the list is kept: the caller may change its array later (a copy of references, no item touched).
    // Taken over, the remembered copy is made this list's: cut where this one goes on, its other objects replaced, the rest added.
    let kept: T[];
    if (taken) {
      kept = taken.list;
      kept.length = from;
      for (const i of taken.differing) if (i < from) kept[i] = list[i]!;
      for (let i = from; i < n; i += 1) kept.push(list[i]!);
    } else {
      kept = list.slice();
    }
    const remembered: Remembered<T, S> = { list: kept, atEnd: this.fold.copy(state), beforeEnd };
    this.byEnd.set(list[n - 1]!, remembered);
    if (n >= 2) this.byEnd.set(list[n - 2]!, remembered);
    return state;
  }

  /** Takes the remembered list's items out of `state` and this list's in, at the differing positions below `end`. */
  private correct(state: S, remembered: readonly T[], list: readonly T[], differing: readonly number[], end: number): void {
    for (const i of differing) {
      if (i >= end) break;
      this.fold.remove!(state, remembered[i]!);
      this.fold.add(state, list[i]!);
    }
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
