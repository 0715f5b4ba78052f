/**
 * The usage feature and its one front door: nr_llm's usage ledger
 * (`tx_nrllm_service_usage`), the backend users' budgets
 * (`tx_nrllm_user_budget`) and the configurations' daily caps. Runs reach it
 * only through the call-ledger seam (src/runs/engine/call-ledger.ts), which
 * the composition root wires to `ledger`.
 */
import type { DataSource } from 'typeorm';
import type { AppConfig } from '../config';
import type { Dialect } from '../db/data-source';
import type { Logger } from '../logger';
import { UsageLedger } from './usage-ledger';
import { UsageReports, UsageRepository } from './usage.repository';
import { UsageService } from './usage.service';

export { LEDGER_UNAVAILABLE_MESSAGE } from './usage-ledger';
export type { UsageService } from './usage.service';

export interface UsageFeatureDeps {
  dataSource: DataSource;
  dialect: Dialect;
  config: Pick<AppConfig, 'usageTimeZone'>;
  logger: Logger;
  /** Configurations by uid and identifier (their caps and names). */
  configurations: ConstructorParameters<typeof UsageService>[4];
  /** Milliseconds since the epoch; tests fix the clock to book on a chosen day. */
  now?: () => number;
}

export interface UsageFeature {
  /** Checks and books every provider call of a run (handed to the runs feature). */
  ledger: UsageLedger;
  /** Budgets, standings and the ledger's sums (the GraphQL API's). */
  service: UsageService;
}

export function createUsageFeature(deps: UsageFeatureDeps): UsageFeature {
  const repository = new UsageRepository(deps.dataSource, deps.dialect);
  return {
    ledger: new UsageLedger(repository, deps.config.usageTimeZone, deps.logger, deps.now),
    service: new UsageService(repository, new UsageReports(deps.dataSource), deps.config.usageTimeZone, deps.now, deps.configurations),
  };
}
