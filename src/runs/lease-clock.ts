/**
 * What this process knows of its own run leases, without asking the
 * database: when each run's lease was last written (taken before the
 * statement that wrote it, so never later than the stored `heartbeat_at`).
 *
 * Another instance can claim a run only once its lease is stale
 * (`heartbeat_at < now − leaseSeconds`, see `RunStore.claimOrphan`), that is
 * not before `written + leaseSeconds`. Until then less a safety margin for
 * clocks that disagree between machines, this instance still drives the run
 * and nobody else does: the one thing `mayOverlap` answers. It only ever
 * lets a step's write and the next tool call overlap (`AgentLoopHooks
 * .mayOverlapToolCall`); every step is still written through the lease fence.
 *
 * One claim comes earlier: a cancelRun whose cancel request the run's holder
 * did not hear (`TraceBus.requestCancel` answers 0) takes the run over at
 * once to end it. A holder that did not hear is gone, or cut off from the
 * bus; in the second case it stops at its next step (the fence refuses it).
 */
export class LeaseClock {
  private readonly writtenAt = new Map<number, number>();
  private readonly safeForMs: number;

  constructor(
    leaseSeconds: number,
    private readonly now: () => number = Date.now,
  ) {
    this.safeForMs = leaseSafeForMs(leaseSeconds);
  }

  /** The run's lease was written (taken, claimed, taken back after a decision) by a statement begun at `at`. */
  taken(runUid: number, at: number): void {
    this.writtenAt.set(runUid, at);
  }

  /** A heartbeat begun at `at` renewed these runs' leases (all of them: the caller checked the count); runs no longer held are ignored. */
  renewed(runUids: readonly number[], at: number): void {
    for (const uid of runUids) {
      const known = this.writtenAt.get(uid);
      if (known !== undefined && at > known) this.writtenAt.set(uid, at);
    }
  }

  /** The run is no longer driven here. */
  released(runUid: number): void {
    this.writtenAt.delete(runUid);
  }

  /** Whether no other instance can have claimed the run yet. */
  mayOverlap(runUid: number): boolean {
    const at = this.writtenAt.get(runUid);
    return at !== undefined && this.now() < at + this.safeForMs;
  }
}

/**
 * How long after a lease write this instance may count on still holding it:
 * the lease period less a margin of a third of it (at least 1 s) for clocks
 * that disagree. Heartbeats come every third of a period, so a healthy
 * instance is always inside it; a paused or cut-off one falls out of it
 * before anyone can claim its runs.
 */
export function leaseSafeForMs(leaseSeconds: number): number {
  const leaseMs = leaseSeconds * 1000;
  return Math.max(0, leaseMs - Math.max(1000, leaseMs / 3));
}

/**
 * Whether a lease last renewed at `heartbeatAt` (unix seconds) is stale at
 * `now`: its owner stopped renewing it, and any instance may claim the run
 * (the rule `RunStore.claimOrphan` and `RunStore.orphanedRuns` apply in SQL).
 */
export function leaseIsStale(heartbeatAt: number, now: number, leaseSeconds: number): boolean {
  return heartbeatAt < now - leaseSeconds;
}
