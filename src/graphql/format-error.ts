import { GraphQLError, type GraphQLFormattedError } from 'graphql';
import { unwrapResolverError } from '@apollo/server/errors';
import { ArgumentValidationError } from 'type-graphql';
import type { Logger } from '../logger';
import { AppError, DatabaseBusyError, isDatabaseBusy } from '../shared/errors';

const CLIENT_CODES = new Set(['GRAPHQL_PARSE_FAILED', 'GRAPHQL_VALIDATION_FAILED', 'BAD_USER_INPUT', 'PERSISTED_QUERY_NOT_FOUND', 'PERSISTED_QUERY_NOT_SUPPORTED', 'OPERATION_RESOLUTION_FAILURE', 'BAD_REQUEST']);

/**
 * The one place errors are mapped for clients: our error classes keep their
 * code and message; validation errors name the field; anything else is
 * logged and masked, so SQL, stacks and secrets never reach a client.
 */
export function createErrorFormatter(logger: Logger) {
  return (formatted: GraphQLFormattedError, error: unknown): GraphQLFormattedError => {
    const unwrapped = unwrapResolverError(error);
    // An error raised outside a resolver (graphql-ws's hooks) may carry one of ours without a path.
    const original = unwrapped instanceof GraphQLError && unwrapped.originalError instanceof AppError ? unwrapped.originalError : unwrapped;
    const path = formatted.path;
    const locations = formatted.locations;
    if (original instanceof AppError) {
      return {
        message: original.message,
        locations,
        path,
        extensions: { ...original.details, code: original.code, ...(original.field ? { field: original.field } : {}), ...(original instanceof DatabaseBusyError ? { retryable: true } : {}) },
      };
    }
    if (isDatabaseBusy(original)) {
      // Another process holds the database's write lock: nothing was written, and a retry will do.
      return { message: 'The database is busy with another writer; nothing was changed. Try again shortly.', locations, path, extensions: { code: 'SERVICE_UNAVAILABLE', retryable: true } };
    }
    // class-validator's own failure (not a list of findings) is the server's fault: it is logged below.
    if (original instanceof ArgumentValidationError && Array.isArray(original.extensions.validationErrors)) {
      const first = original.extensions.validationErrors[0];
      const field = first ? fieldPath(first) : undefined;
      const messages = original.extensions.validationErrors.flatMap(flattenConstraints);
      return {
        message: `Invalid input: ${messages.join('; ')}`,
        locations,
        path,
        extensions: { code: 'BAD_USER_INPUT', ...(field ? { field } : {}) },
      };
    }
    const code = String(formatted.extensions?.code ?? '');
    if (code === 'TOO_MANY_REQUESTS') {
      // A spent rate-limit budget (src/operations/rate-limits.ts): the message says when to retry.
      return { message: formatted.message, locations, path, extensions: { code, retryAfter: formatted.extensions?.retryAfter } };
    }
    // api.md allows six codes only; a query that does not parse or validate
    // (unknown field, too deep, introspection switched off) is bad input.
    if (CLIENT_CODES.has(code)) {
      const field = formatted.extensions?.field;
      return { ...formatted, extensions: { code: 'BAD_USER_INPUT', ...(typeof field === 'string' ? { field } : {}) } };
    }
    // Apollo's own refusals of a request (an APQ hash that does not match its query …) carry a 4xx status and no code.
    const requestRefusal = clientRequestRefusal(original);
    if (requestRefusal) return { message: requestRefusal, locations, path, extensions: { code: 'BAD_USER_INPUT' } };
    logger.error({ err: original, path }, 'unexpected error in a GraphQL operation');
    return { message: 'Internal server error; it has been logged. Try again, and report it if it persists.', locations, path, extensions: { code: 'INTERNAL_SERVER_ERROR' } };
  };
}

interface ValidationErrorLike {
  property: string;
  constraints?: Record<string, string>;
  children?: ValidationErrorLike[];
}

function fieldPath(error: ValidationErrorLike): string {
  const child = error.children?.[0];
  return child ? fieldPath(child) : error.property;
}

function flattenConstraints(error: ValidationErrorLike): string[] {
  return [...Object.values(error.constraints ?? {}), ...(error.children ?? []).flatMap(flattenConstraints)];
}

/** Messages said better for a client developer. */
const REQUEST_REFUSAL_MESSAGES: Record<string, string> = {
  'provided sha does not match query':
    'extensions.persistedQuery.sha256Hash does not match the query sent with it (it must be the lower-case hex SHA-256 of the query text).',
};

/** The message of an error the HTTP layer raised about the request itself (a GraphQLError with a 4xx status, no code, no cause), or null. */
function clientRequestRefusal(error: unknown): string | null {
  if (!(error instanceof GraphQLError) || error.originalError || error.extensions.code !== undefined) return null;
  const http = error.extensions.http as { status?: unknown } | undefined;
  const status = typeof http?.status === 'number' ? http.status : 0;
  if (status < 400 || status >= 500) return null;
  return REQUEST_REFUSAL_MESSAGES[error.message] ?? error.message;
}
