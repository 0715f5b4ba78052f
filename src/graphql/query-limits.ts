/**
 * What one GraphQL document may ask of the server, the same over HTTP and
 * graphql-ws: its length in tokens (checked while parsing, so a huge document
 * costs no validation), its depth, its aliases, and its estimated cost; and
 * the size of one answer.
 *
 * The cost is an estimate of the work and the size of the answer, computed
 * from the document and its variables before anything runs:
 *  - a field costs 1, or what its definition declares (`complexity`), plus
 *    the cost of its selection;
 *  - a list multiplies its selection's cost by the rows it may return: its
 *    `limit` argument (or that argument's default; a limit above the largest
 *    page is left for the resolver to refuse, with its own message); without
 *    one (or with `limit: null` where null means "all"), the bound its field
 *    declares with `listRows(n)`. Every list of the schema declares one or
 *    takes a size argument (a schema test checks it): a run's whole trace
 *    counts as UNPAGED_STEPS_ROWS, a catalogue (providers, models, tags …) as
 *    CATALOGUE_ROWS, a list stored inside its record (a step's messages, a
 *    message's tool calls) as one row, since it is read with its record;
 *  - what the rows weigh in bytes is not guessed here: the answer budget
 *    (answer-budget.ts) counts the stored text as it is read and stops the
 *    answer once it passes MAX_RESPONSE_BYTES;
 *  - a connection (`snippetsConnection(first:)` …) counts its `edges` and its
 *    `nodes` like a list of `first` rows (or that argument's default); its
 *    `pageInfo` and `totalCount` count once;
 *  - introspection costs a fixed amount per `__schema` / `__type`, whatever
 *    it selects (its answer is bounded by the schema, not by the data).
 * Aliases are what multiply a document: each alias is counted again.
 */
import { maxAliasesRule } from '@escape.tech/graphql-armor-max-aliases';
import { maxDepthRule } from '@escape.tech/graphql-armor-max-depth';
import {
  type DocumentNode,
  type ExecutionResult,
  getNamedType,
  getNullableType,
  type GraphQLArgument,
  GraphQLError,
  type GraphQLField,
  isObjectType,
  type GraphQLSchema,
  isListType,
  type ParseOptions,
  type ValidationRule,
} from 'graphql';
import { type ComplexityEstimator, getComplexity } from 'graphql-query-complexity';
import { MAX_PAGE_SIZE } from '../db/record-rules';
import { type AnswerBudget, AnswerTooLargeError, jsonSizeAtLeast } from '../shared/answer-budget';
import { maxInputDepthRule } from './well-formed-text';

export interface QueryLimits {
  maxDepth: number;
  maxAliases: number;
  maxTokens: number;
  maxCost: number;
  maxResponseBytes: number;
}

/** Rows assumed for a list that declares no bound (none does in this schema: a schema test checks it). */
export const UNPAGED_LIST_ROWS = 10;
/**
 * Rows of a catalogue kept by administrators and editors (providers, models,
 * skills, tools, webhooks, tokens, a record's tags or capabilities): tens of
 * rows, each small.
 */
export const CATALOGUE_ROWS = 10;
/**
 * Rows of a run's whole trace (`steps` without `limit`): a run at the most
 * rounds (20) with one tool call a round stores 4 steps a round and five
 * more. A longer trace is paged with `limit`, and its bytes are bounded by
 * the answer budget either way.
 */
export const UNPAGED_STEPS_ROWS = 85;
/**
 * A field that composes a prompt from every snippet its tags select (the
 * effective system prompt, the call options): tens of kilobytes each.
 */
export const COMPOSED_PROMPT_COST = 100;
/** One `__schema`: the whole schema described (about 100 kB of JSON with every field). */
export const SCHEMA_INTROSPECTION_COST = 1000;
/** One `__type`: one type described. */
export const TYPE_INTROSPECTION_COST = 50;

/** Field extensions declaring the rows a list without a size argument may hold (see the module comment). */
export function listRows(rows: number): { listRows: number } {
  return { listRows: rows };
}

/** Field extensions of a list that is part of a stored record rather than rows of its own: one row, read with its record. */
export const EMBEDDED_LIST = listRows(1);

/** Field extensions of a connection's `edges` and `nodes`: one row each, multiplied by the connection's `first`. */
export const CONNECTION_ROWS = { connectionRows: true } as const;

/**
 * What the estimate of one document carries from field to field: the costs
 * of one row of the `edges` / `nodes` seen since the last connection. The
 * estimator visits a field after its whole selection, so a connection finds
 * exactly its own rows here (a nested connection has taken its own already).
 */
export interface CostEstimate {
  connectionRowCosts: number[];
}

/** The cost of one field (see the module comment). `context` is the document's CostEstimate. */
export const fieldCost: ComplexityEstimator = ({ field, args, childComplexity, context }) => {
  if (field.name === '__schema') return SCHEMA_INTROSPECTION_COST;
  if (field.name === '__type') return TYPE_INTROSPECTION_COST;
  const declared: unknown = field.extensions?.complexity;
  const own = typeof declared === 'number' ? declared : 1;
  const estimate = context as CostEstimate | undefined;
  if (field.extensions?.connectionRows === true) {
    // One row here; the connection multiplies it (without an estimate to carry it: as an unpaged list).
    if (!estimate) return own + UNPAGED_LIST_ROWS * childComplexity;
    estimate.connectionRowCosts.push(own + childComplexity);
    return own + childComplexity;
  }
  if (isConnection(field)) {
    const rowCost = estimate ? estimate.connectionRowCosts.splice(0).reduce((sum, cost) => sum + cost, 0) : 0;
    return own + childComplexity - rowCost + pageRows(args.first, field.args.find((arg) => arg.name === 'first')) * rowCost;
  }
  if (!isListType(getNullableType(field.type))) return own + childComplexity;
  return own + pageRows(args.limit, field.args.find((arg) => arg.name === 'limit'), declaredRows(field)) * childComplexity;
};

/** The bound a list declares with `listRows`, or null. */
export function declaredRows(field: { extensions?: Readonly<Record<string, unknown>> | null }): number | null {
  const rows = field.extensions?.listRows;
  return typeof rows === 'number' && Number.isFinite(rows) ? rows : null;
}

/**
 * The rows a page may hold: its size argument (the argument's default when
 * null), at most MAX_PAGE_SIZE; without a size (a `limit` without default
 * means "all"), the list's declared bound, else UNPAGED_LIST_ROWS.
 */
function pageRows(size: unknown, argument?: GraphQLArgument, declared: number | null = null): number {
  const rows = size ?? argument?.defaultValue;
  if (typeof rows === 'number' && Number.isFinite(rows)) return Math.min(Math.max(0, rows), MAX_PAGE_SIZE);
  return declared ?? UNPAGED_LIST_ROWS;
}

/** A field whose type is a connection: its type's `edges` are connection rows. */
function isConnection(field: GraphQLField<unknown, unknown>): boolean {
  const type = getNamedType(field.type);
  return isObjectType(type) && type.getFields().edges?.extensions?.connectionRows === true;
}

/** Parser options: a document longer than the token limit is refused while it is read. */
export function parseOptionsFor(limits: QueryLimits): ParseOptions {
  return { maxTokens: limits.maxTokens };
}

/**
 * Validation rules beyond graphql-js's own. Refusals are reported as
 * validation errors rather than thrown: a rule that throws makes Apollo treat
 * the refusal as an internal failure (masked, no useful message).
 */
export function validationRulesFor(limits: QueryLimits): ValidationRule[] {
  const onReject = [(context: { reportError(error: GraphQLError): void } | null, error: GraphQLError) => context?.reportError(error)];
  return [
    maxDepthRule({ n: limits.maxDepth, ignoreIntrospection: true, exposeLimits: true, onReject, propagateOnRejection: false }),
    maxAliasesRule({ n: limits.maxAliases, exposeLimits: true, onReject, propagateOnRejection: false }),
    maxInputDepthRule,
  ];
}

/** The refusal of a document that costs more than the limit, or null when it may run. Call after validation. */
export function costRefusal(
  limits: QueryLimits,
  schema: GraphQLSchema,
  document: DocumentNode,
  variables: Record<string, unknown> | null | undefined,
  operationName: string | null | undefined,
): GraphQLError | null {
  let cost: number;
  try {
    const estimate: CostEstimate = { connectionRowCosts: [] };
    cost = getComplexity({ schema, query: document, variables: variables ?? {}, operationName: operationName ?? undefined, estimators: [fieldCost], context: estimate });
  } catch (error) {
    // Thrown for documents too large to estimate (more nodes than the estimator visits).
    return inputError(`The query could not be estimated: ${error instanceof Error ? error.message : String(error)}`);
  }
  if (cost <= limits.maxCost) return null;
  return inputError(
    `The query is too costly: about ${Math.round(cost)} (MAX_QUERY_COST is ${limits.maxCost}). Ask for fewer rows (limit, first), fewer fields or fewer aliases.`,
  );
}

/**
 * The answer sent instead of `result` when its readers already found it too
 * large (the request's AnswerBudget), or when its text alone is past
 * MAX_RESPONSE_BYTES (counted without serialising it, stopping at the
 * limit); null when it may be serialised. Every answer, over HTTP and over
 * graphql-ws, goes through here before it is written.
 */
export function overBudgetAnswer(limits: QueryLimits, result: unknown, budget: AnswerBudget | undefined): ExecutionResult | null {
  if (!budget?.exceeded && jsonSizeAtLeast(result, limits.maxResponseBytes) <= limits.maxResponseBytes) return null;
  const error = new AnswerTooLargeError(limits.maxResponseBytes);
  return { data: null, errors: [new GraphQLError(error.message, { extensions: { code: error.code, http: { status: 400 } } })] };
}

/** The answer sent instead of one larger than MAX_RESPONSE_BYTES, or null when `json` may be sent. */
export function oversizedAnswer(limits: QueryLimits, json: string): ExecutionResult | null {
  // A UTF-16 code unit is at most three bytes of UTF-8: count exactly only near the limit.
  if (json.length * 3 <= limits.maxResponseBytes) return null;
  const bytes = Buffer.byteLength(json, 'utf8');
  if (bytes <= limits.maxResponseBytes) return null;
  return {
    data: null,
    errors: [inputError(`The answer would be ${bytes} bytes, more than MAX_RESPONSE_BYTES (${limits.maxResponseBytes}). Ask for fewer rows (limit) or fewer fields.`)],
  };
}

function inputError(message: string): GraphQLError {
  return new GraphQLError(message, { extensions: { code: 'BAD_USER_INPUT', http: { status: 400 } } });
}

