import pino, { type Logger } from 'pino';

export type { Logger };

/**
 * Structured JSON logs. Anything that could carry a secret is redacted by path,
 * so a careless `logger.info({ input })` cannot leak a provider key or a token.
 */
export function createLogger(level: string, destination?: pino.DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'promptwire' },
      redact: {
        paths: [
          'apiKey',
          '*.apiKey',
          '*.*.apiKey',
          'api_key',
          '*.api_key',
          'token',
          '*.token',
          'authorization',
          '*.authorization',
          'req.headers.authorization',
          'headers.authorization',
          'connectionParams.authorization',
        ],
        censor: '[redacted]',
      },
    },
    destination,
  );
}
