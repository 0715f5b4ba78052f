/**
 * Credentials written as `env:NAME` (a provider's API key, an MCP server's
 * credential): the service reads the variable NAME when it connects. Only
 * the variables of the allow-list (`providerKeyEnvAllowed` in config.ts:
 * names starting with PROVIDER_KEY_ENV_PREFIX, and PROVIDER_KEY_ENV_ALLOW)
 * may be named. Any other (SECRET_KEY, DATABASE_URL, ADMIN_TOKEN …) would let
 * whoever edits the record send the service's own secrets to an address of
 * their choosing. Every credential of the service follows this one rule.
 */
import { type AppConfig, PROVIDER_KEY_ENV_PREFIX } from '../config';
import { BadUserInputError } from './errors';

/** What reading `env:NAME` credentials needs of the configuration. */
export type CredentialEnvironment = Pick<AppConfig, 'readEnv' | 'providerKeyEnvAllowed'>;

const ENV_REFERENCE = /^env:([A-Za-z_][A-Za-z0-9_]*)$/;

export function isEnvReference(value: string): boolean {
  return value.startsWith('env:');
}

/** What `env:NAME` may name, in words for the person who wrote another name. */
export const ENV_REFERENCE_RULE = `may only name variables starting with ${PROVIDER_KEY_ENV_PREFIX} or listed in PROVIDER_KEY_ENV_ALLOW`;

/** Refuses a written `env:NAME` (BAD_USER_INPUT on `field`) that is malformed or names a variable outside the allow-list. */
export function checkEnvReference(value: string, environment: CredentialEnvironment, field: string): void {
  const name = ENV_REFERENCE.exec(value)?.[1];
  if (name === undefined) throw new BadUserInputError(`${field} "env:NAME" needs a valid environment variable name`, field);
  if (!environment.providerKeyEnvAllowed(name)) throw new BadUserInputError(`${field} "env:NAME" ${ENV_REFERENCE_RULE}`, field);
}

export type EnvReading = { ok: true; value: string } | { ok: false; reason: 'not-allowed' | 'unset' };

/**
 * The value a stored `env:NAME` stands for. A row written before the
 * allow-list, or by TYPO3, may name any variable: such a name is
 * `not-allowed` and its variable is never read.
 */
export function readEnvReference(value: string, environment: CredentialEnvironment): EnvReading {
  const name = ENV_REFERENCE.exec(value)?.[1];
  if (name === undefined || !environment.providerKeyEnvAllowed(name)) return { ok: false, reason: 'not-allowed' };
  const read = environment.readEnv(name);
  return read === undefined || read === '' ? { ok: false, reason: 'unset' } : { ok: true, value: read };
}
