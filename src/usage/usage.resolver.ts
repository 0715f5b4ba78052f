import { Arg, Authorized, Ctx, Extensions, Int, Mutation, Query, Resolver } from 'type-graphql';
import { Role } from '../auth/roles';
import type { GraphQLContext } from '../graphql/context';
import { CATALOGUE_ROWS, listRows } from '../graphql/query-limits';
import { DateTimeScalar } from '../graphql/scalars';
import { UnauthenticatedError } from '../shared/errors';
import { MAX_USAGE_ROWS } from './usage.service';
import {
  BudgetStatus,
  RemainingBudget,
  toBudgetStatus,
  toBudgetWindow,
  toUsageRow,
  toUsageTotals,
  toUserBudget,
  UsageDimension,
  UsageRow,
  UsageTotals,
  UserBudget,
  UserBudgetInput,
} from './usage.types';

@Resolver()
export class UsageResolver {
  @Authorized(Role.ADMIN)
  @Query(() => UserBudget, { nullable: true, description: 'The budget that applies to a TYPO3 backend user: the first of theirs that is neither deleted nor hidden.' })
  async userBudget(@Ctx() { services }: GraphQLContext, @Arg('beUser', () => Int) beUser: number): Promise<UserBudget | null> {
    const row = await services.usage.budget(beUser);
    return row ? toUserBudget(row) : null;
  }

  @Authorized(Role.ADMIN)
  @Extensions(listRows(CATALOGUE_ROWS))
  @Query(() => [UserBudget], { description: 'Every backend user\'s budget, by backend user.' })
  async userBudgets(@Ctx() { services }: GraphQLContext): Promise<UserBudget[]> {
    return (await services.usage.budgets()).map(toUserBudget);
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => UserBudget, { description: 'Creates the backend user\'s budget, or changes the one that applies; TYPO3 reads the same row.' })
  async setUserBudget(@Ctx() { services }: GraphQLContext, @Arg('beUser', () => Int) beUser: number, @Arg('input', () => UserBudgetInput) input: UserBudgetInput): Promise<UserBudget> {
    return toUserBudget(await services.usage.setBudget(beUser, input));
  }

  @Authorized(Role.ADMIN)
  @Mutation(() => Boolean, { description: 'Deletes the backend user\'s budgets (marked deleted, as TYPO3 does); false when there was none.' })
  async deleteUserBudget(@Ctx() { services }: GraphQLContext, @Arg('beUser', () => Int) beUser: number): Promise<boolean> {
    return services.usage.deleteBudget(beUser);
  }

  @Authorized(Role.VIEWER)
  @Query(() => BudgetStatus, { description: 'Used and limit per day and per month for a backend user (an ADMIN for anyone; others for their own token\'s beUser).' })
  async budgetStatus(@Ctx() { services, caller }: GraphQLContext, @Arg('beUser', () => Int) beUser: number): Promise<BudgetStatus> {
    if (!caller) throw new UnauthenticatedError('Authentication required');
    return toBudgetStatus(await services.usage.budgetStatus(beUser, caller));
  }

  @Authorized(Role.VIEWER)
  @Query(() => RemainingBudget, { description: 'What the calling token may still spend today and this month, and, when named, what a configuration\'s daily caps leave.' })
  async remainingBudget(@Ctx() { services, caller }: GraphQLContext, @Arg('configuration', () => String, { nullable: true }) configuration?: string | null): Promise<RemainingBudget> {
    if (!caller) throw new UnauthenticatedError('Authentication required');
    const result = await services.usage.remainingBudget(caller, configuration ?? null);
    return {
      beUser: caller.beUser,
      user: result.user ? toBudgetStatus(result.user) : null,
      configuration: result.configuration ? { configuration: result.configuration.configuration.identifier, day: toBudgetWindow(result.configuration.day) } : null,
    };
  }

  @Authorized(Role.ADMIN)
  @Query(() => [UsageRow], {
    description:
      'The usage ledger (`tx_nrllm_service_usage`, TYPO3\'s rows included) summed per group over the local days from `from` to `to` (both included, at most 366). With DAY every day is there for each group, zeros included. Groups are ranked by cost, then tokens; `limit` rows at most (whole day series).',
  })
  async usage(
    @Ctx() { services }: GraphQLContext,
    @Arg('from', () => DateTimeScalar) from: Date,
    @Arg('to', () => DateTimeScalar) to: Date,
    @Arg('groupBy', () => [UsageDimension], { defaultValue: [UsageDimension.DAY] }) groupBy: UsageDimension[],
    @Arg('limit', () => Int, { defaultValue: MAX_USAGE_ROWS }) limit: number,
  ): Promise<UsageRow[]> {
    return (await services.usage.usage(from, to, groupBy, limit)).map(toUsageRow);
  }

  @Authorized(Role.ADMIN)
  @Query(() => UsageTotals, { description: 'The ledger\'s sums over the local days from `from` to `to`; every `usage` grouping of the same range sums to these.' })
  async usageTotals(@Ctx() { services }: GraphQLContext, @Arg('from', () => DateTimeScalar) from: Date, @Arg('to', () => DateTimeScalar) to: Date): Promise<UsageTotals> {
    return toUsageTotals(await services.usage.totals(from, to));
  }
}
