/**
 * The usage ledger of runs: before every provider call it checks the
 * budgets in nr_llm's order (the user's daily and monthly limits, then the
 * configuration's daily caps) against `tx_nrllm_service_usage`, and after a
 * successful call it books the call on the day's row of its key, so TYPO3
 * and this service spend against one ledger. A ledger that cannot be read
 * refuses the call: enforcement never fails open.
 */
import type { Logger } from '../logger';
import type { Usage } from '../providers/adapters/types';
import type { CallFacts, CallLedger, CallLedgerFactory, CallPermit, CallRefusal, LedgerAccount, LedgerCall } from '../runs';
import { budgetApplies, checkBudgets, hasAnyLimit, modelIdOf, serviceProviderOf, sourceExtensionOf, telemetryRow, UsageDayClock, type CallOutcome, type TelemetryRow, type UsageSums } from './usage-rules';
import type { UsageRepository } from './usage.repository';

/** The refusal when the ledger cannot be read (the database is down, a table is missing). */
export const LEDGER_UNAVAILABLE_MESSAGE = 'AI budget could not be checked (the usage ledger is unavailable); the call was not made.';

/** `estimated_cost` per call: whole micro-dollars, never negative or unreadable. */
function bookedCost(cost: number | null): number {
  if (cost === null || !Number.isFinite(cost) || cost <= 0) return 0;
  return Math.round(cost * 1e6) / 1e6;
}

function plus(sums: UsageSums, requests: number): UsageSums {
  return requests === 0 ? sums : { ...sums, requests: sums.requests + requests };
}

/**
 * How long a call's hold counts when its booking never comes (the instance
 * died mid-call): longer than any provider call takes, short enough that a
 * crash does not block a budget for the rest of the day.
 */
export const HOLD_SECONDS = 15 * 60;
/** How often a process drops expired holds. */
const SWEEP_EVERY_SECONDS = 60;

export class UsageLedger implements CallLedgerFactory {
  private readonly clock: UsageDayClock;
  private lastSweep = 0;

  constructor(
    private readonly repository: UsageRepository,
    timeZone: string,
    private readonly logger: Logger,
    /** Milliseconds since the epoch (tests pass a fixed clock). */
    private readonly now: () => number = Date.now,
  ) {
    this.clock = new UsageDayClock(timeZone);
  }

  get timeZone(): string {
    return this.clock.timeZone;
  }

  forRun(account: LedgerAccount, runUuid: string): CallLedger {
    return { check: (call) => this.check(account, call, runUuid) };
  }

  private nowSeconds(): number {
    return Math.floor(this.now() / 1000);
  }

  /**
   * Reads the budgets and, when a limit applies, holds the call, under the
   * lock of its user and configuration (see UsageRepository.underBudgetLock):
   * the calls let through and not booked yet, in every instance, count as
   * spent requests, so together the instances never let more calls through
   * than a request limit allows.
   */
  async check(account: LedgerAccount, call: LedgerCall, runUuid = ''): Promise<CallPermit | CallRefusal> {
    const configurationLimits = account.configurationUid > 0 && hasAnyLimit(account.configurationCaps) ? account.configurationCaps : null;
    if (account.beUser <= 0 && configurationLimits === null) return this.permit(account, call, null, runUuid);

    const now = this.nowSeconds();
    const scopes = { beUser: Math.max(0, account.beUser), configurationUid: configurationLimits ? account.configurationUid : 0 };
    try {
      const outcome = await this.repository.underBudgetLock(scopes, async (ledger) => {
        const snapshot = await ledger.snapshot({ ...scopes, dayStart: this.clock.dayOf(now), monthStart: this.clock.monthOf(now), now, countHolds: true });
        const breach = checkBudgets({
          budget: snapshot.budget,
          userDaily: plus(snapshot.userDaily, snapshot.heldOfUser),
          userMonthly: plus(snapshot.userMonthly, snapshot.heldOfUser),
          configurationLimits,
          configurationDaily: plus(snapshot.configurationDaily, snapshot.heldOfConfiguration),
        });
        if (breach) return { breach: breach.message, hold: null };
        // No limit applies (a user without a budget, no caps): nothing to hold.
        if (!budgetApplies(snapshot.budget) && configurationLimits === null) return { breach: null, hold: null };
        return { breach: null, hold: await ledger.hold(Math.max(0, account.beUser), Math.max(0, account.configurationUid), now + HOLD_SECONDS) };
      });
      if (outcome.breach !== null) return { allowed: false, message: outcome.breach };
      if (outcome.hold !== null) this.sweepNowAndThen(now);
      return this.permit(account, call, outcome.hold, runUuid);
    } catch (error) {
      this.logger.error({ err: error, beUser: account.beUser, configurationUid: account.configurationUid }, 'the usage ledger could not be read; the call is refused');
      return { allowed: false, message: LEDGER_UNAVAILABLE_MESSAGE };
    }
  }

  private sweepNowAndThen(now: number): void {
    if (now - this.lastSweep < SWEEP_EVERY_SECONDS) return;
    this.lastSweep = now;
    this.repository.sweepHolds(now).catch((error: unknown) => this.logger.warn({ err: error }, 'expired usage holds could not be dropped'));
  }

  private permit(account: LedgerAccount, call: LedgerCall, holdUid: number | null, runUuid: string): CallPermit {
    let settled = false;
    const granted = performance.now();
    return {
      allowed: true,
      book: async (usage, cost, facts: CallFacts) => {
        if (settled) return;
        settled = true;
        const telemetry = telemetryRow({ ...account, runUuid, serviceType: call.serviceType }, { success: true, usage, cost, latencyMs: facts.latencyMs, responseModel: facts.responseModel }, this.nowSeconds());
        await this.book(account, call, usage, cost, holdUid, telemetry);
      },
      release: async (error?: unknown) => {
        if (settled) return;
        settled = true;
        if (holdUid !== null) {
          await this.repository.freeHold(holdUid).catch((failure: unknown) => this.logger.warn({ err: failure, holdUid }, 'a usage hold could not be dropped; it expires'));
        }
        // A call that was made and failed leaves a row; one not made (no error) leaves none.
        if (error !== undefined) await this.recordTelemetry(account, call, runUuid, { success: false, error, latencyMs: performance.now() - granted });
      },
    };
  }

  /** Appends the call's telemetry row; a failure is logged, never thrown. */
  private async recordTelemetry(account: LedgerAccount, call: LedgerCall, runUuid: string, outcome: CallOutcome): Promise<void> {
    try {
      await this.repository.recordTelemetry(telemetryRow({ ...account, runUuid, serviceType: call.serviceType }, outcome, this.nowSeconds()));
    } catch (error) {
      this.logger.error({ err: error, runId: runUuid }, 'a provider call could not be logged in tx_nrllm_telemetry');
    }
  }

  /** Books one successful call with its telemetry row; a failure is logged, never thrown (the call happened either way). */
  private async book(account: LedgerAccount, call: LedgerCall, usage: Usage, cost: number | null, holdUid: number | null, telemetry: TelemetryRow): Promise<void> {
    const now = this.nowSeconds();
    try {
      const { telemetryError } = await this.repository.book(
        {
          serviceType: call.serviceType,
          serviceProvider: serviceProviderOf(account.providerType),
          beUser: Math.max(0, account.beUser),
          configurationUid: Math.max(0, account.configurationUid),
          modelUid: Math.max(0, account.modelUid),
          modelId: modelIdOf(account.modelId),
          taskUid: Math.max(0, account.taskUid),
          sourceExtension: sourceExtensionOf(account.source),
          requestDate: this.clock.dayOf(now),
        },
        { requests: 1, tokens: usage.totalTokens, promptTokens: usage.promptTokens, completionTokens: usage.completionTokens, cost: bookedCost(cost) },
        now,
        holdUid,
        telemetry,
      );
      if (telemetryError) this.logger.error({ err: telemetryError, runId: telemetry.correlationId }, 'a provider call could not be logged in tx_nrllm_telemetry; it is booked in the usage ledger');
    } catch (error) {
      this.logger.error({ err: error, beUser: account.beUser, configurationUid: account.configurationUid }, 'a provider call could not be booked in the usage ledger');
    }
  }
}
