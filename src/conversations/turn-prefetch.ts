/**
 * The performance trick of a turn's first reads: the session row, its
 * configuration and its history are read at once instead of one after the
 * other. The configuration and the history depend on the session (its uid,
 * its configuration identifier), so they are started from what this
 * instance saw of the session at its last turn, and used only when the
 * session read now agrees; otherwise they are read again after it, as
 * without the trick. A uuid's session uid never changes, and a changed
 * configuration identifier is caught by that comparison: the guess can
 * cost a wasted read, never a wrong one. The caller's access is checked on
 * the session read before anything started early is used.
 *
 * With a guess, the configuration is read first (as a run reads it), and
 * the session and the history are read while the run is prepared
 * (ConversationService.sendOnGuess); a refusal of the session still comes
 * before the run's own. On SQLite the reads run one after the other anyway.
 */

/** What a turn needs of a session before its other reads. */
export interface SessionKey {
  uid: number;
  configurationIdentifier: string;
}

const MAX_REMEMBERED = 2000;

export class SessionGuesses {
  private readonly seen = new Map<string, SessionKey>();

  constructor(private readonly maxRemembered = MAX_REMEMBERED) {}

  /** The session behind `uuid` as the last turn here saw it; null for one not seen. */
  guess(uuid: string): SessionKey | null {
    return this.seen.get(uuid) ?? null;
  }

  remember(uuid: string, key: SessionKey): void {
    this.seen.delete(uuid);
    this.seen.set(uuid, { uid: key.uid, configurationIdentifier: key.configurationIdentifier });
    // Map order is insertion order: the first entries are the least recent turns.
    for (const oldest of this.seen.keys()) {
      if (this.seen.size <= this.maxRemembered) break;
      this.seen.delete(oldest);
    }
  }

  forget(uuid: string): void {
    this.seen.delete(uuid);
  }
}

/** A read started early, settled so that a guess thrown away never becomes an unhandled rejection. */
export type Early<T> = Promise<PromiseSettledResult<T>>;

export function early<T>(promise: Promise<T>): Early<T> {
  return promise.then(
    (value) => ({ status: 'fulfilled', value }),
    (reason: unknown) => ({ status: 'rejected', reason }),
  );
}
