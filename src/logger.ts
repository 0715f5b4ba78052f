import pino, { type Logger } from 'pino';

export type { Logger };

/** Longest string kept in a log line (a message, an error message, any value); the rest is cut. */
export const LOG_STRING_LIMIT = 2000;
/** Characters of values one log line may carry in all; past it, values are replaced by a marker. */
export const LOG_LINE_BUDGET = 16_000;
/** Nesting kept in a logged object; deeper values are replaced by a marker. */
const LOG_DEPTH_LIMIT = 6;
/** Items kept of one logged array, keys of one logged object. */
const LOG_ITEMS_LIMIT = 50;

/**
 * Structured JSON logs. Anything that could carry a secret is redacted by path,
 * so a careless `logger.info({ input })` cannot leak a provider key or a token.
 *
 * Every line is bounded, whatever is logged: strings are cut to
 * LOG_STRING_LIMIT characters, and a line carries at most LOG_LINE_BUDGET
 * characters of values (a failed insert of a 20 MB answer used to be logged
 * as three lines of up to 157 MB). Errors are logged by `serializeError`,
 * which never includes a statement's parameters (prompts, answers, keys):
 * only the error's class, code, message and stack, and the statement text
 * with its placeholders.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'promptwire' },
      serializers: { err: serializeError },
      formatters: { log: (object) => boundValue(object, { left: LOG_LINE_BUDGET }, 0) as Record<string, unknown> },
      hooks: {
        logMethod(args, method) {
          method.apply(this, args.map((arg) => (typeof arg === 'string' ? cut(arg) : arg)) as Parameters<typeof method>);
        },
      },
      redact: {
        paths: [
          'apiKey',
          '*.apiKey',
          '*.*.apiKey',
          'api_key',
          '*.api_key',
          'token',
          '*.token',
          'authorization',
          '*.authorization',
          'req.headers.authorization',
          'headers.authorization',
          'connectionParams.authorization',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}

/** Properties of an error worth logging: identifying, never data. */
const ERROR_FIELDS = ['code', 'errno', 'sqlState', 'status', 'kind', 'provider', 'retryable'] as const;

/**
 * An error as a log value: class, message, code-like fields and stack, and
 * its cause, all bounded. Anything else an error carries stays out: TypeORM's
 * `parameters` and the MySQL driver's `sql` (the statement with its values
 * inlined) hold whatever was being written.
 */
export function serializeError(error: unknown, depth = 0): unknown {
  if (!(error instanceof Error)) return typeof error === 'object' && error !== null ? error : { message: cut(String(error)) };
  const out: Record<string, unknown> = { type: error.constructor?.name ?? 'Error', message: cut(error.message) };
  const fields = error as unknown as Record<string, unknown>;
  for (const key of ERROR_FIELDS) {
    const value = fields[key];
    if (typeof value === 'string' || typeof value === 'number' || typeof value === 'boolean') out[key] = typeof value === 'string' ? cut(value) : value;
  }
  // TypeORM's QueryFailedError: the statement (placeholders only) and the driver's code, never the parameters.
  if (typeof fields.query === 'string') out.query = cut(fields.query, 500);
  const driver = fields.driverError as Record<string, unknown> | undefined;
  if (driver && typeof driver === 'object' && typeof driver.code === 'string' && out.code === undefined) out.code = driver.code;
  if (error.stack) out.stack = cut(error.stack.replace(/^[^\n]*\n/, `${out.type as string}: ${out.message as string}\n`), 4000);
  if (error.cause !== undefined && depth < 3) out.cause = serializeError(error.cause, depth + 1);
  return out;
}

function cut(text: string, limit = LOG_STRING_LIMIT): string {
  return text.length <= limit ? text : `${text.slice(0, limit)}… [${text.length - limit} more characters]`;
}

/** A copy of `value` within the line's budget (see createLogger). Errors anywhere are serialised as errors. */
function boundValue(value: unknown, budget: { left: number }, depth: number): unknown {
  if (budget.left <= 0) return '[truncated]';
  if (typeof value === 'string') {
    const kept = cut(value, Math.min(LOG_STRING_LIMIT, Math.max(budget.left, 16)));
    budget.left -= kept.length;
    return kept;
  }
  if (typeof value !== 'object' || value === null) {
    budget.left -= 8;
    return value;
  }
  if (value instanceof Error) return boundValue(serializeError(value), budget, depth);
  if (depth >= LOG_DEPTH_LIMIT) return '[nested too deep]';
  if (Array.isArray(value)) {
    const items = value.slice(0, LOG_ITEMS_LIMIT).map((item) => boundValue(item, budget, depth + 1));
    if (value.length > LOG_ITEMS_LIMIT) items.push(`[${value.length - LOG_ITEMS_LIMIT} more items]`);
    return items;
  }
  if (value instanceof Date) return value;
  const out: Record<string, unknown> = {};
  let kept = 0;
  for (const key of Object.keys(value)) {
    if (kept === LOG_ITEMS_LIMIT) {
      out['…'] = '[more keys]';
      break;
    }
    budget.left -= key.length;
    out[key] = boundValue((value as Record<string, unknown>)[key], budget, depth + 1);
    kept += 1;
  }
  return out;
}
