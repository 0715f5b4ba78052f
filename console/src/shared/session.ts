/**
 * The console's session: the API token kept in localStorage["promptwire.token"]
 * (asked for once), and GraphQL over HTTP with it as the Bearer header.
 */
export const TOKEN_KEY = 'promptwire.token';

export function readToken(): string | null {
  try {
    const token = window.localStorage.getItem(TOKEN_KEY);
    return token && token.trim() !== '' ? token : null;
  } catch {
    return null;
  }
}

export function saveToken(token: string): void {
  window.localStorage.setItem(TOKEN_KEY, token.trim());
}

export function forgetToken(): void {
  window.localStorage.removeItem(TOKEN_KEY);
}

export const GRAPHQL_PATH = '/graphql';

export function webSocketUrl(): string {
  const { protocol, host } = window.location;
  return `${protocol === 'https:' ? 'wss' : 'ws'}://${host}${GRAPHQL_PATH}`;
}

export class GraphQLRequestError extends Error {
  constructor(
    message: string,
    readonly code: string | null,
  ) {
    super(message);
    this.name = 'GraphQLRequestError';
  }
}

/** A typed document from promptwire/client, or any GraphQL text. */
export interface Document<TResult, TVariables> {
  toString(): string;
  /** Carries the types only. */
  __apiType?: (variables: TVariables) => TResult;
}

export async function request<TResult, TVariables>(document: Document<TResult, TVariables>, variables?: TVariables): Promise<TResult> {
  const token = readToken();
  const response = await fetch(GRAPHQL_PATH, {
    method: 'POST',
    headers: { 'content-type': 'application/json', accept: 'application/graphql-response+json, application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify({ query: document.toString(), variables }),
  });
  let body: { data?: TResult | null; errors?: { message: string; extensions?: { code?: string } }[] };
  try {
    body = (await response.json()) as typeof body;
  } catch {
    throw new GraphQLRequestError(`The server answered ${response.status} without a GraphQL body.`, null);
  }
  if (body.errors && body.errors.length > 0) {
    const first = body.errors[0]!;
    throw new GraphQLRequestError(body.errors.map((error) => error.message).join('; '), first.extensions?.code ?? null);
  }
  if (!body.data) throw new GraphQLRequestError(`The server answered ${response.status} without data.`, null);
  return body.data;
}
