/**
 * How the task page turns what was typed into GraphQL values. Only the
 * shape is decided here: a text that does not read as the variable's type is
 * sent as typed, so the server's own check names it (`Mistyped variables:
 * …`), and an empty field is left out (the default, or `Missing variables:
 * …`). The console never decides what the server would refuse.
 */
export type TypedValue = string | number | boolean;

const NUMBER = /^-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?$/;

/** A variable's value as typed: undefined when the field is empty. */
export function valueOf(text: string, type: string): TypedValue | undefined {
  if (text === '') return undefined;
  if ((type === 'integer' || type === 'number') && NUMBER.test(text.trim())) return Number(text.trim());
  if (type === 'boolean' && (text === 'true' || text === 'false')) return text === 'true';
  return text;
}

/** A stored value shown in a field. */
export function textOf(value: unknown): string {
  if (value === null || value === undefined) return '';
  return typeof value === 'string' ? value : JSON.stringify(value);
}

/** A declared variable as the edit form holds it. */
export interface VariableDraft {
  name: string;
  type: string;
  /** The default as typed; "" for none. */
  defaultText: string;
  description: string;
}

/** The declarations as a task version stores them (`[{name, type, default, description}]`), leniently. */
export function draftsOf(stored: unknown): VariableDraft[] {
  if (!Array.isArray(stored)) return [];
  return stored.flatMap((entry) => {
    if (typeof entry !== 'object' || entry === null) return [];
    const { name, type, default: fallback, description } = entry as Record<string, unknown>;
    if (typeof name !== 'string' || typeof type !== 'string') return [];
    return [{ name, type, defaultText: textOf(fallback), description: typeof description === 'string' ? description : '' }];
  });
}

/** The declarations as `updateTask` takes them. */
export function declarationsOf(drafts: readonly VariableDraft[]): { name: string; type: string; default: TypedValue | null; description: string | null }[] {
  return drafts.map((draft) => ({
    name: draft.name.trim(),
    type: draft.type,
    default: valueOf(draft.defaultText, draft.type) ?? null,
    description: draft.description.trim() === '' ? null : draft.description,
  }));
}

/** The output schema as typed: null when empty, else the parsed JSON or the parser's complaint. */
export function schemaOf(text: string): { ok: true; value: unknown } | { ok: false; message: string } {
  if (text.trim() === '') return { ok: true, value: null };
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch (error) {
    return { ok: false, message: `The output schema is not JSON: ${(error as Error).message}` };
  }
}
