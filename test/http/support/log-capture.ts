/** The service's own logger (with its redaction rules), writing into memory instead of stdout. */
import { createLogger, type Logger } from '../../../src/logger';

export interface CapturedLog {
  logger: Logger;
  /** Every line written so far, as one string. */
  text(): string;
  /** The lines parsed as JSON objects. */
  entries(): Record<string, unknown>[];
}

export function captureLog(level = 'trace'): CapturedLog {
  const lines: string[] = [];
  const logger = createLogger(level, { write: (line: string) => void lines.push(line) });
  return {
    logger,
    text: () => lines.join(''),
    entries: () => lines.map((line) => JSON.parse(line) as Record<string, unknown>),
  };
}
