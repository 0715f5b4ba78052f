/**
 * Where the service may send requests that an administrator configured (MCP
 * servers, webhook targets): http(s) only; loopback, link-local, private and
 * every other non-public address refused unless the URL's host is listed in
 * WEBHOOK_ALLOWED_HOSTS.
 *
 * A host name is judged by the addresses it resolves to, at every new
 * connection (the `lookup` of the connection itself, not an earlier
 * look-up), so a name that resolves to a public address once and to a private
 * one later (DNS rebinding) is refused the second time. Redirects are never
 * followed: a 3xx answer is the caller's failure, so no redirect reaches a
 * refused address.
 */
import dns from 'node:dns';
import net from 'node:net';
import ipaddr from 'ipaddr.js';
import { Agent, fetch as undiciFetch, type Dispatcher } from 'undici';

/** A URL or an address the rule refuses. Its message names the host, never a credential. */
export class OutboundAddressRefusedError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'OutboundAddressRefusedError';
  }
}

/** Only public unicast addresses pass; an IPv4-mapped IPv6 address is judged as the IPv4 address. */
export function isPublicAddress(address: string): boolean {
  if (!ipaddr.isValid(address)) return false;
  return ipaddr.process(address).range() === 'unicast';
}

/** The host as the allow-list compares it: lower case, IPv6 brackets removed. */
export function normaliseHost(host: string): string {
  return host.trim().toLowerCase().replace(/^\[(.*)\]$/, '$1');
}

/** Parses WEBHOOK_ALLOWED_HOSTS (comma-separated host names or addresses). */
export function parseAllowedHosts(value: string | undefined): string[] {
  return [...new Set((value ?? '').split(',').map(normaliseHost).filter((host) => host !== ''))];
}

export type UrlCheck = { ok: true; url: URL } | { ok: false; reason: string };

/**
 * What can be decided without a look-up: the scheme, no credentials in the
 * URL, and a literal address that is not public and not allowed.
 */
export function checkOutboundUrl(text: string, allowedHosts: readonly string[]): UrlCheck {
  let url: URL;
  try {
    url = new URL(text);
  } catch {
    return { ok: false, reason: 'is not a valid absolute URL' };
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:') return { ok: false, reason: 'must use http or https' };
  if (url.username !== '' || url.password !== '') return { ok: false, reason: 'must not carry credentials' };
  const host = normaliseHost(url.hostname);
  if (net.isIP(host) !== 0 && !isPublicAddress(host) && !allowedHosts.includes(host)) {
    return { ok: false, reason: `points at the non-public address ${host}; list the host in WEBHOOK_ALLOWED_HOSTS to allow it` };
  }
  return { ok: true, url };
}

type LookupAddress = { address: string; family: number };
export type Resolver = (hostname: string, callback: (error: Error | null, addresses: LookupAddress[]) => void) => void;

const systemResolver: Resolver = (hostname, callback) => {
  dns.lookup(hostname, { all: true, verbatim: true }, (error, addresses) => callback(error, addresses ?? []));
};

/**
 * A `lookup` for `net.connect` that refuses a host any of whose addresses is
 * not public (one private record among public ones is enough to refuse: the
 * connection might pick it).
 */
export function guardedLookup(resolve: Resolver = systemResolver): net.LookupFunction {
  return ((hostname: string, options: dns.LookupOptions, callback: (error: Error | null, address: string | LookupAddress[], family?: number) => void) => {
    resolve(hostname, (error, addresses) => {
      if (error) return callback(error, '', 0);
      const refused = addresses.find((entry) => !isPublicAddress(entry.address));
      if (refused !== undefined || addresses.length === 0) {
        return callback(new OutboundAddressRefusedError(`${hostname} resolves to the non-public address ${refused?.address ?? '(none)'}; list the host in WEBHOOK_ALLOWED_HOSTS to allow it`), '', 0);
      }
      const wanted = options.family === 4 || options.family === 6 ? addresses.filter((entry) => entry.family === options.family) : addresses;
      if (options.all) return callback(null, wanted);
      const first = wanted[0] ?? addresses[0]!;
      return callback(null, first.address, first.family);
    });
  }) as net.LookupFunction;
}

export interface OutboundFetchOptions {
  allowedHosts: readonly string[];
  /** For tests: how host names resolve (default: the system resolver). */
  resolve?: Resolver;
}

/** A `fetch` whose connections obey the address rule; keep one per feature so its pooled connections are reused. */
export interface OutboundFetch {
  fetch: (input: string | URL, init?: RequestInit) => Promise<Response>;
  close(): Promise<void>;
}

export function createOutboundFetch(options: OutboundFetchOptions): OutboundFetch {
  const allowed = new Set(options.allowedHosts.map(normaliseHost));
  // Allowed hosts skip the address check; every other host connects through the guarded look-up.
  const open = new Agent({ keepAliveTimeout: 30_000 });
  const guarded = new Agent({ keepAliveTimeout: 30_000, connect: { lookup: guardedLookup(options.resolve) } });
  return {
    async fetch(input, init) {
      const check = checkOutboundUrl(String(input), [...allowed]);
      if (!check.ok) throw new OutboundAddressRefusedError(`The URL ${check.reason}.`);
      const dispatcher: Dispatcher = allowed.has(normaliseHost(check.url.hostname)) ? open : guarded;
      const response = await undiciFetch(check.url, { ...(init as Parameters<typeof undiciFetch>[1]), redirect: 'manual', dispatcher });
      return response as unknown as Response;
    },
    async close() {
      await Promise.all([open.close(), guarded.close()]);
    },
  };
}

/**
 * What a target's host name resolves to now, for a clear refusal when it is
 * configured (`localhost`, a name pointing at a private network). Every
 * connection is judged again (`guardedLookup`); a name that does not resolve
 * yet passes here.
 */
export async function checkOutboundHost(url: URL, allowedHosts: readonly string[], resolve: Resolver = systemResolver): Promise<UrlCheck> {
  const host = normaliseHost(url.hostname);
  if (net.isIP(host) !== 0 || allowedHosts.includes(host)) return { ok: true, url };
  const addresses = await new Promise<LookupAddress[]>((done) => resolve(host, (error, found) => done(error ? [] : found)));
  const refused = addresses.find((entry) => !isPublicAddress(entry.address));
  if (refused) return { ok: false, reason: `points at ${host}, which resolves to the non-public address ${refused.address}; list the host in WEBHOOK_ALLOWED_HOSTS to allow it` };
  return { ok: true, url };
}
