/**
 * Parsing provider bodies at the edge (style.md: parse at the edge, trust
 * inside). Schemas are lenient — unknown fields pass, most fields optional —
 * because providers add fields all the time and compatible servers omit
 * some; what the adapter relies on is checked, nothing more.
 */
import type { z } from 'zod/v4';

import { ProviderResponseError, excerptBody } from './errors';
import type { AdapterLogger } from './http';

/** What decoding a provider body needs to know besides the body. */
export interface WireContext {
  provider: string;
  /** Only for redaction. */
  apiKey: string | null;
  logger: AdapterLogger;
  newToolCallId: () => string;
}

export function parseJsonText(text: string, context: WireContext, what: string): unknown {
  try {
    return JSON.parse(text) as unknown;
  } catch (error) {
    throw new ProviderResponseError(
      { provider: context.provider, bodyExcerpt: excerptBody(text, context.apiKey), cause: error },
      `${what} is not JSON`,
    );
  }
}

export function parseWire<Schema extends z.ZodType>(
  schema: Schema,
  value: unknown,
  context: WireContext,
  what: string,
): z.output<Schema> {
  const result = schema.safeParse(value);
  if (result.success) return result.data;
  // Paths and messages only: the values may hold user content.
  const issues = result.error.issues
    .slice(0, 3)
    .map((issue) => `${issue.path.join('.') || '(root)'}: ${issue.message}`)
    .join('; ');
  throw new ProviderResponseError({ provider: context.provider, bodyExcerpt: issues }, `${what} has an unexpected shape`);
}
