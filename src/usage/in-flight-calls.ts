/**
 * Calls this process has allowed whose bookings a concurrent budget check
 * cannot see yet: those still under way, and those booked after the check
 * began reading. A check adds them to what it read, so the runs of one
 * process never overshoot a request cap together; two processes can each
 * let one call through on the same last unit (at most one call over per
 * other process, the documented best-effort bound of nr_llm's check).
 */
export interface Reservation {
  readonly beUser: number;
  readonly configurationUid: number;
  /** The event number at which its booking was stored; null while the call runs. */
  bookedAt: number | null;
}

export interface ReadTicket {
  readonly startedAt: number;
}

export class InFlightCalls {
  private events = 0;
  private readonly reservations = new Set<Reservation>();
  private readonly reads = new Set<ReadTicket>();

  /** Before a check reads the ledger. */
  beginRead(): ReadTicket {
    const ticket = { startedAt: ++this.events };
    this.reads.add(ticket);
    return ticket;
  }

  /** The reservations the read may have missed, counted for one scope. */
  unseen(ticket: ReadTicket, inScope: (reservation: Reservation) => boolean): number {
    let count = 0;
    for (const reservation of this.reservations) {
      if ((reservation.bookedAt === null || reservation.bookedAt > ticket.startedAt) && inScope(reservation)) count += 1;
    }
    return count;
  }

  /** After the check compared: bookings every remaining read has seen are forgotten. */
  endRead(ticket: ReadTicket): void {
    this.reads.delete(ticket);
    let oldestRead = Number.POSITIVE_INFINITY;
    for (const read of this.reads) oldestRead = Math.min(oldestRead, read.startedAt);
    for (const reservation of this.reservations) {
      if (reservation.bookedAt !== null && reservation.bookedAt < oldestRead) this.reservations.delete(reservation);
    }
  }

  reserve(beUser: number, configurationUid: number): Reservation {
    const reservation: Reservation = { beUser, configurationUid, bookedAt: null };
    this.reservations.add(reservation);
    return reservation;
  }

  /** Its booking is stored: reads that begin from now on see it. */
  booked(reservation: Reservation): void {
    reservation.bookedAt = ++this.events;
    if (this.reads.size === 0) this.reservations.delete(reservation);
  }

  /** The call failed: nothing was booked. */
  release(reservation: Reservation): void {
    this.reservations.delete(reservation);
  }

  /** Reservations held (tests, metrics). */
  get size(): number {
    return this.reservations.size;
  }
}
