import type { Services } from './services';

/**
 * A newcomer's first start on an empty database shows something: snippets for
 * each established tag, an Ollama and an OpenAI provider, a model each, a
 * configuration selecting two tags, and the demo model with its
 * `demo-assistant` configuration, so that a first run works with no account
 * and no network. Returns false when the database has data.
 */
export async function seedExamples(services: Services): Promise<boolean> {
  const [snippets, providers] = await Promise.all([services.snippets.list({ limit: 1, offset: 0 }), services.providers.list()]);
  if (snippets.length > 0 || providers.length > 0) return false;

  const examples = [
    { identifier: 'nova_persona', name: 'Nova persona', tags: ['persona'], snippet: 'You are Nova, a friendly expert.', metadata: { voice: 'nova' }, sorting: 10 },
    { identifier: 'formal_tone', name: 'Formal tone', tags: ['tone_of_voice'], snippet: 'Use a formal, professional tone of voice.', sorting: 20 },
    { identifier: 'audience_editors', name: 'Audience: editors', tags: ['audience'], snippet: 'The readers are web editors who know their CMS but not machine learning.', sorting: 30 },
    { identifier: 'style_plain', name: 'Plain style', tags: ['style'], snippet: 'Prefer short sentences and concrete words. Avoid jargon.', sorting: 40 },
    { identifier: 'layout_bullets', name: 'Bullet layout', tags: ['layout'], snippet: 'Answer with a one-line summary, then at most five bullet points.', sorting: 50 },
  ];
  for (const example of examples) await services.snippets.create(example);

  await services.providers.create({ identifier: 'ollama-local', name: 'Ollama (local)', adapterType: 'ollama', endpointUrl: 'http://localhost:11434' });
  await services.providers.create({ identifier: 'openai', name: 'OpenAI', adapterType: 'openai' });
  await services.models.create({ identifier: 'llama3-local', name: 'Llama 3.2 (local)', provider: 'ollama-local', modelId: 'llama3.2', contextLength: 131072, capabilities: ['chat', 'tools', 'streaming'] });
  await services.models.create({
    identifier: 'gpt-4o-mini',
    name: 'GPT-4o mini',
    provider: 'openai',
    modelId: 'gpt-4o-mini',
    contextLength: 128000,
    maxOutputTokens: 16384,
    costInput: 15,
    costOutput: 60,
    capabilities: ['chat', 'tools', 'vision', 'streaming'],
  });
  await services.configurations.create({
    identifier: 'nova-assistant',
    name: 'Nova assistant',
    model: 'llama3-local',
    systemPrompt: 'You are a helpful assistant.',
    snippetTags: ['persona', 'tone_of_voice'],
  });

  await services.providers.create({ identifier: 'demo', name: 'Demo model (local, no network)', adapterType: 'demo' });
  await services.models.create({ identifier: 'demo', name: 'Demo model', provider: 'demo', modelId: 'demo', contextLength: 32768, maxOutputTokens: 4096, capabilities: ['chat', 'tools', 'streaming'] });
  await services.configurations.create({
    identifier: 'demo-assistant',
    name: 'Demo assistant',
    model: 'demo',
    systemPrompt: 'You are a helpful assistant. Use the calculator for arithmetic.',
    snippetTags: ['persona'],
  });
  return true;
}
