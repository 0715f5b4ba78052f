/**
 * The real service for the throughput benchmark, in its own process, on the
 * database named by DATABASE_URL, seeded with 50 snippets and 50
 * configurations (each with model, provider, skill and two selected tags).
 */
import 'reflect-metadata';
import pino from 'pino';
import { loadConfig } from '../src/config';
import { createServer } from '../src/server';

export const BENCH_TOKEN = 'bench-admin-token-0123456789';

async function main(): Promise<void> {
  const config = loadConfig({ ...process.env, PORT: '0', ADMIN_TOKEN: BENCH_TOKEN, SECRET_KEY: 'bench-secret-key-0123456789', SEED_EXAMPLES: 'false' });
  const server = await createServer(config, { logger: pino({ level: process.env.BENCH_LOG_LEVEL ?? 'silent' }, pino.destination(process.env.BENCH_LOG_FILE ?? 2)) });
  const { services } = server;
  if (process.env.BENCH_SEED === '1' && (await services.snippets.list({ limit: 1, offset: 0 })).length === 0) {
    const tags = ['persona', 'tone_of_voice', 'audience', 'style', 'layout'];
    for (let i = 0; i < 50; i += 1) {
      await services.snippets.create({
        identifier: `bench_snippet_${i}`,
        name: `Bench snippet ${i}`,
        snippet: `Fragment number ${i}: ${'lorem ipsum '.repeat(8)}`,
        tags: [tags[i % tags.length] ?? 'style', 'bench'],
        metadata: { index: i },
        sorting: i,
      });
    }
    await services.skills.create({ identifier: 'bench_skill', name: 'Bench skill', body: 'Reference prose.', enabled: true });
    for (let i = 0; i < 50; i += 1) {
      await services.providers.create({ identifier: `bench_provider_${i}`, name: `Provider ${i}`, adapterType: 'openai', apiKey: 'sk-bench' });
      await services.models.create({ identifier: `bench_model_${i}`, name: `Model ${i}`, provider: `bench_provider_${i}`, modelId: 'gpt-4o-mini', costInput: 15, costOutput: 60 });
      await services.configurations.create({
        identifier: `bench_configuration_${i}`,
        name: `Configuration ${i}`,
        model: `bench_model_${i}`,
        systemPrompt: 'You are a helpful assistant.',
        snippetTags: [tags[i % tags.length] ?? 'style', tags[(i + 1) % tags.length] ?? 'layout'],
        skills: ['bench_skill'],
        sorting: i,
      });
    }
  }
  process.stdout.write(`READY ${server.port} ${BENCH_TOKEN}\n`);
  process.on('SIGTERM', () => void server.stop().then(() => process.exit(0)));
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
