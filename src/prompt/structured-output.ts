/**
 * Structured output, as nr_llm's `completeStructured*` has it: a JSON Schema
 * inside nr_llm's strict subset, the instruction appended to the prompt, the
 * answer decoded (one wrapping Markdown code fence stripped) and validated,
 * and the texts of the one repair call and of the final failure. The
 * validation itself is Ajv's (JSON Schema 2020-12), on the server.
 */
import Ajv2020, { type ValidateFunction } from 'ajv/dist/2020';
import type { ChatMessage } from '../providers/adapters/types';

export const SCHEMA_OUTSIDE_SUBSET_MESSAGE = 'The schema lies outside the supported strict subset (ADR-126); it would reject every response.';

export const STRUCTURED_FAILURE_MESSAGE = 'Structured completion did not match the required schema after one repair attempt.';

/** Keywords the strict subset checks (nr_llm's `StrictSchemaSubset::ASSERTIONS`). */
const ASSERTIONS = new Set([
  'type', 'enum', 'const', 'pattern',
  'minLength', 'maxLength',
  'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum',
  'multipleOf',
  'items', 'prefixItems', 'minItems', 'maxItems', 'uniqueItems',
  'properties', 'required', 'additionalProperties',
  'oneOf', 'anyOf', 'allOf', 'not',
]);

/** Keywords accepted and ignored (annotations and the schema's own declarations). */
const ANNOTATIONS = new Set(['description', 'title', 'default', 'examples', 'format', '$schema', '$id']);

const TYPE_NAMES = new Set(['object', 'array', 'string', 'number', 'integer', 'boolean', 'null']);

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

const isObject = (value: unknown): value is Record<string, unknown> => typeof value === 'object' && value !== null && !Array.isArray(value);
const isNonNegativeInteger = (value: unknown): boolean => typeof value === 'number' && Number.isInteger(value) && value >= 0;

/**
 * Whether the schema lies entirely inside the subset: every keyword known,
 * every value of the shape the keyword needs, at least one assertion (a
 * schema of annotations alone would accept anything). Fails closed on any
 * unknown keyword.
 */
export function isInStrictSubset(schema: unknown): boolean {
  if (!isObject(schema) || Object.keys(schema).length === 0) return false;
  let asserts = false;
  for (const [keyword, value] of Object.entries(schema)) {
    if (ANNOTATIONS.has(keyword)) continue;
    if (!ASSERTIONS.has(keyword) || !keywordValueSupported(keyword, value)) return false;
    asserts = true;
  }
  return asserts;
}

function keywordValueSupported(keyword: string, value: unknown): boolean {
  switch (keyword) {
    case 'type':
      return typeof value === 'string' ? TYPE_NAMES.has(value) : Array.isArray(value) && value.length > 0 && value.every((type) => typeof type === 'string' && TYPE_NAMES.has(type));
    case 'enum':
      return Array.isArray(value) && value.length > 0;
    case 'const':
      return true;
    case 'pattern':
      return typeof value === 'string' && compiles(value);
    case 'minLength':
    case 'maxLength':
    case 'minItems':
    case 'maxItems':
      return isNonNegativeInteger(value);
    case 'minimum':
    case 'maximum':
    case 'exclusiveMinimum':
    case 'exclusiveMaximum':
      return typeof value === 'number' && Number.isFinite(value);
    case 'multipleOf':
      // Positive integers only, as nr_llm: float steps would need epsilon arithmetic.
      return typeof value === 'number' && Number.isInteger(value) && value > 0;
    case 'uniqueItems':
      return typeof value === 'boolean';
    case 'required':
      return Array.isArray(value) && value.every((entry) => typeof entry === 'string');
    case 'items':
    case 'not':
      return isInStrictSubset(value);
    case 'prefixItems':
    case 'oneOf':
    case 'anyOf':
    case 'allOf':
      return Array.isArray(value) && value.length > 0 && value.every(isInStrictSubset);
    case 'properties':
      return isObject(value) && Object.values(value).every(isInStrictSubset);
    case 'additionalProperties':
      return typeof value === 'boolean' || isInStrictSubset(value);
    default:
      return false;
  }
}

function compiles(pattern: string): boolean {
  if (pattern === '' || pattern.length > 1000) return false;
  try {
    new RegExp(pattern, 'u');
    return true;
  } catch {
    return false;
  }
}

/** The schema as the instruction shows it: compact JSON, slashes unescaped (JSON.stringify never escapes them). */
export function schemaText(schema: unknown): string {
  return JSON.stringify(schema);
}

/** The prompt with nr_llm's schema instruction appended. */
export function withSchemaInstruction(prompt: string, schemaJson: string): string {
  return (
    prompt +
    '\n\nRespond with ONLY a single JSON value conforming to this JSON Schema. ' +
    'Do not wrap it in Markdown code fences and do not add any prose:\n' +
    schemaJson
  );
}

/** Characters of an invalid answer the repair prompt shows. */
export const REPAIR_SHOWN_CHARACTERS = 2000;

/**
 * The repair prompt: the instruction again, then the invalid answer cut to
 * 2,000 characters (code points, as PHP's `mb_substr`), marked when cut.
 */
export function withRepairInstruction(prompt: string, schemaJson: string, invalid: string): string {
  return withSchemaInstruction(prompt, schemaJson) + repairSuffix(invalid);
}

/** What the repair prompt adds to the instructed prompt. */
export function repairSuffix(invalid: string): string {
  const characters = Array.from(invalid);
  let shown = characters.slice(0, REPAIR_SHOWN_CHARACTERS).join('');
  if (characters.length > REPAIR_SHOWN_CHARACTERS) shown += '\n[... truncated ...]';
  return '\n\nYour previous response did not conform to the schema. It was:\n' + shown;
}

/**
 * The messages of the repair call: those of the first call, the user
 * message (skill block, then the instructed prompt) followed by the repair
 * text, so it reads `block + "\n\n" + withRepairInstruction(prompt, …)` as
 * nr_llm's repair call sends it.
 */
export function withRepairedAnswer(messages: readonly ChatMessage[], invalid: string): ChatMessage[] {
  const index = messages.map((message) => message.role).lastIndexOf('user');
  if (index === -1) return [...messages];
  const repaired = [...messages];
  const user = messages[index] as Extract<ChatMessage, { role: 'user' }>;
  repaired[index] = { role: 'user', content: user.content + repairSuffix(invalid) };
  return repaired;
}

/** What a run's END says when the answer still failed the schema after the repair call. */
export const INVALID_OUTPUT = { error: STRUCTURED_FAILURE_MESSAGE, errorClass: 'InvalidOutput' } as const;

/** The fields an LLM step of a run with an output schema carries: whether the answer matched, and why not. */
export function answerCheckFields(content: string, schemaJson: string): { outputValid: boolean; outputError?: string } {
  const check = checkStructuredAnswer(content, schemaJson);
  return check.valid ? { outputValid: true } : { outputValid: false, outputError: check.reason };
}

const FENCED = /^\s*```(?:json)?\s*([\s\S]*?)\s*```\s*$/;

/**
 * The answer as a JSON object or array (nr_llm decodes to a PHP array, so a
 * bare scalar is no answer), with one wrapping Markdown code fence stripped
 * when the text itself is not JSON. Undefined when there is none.
 */
export function decodeJsonAnswer(content: string): Json[] | { [key: string]: Json } | undefined {
  const direct = parseContainer(content);
  if (direct !== undefined) return direct;
  const fenced = FENCED.exec(content);
  return fenced ? parseContainer(fenced[1]!) : undefined;
}

function parseContainer(text: string): Json[] | { [key: string]: Json } | undefined {
  try {
    const value = JSON.parse(text) as Json;
    return typeof value === 'object' && value !== null ? value : undefined;
  } catch {
    return undefined;
  }
}

const ajv = new Ajv2020({ allErrors: false, strict: false, validateFormats: false });
const compiled = new Map<string, ValidateFunction>();
const MAX_COMPILED = 500;

/** Ajv's validator of a schema in the subset, compiled once per schema text. */
export function validatorFor(schemaJson: string): ValidateFunction {
  let validate = compiled.get(schemaJson);
  if (!validate) {
    validate = ajv.compile(JSON.parse(schemaJson) as object);
    if (compiled.size >= MAX_COMPILED) compiled.delete(compiled.keys().next().value!);
    compiled.set(schemaJson, validate);
  }
  return validate;
}

export type StructuredCheck = { valid: true; output: Json[] | { [key: string]: Json } } | { valid: false; reason: string };

/** Decodes and validates an answer against the schema. */
export function checkStructuredAnswer(content: string, schemaJson: string): StructuredCheck {
  const output = decodeJsonAnswer(content);
  if (output === undefined) return { valid: false, reason: 'the answer is not a JSON object or array' };
  const validate = validatorFor(schemaJson);
  if (validate(output)) return { valid: true, output };
  return { valid: false, reason: ajv.errorsText(validate.errors, { dataVar: 'answer' }) };
}
