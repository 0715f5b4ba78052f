/**
 * The seam between the agent loop and a usage ledger: before every provider
 * call the loop asks for a permit, and after a successful call it books the
 * call with the permit. The loop knows no table and no budget rule; the
 * usage feature implements this (src/usage) and the composition root wires
 * it in. Without a ledger every call is allowed and nothing is booked.
 */
import type { Usage } from '../../providers/adapters/types';

/** Whom and what a run's calls are booked to (nr_llm's aggregation key, less the day and the operation). */
export interface LedgerAccount {
  /** The TYPO3 backend user (0 = none: only the configuration's caps apply). */
  beUser: number;
  /** The calling integration ('' = none). */
  source: string;
  /** The task the run executes (0 = none). */
  taskUid: number;
  configurationUid: number;
  /** The configuration's identifier (telemetry names it). */
  configurationIdentifier: string;
  /** The configuration's daily caps as prepared (0 = unlimited), counted over all users. */
  configurationCaps: { requests: number; tokens: number; cost: number };
  modelUid: number;
  /** The model id the calls name. */
  modelId: string;
  /** The provider's adapter type (`openai`, `anthropic`, …); '' when unknown. */
  providerType: string;
}

/** Builds a run's ledger (the usage feature implements it; the composition root passes it to runs). */
export interface CallLedgerFactory {
  /** `runUuid` correlates the run's telemetry rows. */
  forRun(account: LedgerAccount, runUuid: string): CallLedger;
}

/** The call about to be made. */
export interface LedgerCall {
  /** `tools` when the call offers tools, otherwise `chat`. */
  serviceType: 'tools' | 'chat';
}

/** What the loop measured of a successful call. */
export interface CallFacts {
  /** The provider call's own duration. */
  latencyMs: number;
  /** The model the provider says answered ('' when it does not say). */
  responseModel: string;
}

/** A call that may go; exactly one of `book` or `release` follows. */
export interface CallPermit {
  allowed: true;
  /** After a successful call: its usage and cost (null = unpriced). Never rejects: a failure to book is logged. */
  book(usage: Usage, estimatedCost: number | null, facts: CallFacts): Promise<void>;
  /** The call failed (`error`: why; its class is logged as telemetry, never its message) or was not made (no error): nothing is booked. Never rejects. */
  release(error?: unknown): Promise<void>;
}

/** A call that must not go: the run ends `budget_exhausted` with `message`. */
export interface CallRefusal {
  allowed: false;
  /** Names the limit: `AI budget exhausted: daily request count is at 2 of 2`. */
  message: string;
}

export interface CallLedger {
  /**
   * Before a provider call. Never rejects: a ledger that cannot be read
   * refuses the call (enforcement fails closed).
   */
  check(call: LedgerCall): Promise<CallPermit | CallRefusal>;
}

/** The permit of a run without a ledger. */
const UNMETERED: CallPermit = { allowed: true, book: () => Promise.resolve(), release: () => Promise.resolve() };

/** Asks the run's ledger, if it has one. */
export function askLedger(ledger: CallLedger | undefined, toolsOffered: boolean): Promise<CallPermit | CallRefusal> {
  return ledger ? ledger.check({ serviceType: toolsOffered ? 'tools' : 'chat' }) : Promise.resolve(UNMETERED);
}
