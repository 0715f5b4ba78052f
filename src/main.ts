/**
 * read config → open database → migrate → serve → stop cleanly on SIGTERM.
 */
import 'reflect-metadata';
import { ConfigError, loadConfig } from './config';
import { createLogger } from './logger';
import { createServer } from './server';

async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig();
  } catch (error) {
    if (error instanceof ConfigError) {
      process.stderr.write(`${error.message}\nFix these environment variables and start again.\n`);
      process.exit(2);
    }
    throw error;
  }
  const logger = createLogger(config.logLevel);
  const server = await createServer(config, {
    logger,
    onBootstrapToken: (token) => {
      // Printed once, never logged: only its hash is stored.
      process.stdout.write(
        `\n  No ADMIN_TOKEN was set, so an administrator token was generated. It is shown this once:\n\n    ${token}\n\n  Use it as "Authorization: Bearer <token>". Create more with the createApiToken mutation.\n\n`,
      );
    },
  });
  process.stdout.write(`promptwire ready: ${server.url} (GraphQL over HTTP and graphql-ws)\n`);

  let stopping = false;
  const stop = (signal: string) => {
    if (stopping) return;
    stopping = true;
    logger.info({ signal }, 'shutting down: finishing requests, cancelling runs');
    const force = setTimeout(() => process.exit(1), 15_000).unref();
    server
      .stop()
      .then(() => {
        clearTimeout(force);
        process.exit(0);
      })
      .catch((error: unknown) => {
        logger.error({ err: error }, 'shutdown failed');
        process.exit(1);
      });
  };
  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
}

main().catch((error: unknown) => {
  process.stderr.write(`promptwire could not start: ${error instanceof Error ? error.message : String(error)}\n`);
  process.exit(1);
});
