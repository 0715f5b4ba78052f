/**
 * What one graphql-ws connection may do, checked on every operation it sends
 * (the HTTP side checks its token on every request anyway):
 *
 * - its token must still be valid. The token is read again through the token
 *   cache, which every revocation empties on every instance; and when a token
 *   is revoked, every socket that authenticated with it is closed at once
 *   with 4403, which ends its open subscriptions;
 * - it may hold at most `perConnection` subscriptions open at once, and its
 *   token at most `perToken` over all its connections to this instance. A
 *   refused subscription gets a graphql-ws error with BAD_USER_INPUT naming
 *   the variable; queries and mutations are not counted.
 *
 * A subscription counts from the moment it is admitted until graphql-ws no
 * longer holds it (completed by either side, failed, or its socket closed);
 * graphql-ws's own record of the connection's operations is the truth, so a
 * path that ends an operation without a hook cannot leak a slot.
 */
import { GraphQLError } from 'graphql';
import type { Caller } from '../auth/roles';
import { type AppError, BadUserInputError, UnauthenticatedError } from '../shared/errors';

/** graphql-ws's 4403: the token is not (or no longer) valid. */
export const FORBIDDEN_CLOSE_CODE = 4403;

export interface SubscriptionLimits {
  perConnection: number;
  perToken: number;
}

/** The part of a socket the guards use. */
export interface ClosableSocket {
  close(code: number, reason: string): void;
}

export interface GuardedConnection {
  readonly tokenUid: number;
  readonly authorization: string;
  readonly socket: ClosableSocket;
  /** graphql-ws's record of the connection's operations in flight, by id. */
  readonly operations: () => Record<string, unknown>;
  /** Admitted subscriptions, by operation id; pruned against `operations`. */
  readonly subscriptions: Set<string>;
  revoked: boolean;
}

export class SocketGuards {
  private readonly byToken = new Map<number, Set<GuardedConnection>>();

  constructor(
    private readonly limits: SubscriptionLimits,
    private readonly authenticate: (authorization: string) => Promise<Caller | null>,
  ) {}

  /** Starts guarding an authenticated connection; call `closed` when its socket closes. */
  opened(connection: Omit<GuardedConnection, 'subscriptions' | 'revoked'>): GuardedConnection {
    const guarded: GuardedConnection = { ...connection, subscriptions: new Set(), revoked: false };
    let set = this.byToken.get(guarded.tokenUid);
    if (!set) this.byToken.set(guarded.tokenUid, (set = new Set()));
    set.add(guarded);
    return guarded;
  }

  closed(connection: GuardedConnection): void {
    const set = this.byToken.get(connection.tokenUid);
    set?.delete(connection);
    if (set?.size === 0) this.byToken.delete(connection.tokenUid);
  }

  /** Closes every socket of a revoked token (on this instance). */
  revoked(tokenUid: number): void {
    for (const connection of this.byToken.get(tokenUid) ?? []) this.refuse(connection);
  }

  /**
   * The caller of the connection now, or null after it was refused (its token
   * revoked meanwhile): the socket is then being closed with 4403.
   */
  async recheck(connection: GuardedConnection): Promise<Caller | null> {
    if (connection.revoked) return null;
    const caller = await this.authenticate(connection.authorization);
    if (caller && caller.tokenUid === connection.tokenUid) return caller;
    this.refuse(connection);
    return null;
  }

  /** Admits subscription `id` on the connection, or gives the error refusing it. */
  admitSubscription(connection: GuardedConnection, id: string): GraphQLError | null {
    const refusal = this.subscriptionRefusal(connection);
    if (refusal) return refusal;
    connection.subscriptions.add(id);
    return null;
  }

  /** The error refusing one more subscription on the connection now, or null; admits nothing (a cheap early check). */
  subscriptionRefusal(connection: GuardedConnection): GraphQLError | null {
    if (openCount(connection) >= this.limits.perConnection) {
      return limitError(
        `This connection already has ${this.limits.perConnection} subscriptions open (MAX_SUBSCRIPTIONS_PER_CONNECTION); complete one before starting another.`,
      );
    }
    let forToken = 0;
    for (const other of this.byToken.get(connection.tokenUid) ?? []) forToken += openCount(other);
    if (forToken >= this.limits.perToken) {
      return limitError(
        `This token already has ${this.limits.perToken} subscriptions open on this server (MAX_SUBSCRIPTIONS_PER_TOKEN); complete some before starting more.`,
      );
    }
    return null;
  }

  private refuse(connection: GuardedConnection): void {
    if (connection.revoked) return;
    connection.revoked = true;
    connection.socket.close(FORBIDDEN_CLOSE_CODE, 'Forbidden: the token was revoked');
  }
}

function openCount(connection: GuardedConnection): number {
  const operations = connection.operations();
  for (const id of connection.subscriptions) if (!(id in operations)) connection.subscriptions.delete(id);
  return connection.subscriptions.size;
}

/** A graphql-ws error carrying one of the service's errors (the formatter gives it its code). */
function asGraphQLError(error: AppError): GraphQLError {
  return new GraphQLError(error.message, { originalError: error });
}

function limitError(message: string): GraphQLError {
  return asGraphQLError(new BadUserInputError(message));
}

/** The error for an operation sent on a connection whose token is no longer valid. */
export function revokedTokenError(): GraphQLError {
  return asGraphQLError(new UnauthenticatedError('The token of this connection is no longer valid (revoked); reconnect with a valid token.'));
}
