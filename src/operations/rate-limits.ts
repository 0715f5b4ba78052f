/**
 * Per-token rate limits on `startRun` and on every other mutation (api.md:
 * 120 and 600 a minute by default, per role through RATE_LIMIT_*). The
 * budgets live in memory, or in Redis when REDIS_URL is set, so that every
 * instance on one database draws from the same budget. Reads, subscriptions
 * and health probes are never limited.
 *
 * A Redis that is down or slow never holds up a request: the limiter answers
 * from an in-memory budget of the same size until Redis is back.
 */
import { HeaderMap } from '@apollo/server';
import { getOperationAST, GraphQLError, Kind, type DocumentNode, type FragmentDefinitionNode, type SelectionSetNode } from 'graphql';
import type Redis from 'ioredis';
import { RateLimiterMemory, RateLimiterRedis, RateLimiterRes, type RateLimiterAbstract } from 'rate-limiter-flexible';
import type { Caller } from '../auth/roles';
import type { RateLimitConfig, RateLimitRole } from '../config';
import type { Logger } from '../logger';

export type LimitName = 'start_run' | 'writes';

/** The mutations that start a run: they draw from the `startRun` budget. */
const RUN_STARTING_MUTATIONS: ReadonlySet<string> = new Set(['startRun', 'runTask']);

/** The mutations a document runs, as points against each limit. */
export function mutationPoints(document: DocumentNode, operationName?: string | null): Record<LimitName, number> {
  const points: Record<LimitName, number> = { start_run: 0, writes: 0 };
  const operation = getOperationAST(document, operationName ?? undefined);
  if (operation?.operation !== 'mutation') return points;
  const fragments = new Map<string, FragmentDefinitionNode>();
  for (const definition of document.definitions) if (definition.kind === Kind.FRAGMENT_DEFINITION) fragments.set(definition.name.value, definition);
  const visited = new Set<string>();
  const count = (selectionSet: SelectionSetNode) => {
    for (const selection of selectionSet.selections) {
      if (selection.kind === Kind.FIELD) {
        if (selection.name.value === '__typename') continue;
        points[RUN_STARTING_MUTATIONS.has(selection.name.value) ? 'start_run' : 'writes'] += 1;
      } else if (selection.kind === Kind.INLINE_FRAGMENT) {
        count(selection.selectionSet);
      } else {
        const name = selection.name.value;
        const fragment = fragments.get(name);
        if (fragment && !visited.has(name)) {
          visited.add(name);
          count(fragment.selectionSet);
        }
      }
    }
  };
  count(operation.selectionSet);
  return points;
}

export interface RateLimitStore {
  redis: Redis;
  /** Instances on one database share it; others never do. */
  keyPrefix: string;
}

export class RateLimits {
  private readonly limiters = new Map<string, RateLimiterAbstract>();

  constructor(
    private readonly config: RateLimitConfig,
    private readonly store: RateLimitStore | null,
    private readonly logger: Logger,
  ) {}

  /**
   * Takes the document's mutations from the caller's budgets. Answers the
   * error to send when a budget is spent (nothing runs then), else null.
   */
  async refusal(caller: Caller | null, document: DocumentNode, operationName?: string | null): Promise<GraphQLError | null> {
    // A request without a valid token is refused by the resolvers anyway; it spends no budget.
    if (!caller) return null;
    const points = mutationPoints(document, operationName);
    const key = String(caller.tokenUid);
    const spent: { limiter: RateLimiterAbstract; points: number }[] = [];
    for (const limit of ['start_run', 'writes'] as const) {
      if (points[limit] === 0) continue;
      const allowed = this.allowance(limit, caller.role);
      if (allowed === 0) continue;
      const limiter = this.limiter(limit, caller.role, allowed);
      try {
        await limiter.consume(key, points[limit]);
        spent.push({ limiter, points: points[limit] });
      } catch (rejection) {
        if (!(rejection instanceof RateLimiterRes)) {
          this.logger.warn({ err: rejection }, 'the rate limiter failed; the request is let through');
          continue;
        }
        // A refused document runs nothing, so it spends nothing: the points just taken go back.
        spent.push({ limiter, points: points[limit] });
        await Promise.all(spent.map((taken) => taken.limiter.reward(key, taken.points).catch(() => undefined)));
        return tooManyRequests(limit, allowed, this.config.windowSeconds, rejection.msBeforeNext);
      }
    }
    return null;
  }

  private allowance(limit: LimitName, role: RateLimitRole): number {
    return limit === 'start_run' ? this.config.startRun[role] : this.config.writes[role];
  }

  private limiter(limit: LimitName, role: RateLimitRole, points: number): RateLimiterAbstract {
    const key = `${limit}:${role}`;
    let limiter = this.limiters.get(key);
    if (!limiter) {
      const duration = this.config.windowSeconds;
      const memory = new RateLimiterMemory({ points, duration, keyPrefix: key });
      limiter = this.store
        ? new RateLimiterRedis({
            storeClient: this.store.redis,
            keyPrefix: `${this.store.keyPrefix}:${key}`,
            points,
            duration,
            // Redis down or not yet connected: answer from memory at once rather than wait.
            rejectIfRedisNotReady: true,
            insuranceLimiter: memory,
          })
        : memory;
      this.limiters.set(key, limiter);
    }
    return limiter;
  }
}

const OPERATION_WORDS: Record<LimitName, string> = { start_run: 'startRun calls', writes: 'mutations other than startRun' };

/** HTTP 429 with Retry-After over HTTP; the same code and message over graphql-ws. */
function tooManyRequests(limit: LimitName, allowed: number, windowSeconds: number, msBeforeNext: number): GraphQLError {
  const retryAfter = Math.max(1, Math.ceil(msBeforeNext / 1000));
  return new GraphQLError(`Too many ${OPERATION_WORDS[limit]} with this token: at most ${allowed} per ${windowSeconds} s. Retry in ${retryAfter} s.`, {
    extensions: {
      code: 'TOO_MANY_REQUESTS',
      retryAfter,
      limit,
      http: { status: 429, headers: new HeaderMap([['retry-after', String(retryAfter)]]) },
    },
  });
}
