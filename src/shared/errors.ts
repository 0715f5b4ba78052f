/**
 * The service's one error vocabulary. Services throw these; the GraphQL layer
 * maps each to its `extensions.code` (api.md) and masks everything else.
 */
export type ErrorCode = 'BAD_USER_INPUT' | 'NOT_FOUND' | 'CONFLICT' | 'UNAUTHENTICATED' | 'FORBIDDEN' | 'SUBSCRIBER_LAGGED' | 'SERVICE_UNAVAILABLE';

export abstract class AppError extends Error {
  abstract readonly code: ErrorCode;
  constructor(
    message: string,
    readonly field?: string,
    /** More `extensions` for the client (e.g. the `runId` a conflict is about); never secrets. */
    readonly details?: Readonly<Record<string, string | number | boolean>>,
  ) {
    super(message);
    this.name = new.target.name;
  }
}

export class BadUserInputError extends AppError {
  readonly code = 'BAD_USER_INPUT' as const;
}

export class NotFoundError extends AppError {
  readonly code = 'NOT_FOUND' as const;
}

export class ConflictError extends AppError {
  readonly code = 'CONFLICT' as const;
}

export class UnauthenticatedError extends AppError {
  readonly code = 'UNAUTHENTICATED' as const;
}

export class ForbiddenError extends AppError {
  readonly code = 'FORBIDDEN' as const;
}

/** A live subscriber fell too far behind; it resumes by resubscribing from its last sequence. */
export class SubscriberLaggedError extends AppError {
  readonly code = 'SUBSCRIBER_LAGGED' as const;
}

/**
 * The database could not take a write in time (another process holds its
 * write lock). Nothing was written; the same request may simply be retried.
 */
export class DatabaseBusyError extends AppError {
  readonly code = 'SERVICE_UNAVAILABLE' as const;
  readonly retryable = true;
}

const BUSY_DRIVER_CODES = new Set(['SQLITE_BUSY', 'SQLITE_BUSY_SNAPSHOT', 'SQLITE_LOCKED', 'ER_LOCK_WAIT_TIMEOUT', 'ER_LOCK_DEADLOCK']);

/** A driver error (possibly wrapped by TypeORM) saying the database was busy, not that the request was wrong. */
export function isDatabaseBusy(error: unknown): boolean {
  const candidate = error as { code?: unknown; driverError?: { code?: unknown } } | null;
  const code = candidate?.driverError?.code ?? candidate?.code;
  return typeof code === 'string' && BUSY_DRIVER_CODES.has(code);
}
