/**
 * Text must arrive as it will be stored. A lone UTF-16 surrogate (valid in
 * a JSON string as `"\ud800"`, impossible in UTF-8) would be stored as
 * U+FFFD while the client was answered with what it sent, so it is refused
 * before execution wherever it appears in the variables (strings, and keys
 * and values of JSON input). GraphQL string literals in the document are
 * already checked by the parser.
 */
import { GraphQLError } from 'graphql';
import type { ApolloServerPlugin } from '@apollo/server';

/** In Unicode mode a surrogate pair is one code point, so this matches only surrogates without their partner. */
const LONE_SURROGATE = /\p{Cs}/u;

/** The path of the first string (or object key) in `value` that is not well-formed UTF-16, or null. */
export function findIllFormedText(value: unknown, path: readonly string[] = []): string[] | null {
  // An explicit stack: JSON input may be nested deeper than the call stack allows.
  const stack: { value: unknown; path: readonly string[] }[] = [{ value, path }];
  while (stack.length > 0) {
    const item = stack.pop()!;
    if (typeof item.value === 'string') {
      if (LONE_SURROGATE.test(item.value)) return [...item.path];
    } else if (Array.isArray(item.value)) {
      item.value.forEach((element, index) => stack.push({ value: element, path: [...item.path, String(index)] }));
    } else if (item.value !== null && typeof item.value === 'object') {
      for (const [key, element] of Object.entries(item.value)) {
        if (LONE_SURROGATE.test(key)) return [...item.path, key];
        stack.push({ value: element, path: [...item.path, key] });
      }
    }
  }
  return null;
}

/** The GraphQL error for ill-formed text in the variables, or null when all text is well-formed. */
export function illFormedTextError(variables: Record<string, unknown> | null | undefined): GraphQLError | null {
  const path = findIllFormedText(variables ?? {});
  if (!path) return null;
  // The field is the input field's name (the last non-index step), as for other input errors.
  const field = [...path].reverse().find((step) => !/^\d+$/.test(step)) ?? path[0] ?? 'variables';
  return new GraphQLError(`${field} contains a lone UTF-16 surrogate (\\ud800-\\udfff without its pair); send well-formed Unicode text`, {
    extensions: { code: 'BAD_USER_INPUT', field },
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
