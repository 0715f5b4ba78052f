import { Entity, Index } from 'typeorm';
import { DecimalColumn, Typo3IntColumn, Typo3StandardFlagColumn, Typo3SwitchColumn, Typo3UidColumn, Typo3UnsignedIntColumn } from '../db/columns';

/**
 * `tx_nrllm_user_budget`: a TYPO3 backend user's daily and monthly ceilings
 * (0 = unlimited). One budget per user is a rule of the application, not of
 * the table (a deleted row keeps its be_user): the first non-deleted,
 * non-hidden row by uid is the user's budget.
 */
@Entity({ name: 'tx_nrllm_user_budget' })
@Index('tx_nrllm_user_budget_parent', ['pid'])
@Index('tx_nrllm_user_budget_be_user', ['beUser'])
export class UserBudgetEntity {
  @Typo3UidColumn({ unsigned: false })
  uid!: number;

  @Typo3IntColumn('pid')
  pid!: number;

  @Typo3UnsignedIntColumn('be_user')
  beUser!: number;

  @Typo3UnsignedIntColumn('max_requests_per_day')
  maxRequestsPerDay!: number;

  @Typo3UnsignedIntColumn('max_tokens_per_day')
  maxTokensPerDay!: number;

  @DecimalColumn('max_cost_per_day', 10, 4, '0.0000')
  maxCostPerDay!: number;

  @Typo3UnsignedIntColumn('max_requests_per_month')
  maxRequestsPerMonth!: number;

  @Typo3UnsignedIntColumn('max_tokens_per_month')
  maxTokensPerMonth!: number;

  @DecimalColumn('max_cost_per_month', 10, 4, '0.0000')
  maxCostPerMonth!: number;

  @Typo3SwitchColumn('is_active', 1)
  isActive!: boolean;

  @Typo3UnsignedIntColumn('tstamp')
  tstamp!: number;

  @Typo3UnsignedIntColumn('crdate')
  crdate!: number;

  @Typo3StandardFlagColumn('deleted')
  deleted!: boolean;

  @Typo3StandardFlagColumn('hidden')
  hidden!: boolean;
}
