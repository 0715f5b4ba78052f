import type { Caller } from '../auth/roles';
import type { AnswerBudget } from '../shared/answer-budget';
import type { Logger } from '../logger';
import type { Services } from '../services';
import type { Loaders } from './loaders';

/** What every resolver receives: who is calling, the services, and this request's loaders. */
export interface GraphQLContext {
  caller: Caller | null;
  /** Set when a token was sent but is not valid, so the error can say so. */
  authProblem: string | null;
  services: Services;
  loaders: Loaders;
  logger: Logger;
  requestId: string;
  /** What the answer may still weigh (MAX_RESPONSE_BYTES): readers of large rows charge it (shared/answer-budget). */
  answer: AnswerBudget;
  /**
   * The request's trace span when traces are exported (opaque: only the
   * tracing module reads it); a run started by this request hangs below it.
   */
  trace?: unknown;
}
