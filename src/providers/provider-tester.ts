import { performance } from 'node:perf_hooks';
import type { Logger } from '../logger';
import { NotFoundError } from '../shared/errors';
import { createChatAdapter } from './adapters/registry';
import type { ModelService } from './model.service';
import type { ProviderService } from './provider.service';

export interface ProviderTestOutcome {
  ok: boolean;
  latencyMs: number;
  model: string | null;
  answer: string | null;
  error: string | null;
}

const DEFAULT_TEST_MODELS: Record<string, string> = {
  openai: 'gpt-4o-mini',
  anthropic: 'claude-3-5-haiku-latest',
  gemini: 'gemini-2.0-flash',
  ollama: 'llama3.2',
  openrouter: 'openai/gpt-4o-mini',
  mistral: 'mistral-small-latest',
  groq: 'llama-3.1-8b-instant',
  demo: 'demo',
};

/** What an administrator clicks after pasting a key: one tiny call, with the outcome in words. */
export class ProviderTester {
  constructor(
    private readonly providers: ProviderService,
    private readonly models: ModelService,
    private readonly logger: Logger,
  ) {}

  async test(identifier: string, modelId?: string | null): Promise<ProviderTestOutcome> {
    const provider = await this.providers.findByIdentifier(identifier);
    if (!provider) throw new NotFoundError(`No provider with identifier "${identifier}"`, 'identifier');
    const models = (await this.models.list()).filter((m) => m.providerUid === provider.uid && m.isActive);
    const model = modelId?.trim() || models.find((m) => m.isDefault)?.modelId || models[0]?.modelId || DEFAULT_TEST_MODELS[provider.adapterType] || null;
    if (!model) {
      return { ok: false, latencyMs: 0, model: null, answer: null, error: 'No model to test with: add a model for this provider or pass modelId.' };
    }
    const settings = this.providers.settingsFor(provider);
    const started = performance.now();
    try {
      const adapter = createChatAdapter({ ...settings, maxRetries: 0 }, { logger: this.logger });
      const result = await adapter.chat({
        messages: [{ role: 'user', content: 'Reply with the single word: ok' }],
        options: { model, max_tokens: 16, temperature: 0, timeout: Math.min(settings.apiTimeout, 30) },
      });
      return { ok: true, latencyMs: round(performance.now() - started), model, answer: result.content, error: null };
    } catch (error) {
      const message = error instanceof Error ? error.message : 'unknown error';
      this.logger.warn({ provider: provider.identifier, error: message }, 'provider test failed');
      return { ok: false, latencyMs: round(performance.now() - started), model, answer: null, error: message };
    }
  }
}

const round = (ms: number) => Math.round(ms * 100) / 100;
