/**
 * Which API key and base URL a provider row gives the adapter. `env:NAME`
 * keys are resolved by the caller before the adapter sees them; what arrives
 * here is either a key, nothing, or something that cannot be a key.
 */
import { ProviderAuthenticationError, ProviderRequestError } from './errors';
import type { ProviderSettings } from './types';

/**
 * TYPO3's nr-vault stores a reference in `api_key`: a UUID v7 or
 * `%vault(name)%` (behaviour.md §1). This service cannot read the vault, so
 * such a value is no key. nr-vault's free-form names (`my_api_key`) are not
 * recognised on purpose: they are indistinguishable from real keys of some
 * providers (Mistral keys are plain alphanumerics).
 */
const UUID_V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/i;
const VAULT_REFERENCE = /^%vault\([^)]+\)%$/;

export function isVaultIdentifier(value: string): boolean {
  const trimmed = value.trim();
  return UUID_V7.test(trimmed) || VAULT_REFERENCE.test(trimmed);
}

/**
 * The key to send, or null when the provider type works without one and none
 * is set. A vault identifier is refused even where a key is optional: someone
 * meant to authenticate, and sending the identifier as a key would only fail
 * later and more obscurely.
 */
export function usableApiKey(settings: ProviderSettings, required: boolean): string | null {
  const key = settings.apiKey?.trim() ?? '';
  if (key !== '' && isVaultIdentifier(key)) {
    throw new ProviderAuthenticationError(
      { provider: settings.identifier },
      'no usable API key: the stored key is a TYPO3 vault identifier, which this service cannot read; set the API key on the provider',
    );
  }
  if (key === '') {
    if (!required) return null;
    throw new ProviderAuthenticationError(
      { provider: settings.identifier },
      `no usable API key: the ${settings.adapterType} adapter needs one (none is set, or it is a TYPO3 vault identifier this service cannot read); set the API key on the provider`,
    );
  }
  return key;
}

/**
 * The endpoint without trailing slashes; the adapter type's default when the
 * row leaves it empty. A `custom` provider has no default and must name one.
 */
export function resolveBaseUrl(settings: ProviderSettings, defaultUrl: string | null): string {
  const configured = settings.endpointUrl.trim();
  const base = configured === '' ? defaultUrl : configured;
  if (base === null) {
    throw new ProviderRequestError(
      { provider: settings.identifier },
      `no endpoint: a ${settings.adapterType} provider needs its endpoint URL set`,
    );
  }
  let parsed: URL;
  try {
    parsed = new URL(base);
  } catch {
    throw new ProviderRequestError({ provider: settings.identifier }, 'invalid endpoint URL');
  }
  if (parsed.protocol !== 'http:' && parsed.protocol !== 'https:') {
    throw new ProviderRequestError({ provider: settings.identifier }, 'endpoint URL must use http or https');
  }
  return base.replace(/\/+$/, '');
}
