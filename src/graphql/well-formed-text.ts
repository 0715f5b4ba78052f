/**
 * Input must arrive as it will be stored, and in a shape the server can
 * process, before anything executes:
 * - text: a lone UTF-16 surrogate (valid in a JSON string as `"\ud800"`,
 *   impossible in UTF-8) would be stored as U+FFFD while the client was
 *   answered with what it sent, so it is refused wherever it appears in the
 *   variables (strings, and keys and values of JSON input). GraphQL string
 *   literals in the document are already checked by the parser;
 * - depth: a JSON value nested deeper than MAX_INPUT_DEPTH is refused, in the
 *   variables here and in document literals by `maxInputDepthRule`.
 */
import { GraphQLError, type ValidationRule } from 'graphql';
import { MAX_INPUT_DEPTH } from '../shared/input-depth';
import type { ApolloServerPlugin } from '@apollo/server';

/** In Unicode mode a surrogate pair is one code point, so this matches only surrogates without their partner. */
const LONE_SURROGATE = /\p{Cs}/u;

export type InputProblem = { kind: 'surrogate' | 'depth'; path: string[] };

/**
 * The first problem with `value` as client input: a string (or object key)
 * that is not well-formed UTF-16, or nesting deeper than MAX_INPUT_DEPTH.
 * Linear in the size of the value whatever its depth (an explicit stack with
 * parent links, no recursion, no copied paths).
 */
export function findInputProblem(value: unknown): InputProblem | null {
  interface Item {
    value: unknown;
    key: string | null;
    parent: Item | null;
    depth: number;
  }
  const pathOf = (item: Item, last?: string): string[] => {
    const path: string[] = last === undefined ? [] : [last];
    for (let at: Item | null = item; at; at = at.parent) if (at.key !== null) path.push(at.key);
    return path.reverse();
  };
  const stack: Item[] = [{ value, key: null, parent: null, depth: 0 }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    if (typeof item.value === 'string') {
      if (LONE_SURROGATE.test(item.value)) return { kind: 'surrogate', path: pathOf(item) };
      continue;
    }
    if (item.value === null || typeof item.value !== 'object') continue;
    // The variables object itself is level 0; an input object or list inside it opens level 1, and so on.
    if (item.depth > MAX_INPUT_DEPTH) return { kind: 'depth', path: pathOf(item) };
    if (Array.isArray(item.value)) {
      item.value.forEach((element, index) => stack.push({ value: element, key: String(index), parent: item, depth: item.depth + 1 }));
    } else {
      for (const [key, element] of Object.entries(item.value)) {
        if (LONE_SURROGATE.test(key)) return { kind: 'surrogate', path: pathOf(item, key) };
        stack.push({ value: element, key, parent: item, depth: item.depth + 1 });
      }
    }
  }
  return null;
}

/** The path of the first string (or object key) in `value` that is not well-formed UTF-16, or null. */
export function findIllFormedText(value: unknown): string[] | null {
  const problem = findInputProblem(value);
  return problem?.kind === 'surrogate' ? problem.path : null;
}

/**
 * The GraphQL error for variables that cannot be taken as they are (ill-formed
 * text, or a value nested deeper than MAX_INPUT_DEPTH), or null when they can.
 */
export function illFormedTextError(variables: Record<string, unknown> | null | undefined): GraphQLError | null {
  const problem = findInputProblem(variables ?? {});
  if (!problem) return null;
  const { path } = problem;
  // The field is the input field's name (the last non-index step), as for other input errors.
  const field = [...path].reverse().find((step) => !/^\d+$/.test(step)) ?? path[0] ?? 'variables';
  if (problem.kind === 'depth') {
    return new GraphQLError(`${field} is nested more than ${MAX_INPUT_DEPTH} levels deep; send a flatter value`, { extensions: { code: 'BAD_USER_INPUT', field, http: { status: 400 } } });
  }
  return new GraphQLError(`${field} contains a lone UTF-16 surrogate (\\ud800-\\udfff without its pair); send well-formed Unicode text`, {
    // A request error (nothing executed): 400, which GraphQL over HTTP turns into 200 for application/json.
    extensions: { code: 'BAD_USER_INPUT', field, http: { status: 400 } },
  });
}

/** Refuses an operation whose variables hold ill-formed text, before it executes. */
export function wellFormedTextPlugin<T extends object>(): ApolloServerPlugin<T> {
  return {
    async requestDidStart() {
      return {
        async didResolveOperation({ request }) {
          const error = illFormedTextError(request.variables);
          if (error) throw error;
        },
      };
    },
  };
}

/** Refuses a document whose literal values (objects, lists) nest deeper than MAX_INPUT_DEPTH. */
export const maxInputDepthRule: ValidationRule = (context) => {
  let depth = 0;
  let reported = false;
  const enter = () => {
    depth += 1;
    if (depth > MAX_INPUT_DEPTH && !reported) {
      reported = true;
      context.reportError(new GraphQLError(`A value in the document is nested more than ${MAX_INPUT_DEPTH} levels deep; send a flatter value`, { extensions: { code: 'BAD_USER_INPUT' } }));
    }
  };
  const leave = () => {
    depth -= 1;
  };
  return { ObjectValue: { enter, leave }, ListValue: { enter, leave } };
};
