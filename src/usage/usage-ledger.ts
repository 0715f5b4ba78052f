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
import type { CallLedger, CallLedgerFactory, CallPermit, CallRefusal, LedgerAccount, LedgerCall } from '../runs';
import { InFlightCalls, type Reservation } from './in-flight-calls';
import { checkBudgets, hasAnyLimit, modelIdOf, serviceProviderOf, sourceExtensionOf, UsageDayClock, type UsageSums } from './usage-rules';
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

export class UsageLedger implements CallLedgerFactory {
  private readonly clock: UsageDayClock;
  private readonly inFlight = new InFlightCalls();

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

  forRun(account: LedgerAccount): CallLedger {
    return { check: (call) => this.check(account, call) };
  }

  private nowSeconds(): number {
    return Math.floor(this.now() / 1000);
  }

  async check(account: LedgerAccount, call: LedgerCall): Promise<CallPermit | CallRefusal> {
    const configurationLimits = account.configurationUid > 0 && hasAnyLimit(account.configurationCaps) ? account.configurationCaps : null;
    if (account.beUser <= 0 && configurationLimits === null) return this.permit(account, call, null);

    const now = this.nowSeconds();
    const ticket = this.inFlight.beginRead();
    try {
      const snapshot = await this.repository.budgetSnapshot({
        beUser: account.beUser,
        configurationUid: configurationLimits ? account.configurationUid : 0,
        dayStart: this.clock.dayOf(now),
        monthStart: this.clock.monthOf(now),
        now,
      });
      // Calls of this process the read could not see yet count as made.
      const unseenOfUser = account.beUser > 0 ? this.inFlight.unseen(ticket, (other) => other.beUser === account.beUser) : 0;
      const unseenOfConfiguration = configurationLimits ? this.inFlight.unseen(ticket, (other) => other.configurationUid === account.configurationUid) : 0;
      const breach = checkBudgets({
        budget: snapshot.budget,
        userDaily: plus(snapshot.userDaily, unseenOfUser),
        userMonthly: plus(snapshot.userMonthly, unseenOfUser),
        configurationLimits,
        configurationDaily: plus(snapshot.configurationDaily, unseenOfConfiguration),
      });
      if (breach) return { allowed: false, message: breach.message };
      return this.permit(account, call, this.inFlight.reserve(account.beUser, account.configurationUid));
    } catch (error) {
      this.logger.error({ err: error, beUser: account.beUser, configurationUid: account.configurationUid }, 'the usage ledger could not be read; the call is refused');
      return { allowed: false, message: LEDGER_UNAVAILABLE_MESSAGE };
    } finally {
      this.inFlight.endRead(ticket);
    }
  }

  private permit(account: LedgerAccount, call: LedgerCall, reservation: Reservation | null): CallPermit {
    let settled = false;
    return {
      allowed: true,
      book: async (usage, cost) => {
        if (settled) return;
        settled = true;
        try {
          await this.book(account, call, usage, cost);
        } finally {
          if (reservation) this.inFlight.booked(reservation);
        }
      },
      release: () => {
        if (settled) return;
        settled = true;
        if (reservation) this.inFlight.release(reservation);
      },
    };
  }

  /** Books one successful call; a failure is logged, never thrown (the call happened either way). */
  private async book(account: LedgerAccount, call: LedgerCall, usage: Usage, cost: number | null): Promise<void> {
    const now = this.nowSeconds();
    try {
      await this.repository.book(
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
      );
    } catch (error) {
      this.logger.error({ err: error, beUser: account.beUser, configurationUid: account.configurationUid }, 'a provider call could not be booked in the usage ledger');
    }
  }
}
