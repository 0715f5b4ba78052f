/**
 * Run statuses as `tx_nrllm_agentrun.status` holds them. nr_llm writes its
 * own values in lower case (`queued`, `running`, `waiting_for_approval`,
 * `waiting_for_input`, `completed`, `failed`, `cancelled`); the service does
 * the same, and speaks upper case inside (the GraphQL enum's names). A row
 * may hold anything (older versions of this service wrote upper case, a
 * newer nr_llm may add states): reading never fails.
 */
import type { ValueTransformer } from 'typeorm';
import { OPEN_RUN_STATES, RUN_STATES, type RunState } from './engine/run-machine';

/**
 * The stored values that mean one of `states`, for SQL that compares the
 * column itself: nr_llm's lower case and the upper case older versions of
 * this service wrote (SQLite compares case-sensitively).
 */
export function storedSpellings(...states: RunState[]): string[] {
  return [...states.map((state) => state.toLowerCase()), ...states];
}

/** The stored values that mean a run is still open. */
export const OPEN_STORED_STATUSES: readonly string[] = storedSpellings(...OPEN_RUN_STATES);

/** What the service writes for a status: nr_llm's value. */
export function storedRunStatus(status: RunState): string {
  return status.toLowerCase();
}

/**
 * A stored value as the service reads it: upper case, trimmed. nr_llm's
 * waiting states and unknown values come through as they are (upper-cased),
 * so code comparing with `QUEUED`/`RUNNING` leaves those runs alone.
 */
export function readRunStatus(value: unknown): string {
  return typeof value === 'string' ? value.trim().toUpperCase() : '';
}

/**
 * The status shown through the API: the known ones as they are; a run nr_llm
 * keeps waiting for input (`waiting_for_input`, which this service does not
 * have) is not finished, so RUNNING; anything else FAILED.
 */
export function publicRunStatus(value: string): RunState {
  switch (value) {
    case 'QUEUED':
    case 'RUNNING':
    case 'WAITING_FOR_APPROVAL':
    case 'COMPLETED':
    case 'FAILED':
    case 'CANCELLED':
      return value;
    case 'WAITING_FOR_INPUT':
      return 'RUNNING';
    default:
      return 'FAILED';
  }
}

/** Every stored value (as `readRunStatus` reads it) the service knows: its own states and nr_llm's `WAITING_FOR_INPUT`. */
export const KNOWN_READ_STATUSES: readonly string[] = [...RUN_STATES, 'WAITING_FOR_INPUT'];

/**
 * Which read values the API shows as one of `statuses`, derived from
 * `publicRunStatus` so a filter finds a run exactly when the run shows one of
 * them: the known values that map to them, and whether any unknown value does
 * (those show as FAILED).
 */
export function readStatusesShownAs(statuses: readonly RunState[]): { values: string[]; unknownToo: boolean } {
  const wanted = new Set<string>(statuses);
  return {
    values: KNOWN_READ_STATUSES.filter((value) => wanted.has(publicRunStatus(value))),
    unknownToo: wanted.has(publicRunStatus('')),
  };
}

export const runStatusTransformer: ValueTransformer = {
  to: (value: string | undefined) => (value === undefined ? undefined : value.toLowerCase()),
  from: readRunStatus,
};

/** Whether a stored status (any spelling) is one of a run that has not ended. */
export function isOpenRunStatus(value: unknown): boolean {
  return OPEN_STORED_STATUSES.includes(String(value)) || (OPEN_RUN_STATES as readonly string[]).includes(readRunStatus(value));
}
