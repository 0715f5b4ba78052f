/** Small factories: each test builds its own data through the API, like a client. */
import type { TestServer } from './server';

let counter = 0;
export const unique = (prefix: string) => `${prefix}_${process.pid}_${(counter += 1)}`;

export interface SnippetFields {
  identifier?: string;
  name?: string;
  snippet?: string;
  tags?: string[];
  metadata?: unknown;
  isActive?: boolean;
  hidden?: boolean;
  sorting?: number;
  description?: string;
}

export async function createSnippet(t: TestServer, fields: SnippetFields = {}): Promise<{ uid: number; identifier: string }> {
  const input = { identifier: unique('snip'), name: 'A snippet', snippet: 'Some text.', ...fields };
  const data = await t.ok<{ createSnippet: { uid: number; identifier: string } }>(
    'mutation($input: CreateSnippetInput!) { createSnippet(input: $input) { uid identifier } }',
    { input },
  );
  return data.createSnippet;
}

export async function createProviderAndModel(t: TestServer, fields: { costInput?: number; costOutput?: number; endpointUrl?: string; maxOutputTokens?: number } = {}) {
  const provider = unique('prov');
  const model = unique('model');
  await t.ok('mutation($input: CreateProviderInput!) { createProvider(input: $input) { uid } }', {
    input: { identifier: provider, name: 'Provider', adapterType: 'custom', endpointUrl: fields.endpointUrl ?? 'http://127.0.0.1:9/v1', apiKey: 'sk-test' },
  });
  await t.ok('mutation($input: CreateModelInput!) { createModel(input: $input) { uid } }', {
    input: { identifier: model, name: 'Model', provider, modelId: 'test-model', costInput: fields.costInput ?? 0, costOutput: fields.costOutput ?? 0, maxOutputTokens: fields.maxOutputTokens ?? 0 },
  });
  return { provider, model };
}

export async function createConfiguration(t: TestServer, input: Record<string, unknown>): Promise<{ uid: number; identifier: string }> {
  const data = await t.ok<{ createConfiguration: { uid: number; identifier: string } }>(
    'mutation($input: CreateConfigurationInput!) { createConfiguration(input: $input) { uid identifier } }',
    { input: { identifier: unique('conf'), name: 'Configuration', ...input } },
  );
  return data.createConfiguration;
}
