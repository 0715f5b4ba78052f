/**
 * The conversations feature and its one front door: multi-turn chat on
 * nr_llm's `tx_nrllm_ai_session(_message)`, every turn a run.
 *
 * `createConversationsFeature` builds the repository and the service; the
 * composition root hands the runs feature `storeReply` (told of every END)
 * and `history` (a turn's history, read again when its run goes on later),
 * and starts the retention purge with `start()`.
 */
import type { DataSource } from 'typeorm';
import type { ConfigurationService } from '../configurations/configuration.service';
import type { Dialect } from '../db/data-source';
import type { PagingCursors } from '../db/keyset';
import type { Logger } from '../logger';
import type { RunEndedHook, RunService, TraceBus } from '../runs';
import { ConversationRepository } from './conversation.repository';
import { ConversationService } from './conversation.service';

export type { ConversationService } from './conversation.service';
export { createChatEndpoint, type ChatEndpoint } from './chat-endpoint';

/** How often the retention purge runs. */
const PURGE_INTERVAL_MS = 3_600_000;

export interface ConversationsFeature {
  service: ConversationService;
  /** For the runs feature: stores a turn's reply in its run's END transaction. */
  onRunEnded: RunEndedHook;
  /** Purges once now, then every hour, conversations idle longer than the retention. */
  start(): void;
  stop(): void;
}

export function createConversationsFeature(deps: {
  dataSource: DataSource;
  dialect: Dialect;
  configurations: Pick<ConfigurationService, 'findByIdentifier' | 'findDefault'>;
  /** Asked lazily: runs are built after conversations (they read its history). */
  runs: () => RunService;
  /** The bus the runs publish on (asked lazily, as runs). */
  bus: () => TraceBus;
  cursors: PagingCursors;
  logger: Logger;
  retentionDays: number;
}): ConversationsFeature {
  const service = new ConversationService(new ConversationRepository(deps.dataSource, deps.dialect), deps.configurations, deps.runs, deps.bus, deps.cursors, deps.logger);
  let timer: NodeJS.Timeout | null = null;
  const purge = () => {
    service
      .purge(deps.retentionDays)
      .then((deleted) => {
        if (deleted > 0) deps.logger.info({ deleted, retentionDays: deps.retentionDays }, 'purged idle conversations');
      })
      .catch((error: unknown) => deps.logger.warn({ err: error }, 'the conversation purge failed; it runs again in an hour'));
  };
  return {
    service,
    onRunEnded: (manager, _loadRun, ended) => service.storeReply(manager, ended),
    start() {
      purge();
      timer = setInterval(purge, PURGE_INTERVAL_MS);
      timer.unref();
    },
    stop() {
      if (timer) clearInterval(timer);
      timer = null;
    },
  };
}
