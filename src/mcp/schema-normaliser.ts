/**
 * The argument schema an MCP server advertises, made into the one stored and
 * offered to models (nr_llm's rules). The schema is untrusted remote input:
 * it must be an object schema; only the top-level keys providers understand
 * are kept; a schema using a construct that cannot be carried intact (`$ref`
 * and the other keywords below) is refused rather than silently widened; its
 * depth and encoded size are bounded. A refused schema skips the tool, with
 * the reason in the import's error text.
 */

const MAX_DEPTH = 12;
const MAX_ENCODED_BYTES = 16384;

const RETAINED_KEYS = ['type', 'description', 'properties', 'required', 'additionalProperties', 'allOf', 'anyOf', 'oneOf', 'not'] as const;

const UNSUPPORTED_KEYWORDS = [
  '$ref',
  '$dynamicRef',
  '$defs',
  'definitions',
  'if',
  'then',
  'else',
  'patternProperties',
  'propertyNames',
  'dependentSchemas',
  'dependentRequired',
  'unevaluatedProperties',
] as const;

export type SchemaNormalisation = { ok: true; schema: Record<string, unknown> } | { ok: false; reason: string };

type Node = Record<string, unknown> | unknown[];

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isNode = (value: unknown): value is Node => typeof value === 'object' && value !== null;

function firstUnsupportedKeyword(node: Node): string | null {
  if (isObject(node)) {
    const own = UNSUPPORTED_KEYWORDS.find((keyword) => Object.hasOwn(node, keyword));
    if (own !== undefined) return own;
  }
  for (const value of Object.values(node)) {
    if (isNode(value)) {
      const nested = firstUnsupportedKeyword(value);
      if (nested !== null) return nested;
    }
  }
  return null;
}

function withinDepth(node: Node, depth: number): boolean {
  if (depth > MAX_DEPTH) return false;
  return Object.values(node).every((value) => !isNode(value) || withinDepth(value, depth + 1));
}

function wellFormed(schema: Record<string, unknown>): boolean {
  if ('description' in schema && typeof schema.description !== 'string') return false;
  if ('additionalProperties' in schema && typeof schema.additionalProperties !== 'boolean') return false;
  if ('properties' in schema && (!isObject(schema.properties) || !Object.values(schema.properties).every(isObject))) return false;
  if ('required' in schema && (!Array.isArray(schema.required) || !schema.required.every((name) => typeof name === 'string'))) return false;
  return true;
}

export function normaliseInputSchema(input: unknown): SchemaNormalisation {
  if (!isObject(input)) return { ok: false, reason: 'the server advertised no parameter schema' };
  if (input.type !== 'object') return { ok: false, reason: 'its top-level type is not "object"' };
  const retained: Record<string, unknown> = {};
  for (const key of RETAINED_KEYS) {
    if (Object.hasOwn(input, key)) retained[key] = input[key];
  }
  const keyword = firstUnsupportedKeyword(retained);
  if (keyword !== null) {
    return { ok: false, reason: `it uses "${keyword}", which this import does not carry: dropping the keyword would widen what the tool accepts` };
  }
  if (!wellFormed(retained)) return { ok: false, reason: 'its properties or required list are not well formed' };
  if (!withinDepth(retained, 1)) return { ok: false, reason: `it nests deeper than ${MAX_DEPTH} levels` };
  if (Buffer.byteLength(JSON.stringify(retained), 'utf8') > MAX_ENCODED_BYTES) {
    return { ok: false, reason: `it exceeds ${MAX_ENCODED_BYTES} bytes once stored` };
  }
  return { ok: true, schema: retained };
}
