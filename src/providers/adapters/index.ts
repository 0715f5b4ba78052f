/** The provider adapters' public surface; nothing else in here is meant to be imported from outside. */
export { createChatAdapter, type ChatAdapterDeps } from './registry';
export {
  ProviderAuthenticationError,
  ProviderCancelledError,
  ProviderConnectionError,
  ProviderError,
  type ProviderErrorKind,
  ProviderRateLimitError,
  ProviderRequestError,
  ProviderResponseError,
} from './errors';
export type { AdapterLogger, RetryPolicy } from './http';
export * from './types';
