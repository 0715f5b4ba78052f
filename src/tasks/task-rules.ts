/**
 * The rules of tasks that need no database: nr_llm's value lists, the
 * placeholders of a template, declared variables, and how a template and its
 * variables become the user prompt. Pure functions; the task service, the
 * render preview and task runs all call them.
 *
 * nr_llm replaces `{{input}}` by plain string replacement and nothing else.
 * Here every `{{name}}` of the template is a variable: `input` is the task's
 * input, any other name is a named variable, declared (with a type and
 * perhaps a default) or not (then a required string). Missing, unknown and
 * mistyped variables are errors, never a placeholder sent on unreplaced.
 * Values are inserted in one pass: a value that contains `{{input}}` is
 * inserted as it is and never expanded again.
 */

/** nr_llm's `TaskCategory`. */
export const TASK_CATEGORIES = ['log_analysis', 'content', 'system', 'developer', 'general'] as const;
/** nr_llm's `TaskOutputFormat`. */
export const TASK_OUTPUT_FORMATS = ['markdown', 'json', 'plain', 'html'] as const;
/** nr_llm's `TaskInputType`. */
export const TASK_INPUT_TYPES = ['manual', 'syslog', 'deprecation_log', 'table', 'file'] as const;

export type RuleCheck<T> = { ok: true; value: T } | { ok: false; message: string };

/** A value of one of nr_llm's lists, exactly as spelt there. */
export function checkChoice(value: string, allowed: readonly string[], field: string): RuleCheck<string> {
  if (allowed.includes(value)) return { ok: true, value };
  return { ok: false, message: `${field} must be one of ${allowed.join(', ')} (got "${value}")` };
}

/** What nr_llm appends to the prompt of a JSON task (it also asks the provider for JSON mode). */
export const JSON_ONLY_SUFFIX = '\n\nRespond with valid JSON only. No markdown, no explanation.';

/** The variable that holds the task's input. */
export const INPUT_VARIABLE = 'input';

const PLACEHOLDER = /\{\{([A-Za-z_][A-Za-z0-9_]*)\}\}/g;
const VARIABLE_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
const MAX_VARIABLES = 100;

/** The names of the template's placeholders in order of first appearance, `input` included. */
export function placeholdersOf(template: string): string[] {
  const names: string[] = [];
  for (const match of template.matchAll(PLACEHOLDER)) {
    if (!names.includes(match[1]!)) names.push(match[1]!);
  }
  return names;
}

export const VARIABLE_TYPES = ['string', 'number', 'integer', 'boolean'] as const;
export type VariableType = (typeof VARIABLE_TYPES)[number];
export type VariableValue = string | number | boolean;

/** A named variable a task declares: its type, and the value used when a call leaves it out. */
export interface DeclaredVariable {
  name: string;
  type: VariableType;
  /** Null: the variable is required. */
  default: VariableValue | null;
  description: string | null;
}

/** Whether a value is of the type. */
export function valueHasType(value: unknown, type: VariableType): value is VariableValue {
  switch (type) {
    case 'string':
      return typeof value === 'string';
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    case 'integer':
      return typeof value === 'number' && Number.isSafeInteger(value);
    case 'boolean':
      return typeof value === 'boolean';
  }
}

function typeNameOf(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  return typeof value;
}

/**
 * Checks declarations for a write: names as placeholders spell them, each
 * once, not `input` (the task's input has its own argument), a known type,
 * a default of that type, and each one used by the template.
 */
export function checkDeclaredVariables(declared: readonly DeclaredVariable[], template: string): RuleCheck<DeclaredVariable[]> {
  if (declared.length > MAX_VARIABLES) return { ok: false, message: `a task declares at most ${MAX_VARIABLES} variables` };
  const used = new Set(placeholdersOf(template));
  const seen = new Set<string>();
  const checked: DeclaredVariable[] = [];
  for (const variable of declared) {
    const name = variable.name;
    if (!VARIABLE_NAME.test(name)) return { ok: false, message: `variable name "${name}" must start with a letter or "_" and hold only letters, digits and "_"` };
    if (name === INPUT_VARIABLE) return { ok: false, message: 'input is the task\'s input and cannot be declared as a variable' };
    if (seen.has(name)) return { ok: false, message: `variable "${name}" is declared twice` };
    seen.add(name);
    if (!(VARIABLE_TYPES as readonly string[]).includes(variable.type)) {
      return { ok: false, message: `variable "${name}" has type "${variable.type}"; the types are ${VARIABLE_TYPES.join(', ')}` };
    }
    if (variable.default !== null && variable.default !== undefined && !valueHasType(variable.default, variable.type)) {
      return { ok: false, message: `the default of variable "${name}" must be a ${variable.type} (got ${typeNameOf(variable.default)})` };
    }
    if (!used.has(name)) return { ok: false, message: `variable "${name}" is declared but the template has no {{${name}}}` };
    checked.push({ name, type: variable.type, default: variable.default ?? null, description: variable.description ?? null });
  }
  return { ok: true, value: checked };
}

/**
 * Reads stored declarations leniently (a row written elsewhere may hold
 * anything): entries that are not a well-formed declaration are left out.
 */
export function readDeclaredVariables(text: string | null | undefined): DeclaredVariable[] {
  if (!text) return [];
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    return [];
  }
  if (!Array.isArray(parsed)) return [];
  const result: DeclaredVariable[] = [];
  for (const entry of parsed) {
    if (typeof entry !== 'object' || entry === null) continue;
    const { name, type, default: fallback, description } = entry as Record<string, unknown>;
    if (typeof name !== 'string' || !VARIABLE_NAME.test(name) || !(VARIABLE_TYPES as readonly unknown[]).includes(type)) continue;
    if (result.some((other) => other.name === name)) continue;
    const variableType = type as VariableType;
    result.push({
      name,
      type: variableType,
      default: fallback !== null && fallback !== undefined && valueHasType(fallback, variableType) ? fallback : null,
      description: typeof description === 'string' ? description : null,
    });
  }
  return result;
}

/** One variable of a task as a caller sees it: a placeholder of the template, declared or not. */
export interface TaskVariable {
  name: string;
  type: VariableType;
  required: boolean;
  default: VariableValue | null;
  description: string | null;
}

/**
 * The task's variables: the template's placeholders in order of first
 * appearance, `input` included, each with its declaration or, undeclared, a
 * required string.
 */
export function taskVariablesOf(template: string, declared: readonly DeclaredVariable[]): TaskVariable[] {
  return placeholdersOf(template).map((name) => {
    const declaration = name === INPUT_VARIABLE ? undefined : declared.find((variable) => variable.name === name);
    return {
      name,
      type: declaration?.type ?? 'string',
      required: declaration?.default === null || declaration === undefined,
      default: declaration?.default ?? null,
      description: declaration?.description ?? null,
    };
  });
}

/**
 * The text each placeholder becomes, from the call's `input` and
 * `variables`. Every fault is named at once: missing (no value and no
 * default), unknown (neither a placeholder nor declared) and mistyped
 * variables. A null value counts as left out.
 */
export function resolveVariables(
  template: string,
  declared: readonly DeclaredVariable[],
  input: string | null | undefined,
  values: Readonly<Record<string, unknown>>,
): RuleCheck<Map<string, string>> {
  const variables = taskVariablesOf(template, declared);
  const known = new Set([INPUT_VARIABLE, ...variables.map((variable) => variable.name), ...declared.map((variable) => variable.name)]);
  const given: Record<string, unknown> = { ...values };
  const faults: string[] = [];
  // `variables.input` is the input too, when the input is not given apart.
  let inputValue: unknown = input;
  if (Object.prototype.hasOwnProperty.call(given, INPUT_VARIABLE)) {
    if (input !== null && input !== undefined) faults.push('input is given twice: as input and in variables');
    else inputValue = given[INPUT_VARIABLE];
    delete given[INPUT_VARIABLE];
  }
  const unknown = Object.keys(given).filter((name) => !known.has(name));
  const missing: string[] = [];
  const mistyped: string[] = [];
  const resolved = new Map<string, string>();
  for (const variable of variables) {
    const value = variable.name === INPUT_VARIABLE ? inputValue : given[variable.name];
    if (value === null || value === undefined) {
      if (variable.default === null) missing.push(variable.name);
      else resolved.set(variable.name, textOf(variable.default));
      continue;
    }
    if (!valueHasType(value, variable.type)) {
      mistyped.push(`${variable.name} (expected ${variable.type}, got ${typeNameOf(value)})`);
      continue;
    }
    resolved.set(variable.name, textOf(value));
  }
  if (missing.length > 0) faults.push(`Missing variables: ${missing.join(', ')}`);
  if (unknown.length > 0) faults.push(`Unknown variables: ${unknown.join(', ')}`);
  if (mistyped.length > 0) faults.push(`Mistyped variables: ${mistyped.join(', ')}`);
  return faults.length > 0 ? { ok: false, message: faults.join('; ') } : { ok: true, value: resolved };
}

function textOf(value: VariableValue): string {
  return typeof value === 'string' ? value : String(value);
}

/**
 * The template with each placeholder replaced by its text, in one pass: an
 * inserted value is never read for placeholders again. A placeholder without
 * a text stays as it is (`resolveVariables` leaves none for a valid call).
 */
export function renderTemplate(template: string, values: ReadonlyMap<string, string>): string {
  return template.replace(PLACEHOLDER, (whole, name: string) => values.get(name) ?? whole);
}
