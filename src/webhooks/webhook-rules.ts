/**
 * The rules of webhook deliveries, as plain functions: which events exist,
 * how a body is signed, which headers go with it, and when a failed attempt
 * is tried again.
 */
import crypto from 'node:crypto';

export const WEBHOOK_EVENTS = ['prompt.changed', 'run.finished'] as const;
export type WebhookEvent = (typeof WEBHOOK_EVENTS)[number];

export function isWebhookEvent(name: string): name is WebhookEvent {
  return (WEBHOOK_EVENTS as readonly string[]).includes(name);
}

/** Stored as CSV; unknown names (a row edited by hand) are ignored. */
export function parseEvents(csv: string): WebhookEvent[] {
  return [...new Set(csv.split(',').map((name) => name.trim()).filter(isWebhookEvent))];
}

/** `sha256=<hex HMAC-SHA256 of the raw body>`, keyed with the webhook's secret. */
export function signatureOf(secret: string, body: string): string {
  return `sha256=${crypto.createHmac('sha256', secret).update(body, 'utf8').digest('hex')}`;
}

/** The headers of one attempt; the same delivery id on every attempt. */
export function deliveryHeaders(delivery: { id: string; event: string; body: string }, secret: string | null): Record<string, string> {
  const headers: Record<string, string> = {
    'content-type': 'application/json',
    'user-agent': 'promptwire-webhooks',
    'x-promptwire-event': delivery.event,
    'x-promptwire-delivery': delivery.id,
  };
  if (secret !== null) headers['x-promptwire-signature'] = signatureOf(secret, delivery.body);
  return headers;
}

/** The body of a delivery: the same bytes on every attempt. */
export function deliveryBody(delivery: { id: string; event: WebhookEvent; occurredAt: number; data: unknown }): string {
  return JSON.stringify({ event: delivery.event, delivery: delivery.id, occurredAt: new Date(delivery.occurredAt).toISOString(), data: delivery.data });
}

export interface DeliveryRetryPolicy {
  /** The wait after the first failed attempt (ms); each later wait is three times the one before. */
  baseDelayMs: number;
  /** Attempts in all; after the last failed one the delivery is `failed`. */
  maxAttempts: number;
}

/** Longest wait between two attempts. */
export const MAX_RETRY_DELAY_MS = 60 * 60 * 1000;

/**
 * When to try again after `attempts` failed attempts, or null when none is
 * left. `random` (0..1) spreads retries by ±10 % so receivers that come back
 * are not hit by every waiting delivery at once.
 */
export function nextAttemptDelay(attempts: number, policy: DeliveryRetryPolicy, random: number): number | null {
  if (attempts >= policy.maxAttempts) return null;
  const delay = Math.min(MAX_RETRY_DELAY_MS, policy.baseDelayMs * 3 ** Math.max(0, attempts - 1));
  return Math.round(delay * (0.9 + 0.2 * Math.min(1, Math.max(0, random))));
}

/** Only a 2xx answer delivers; redirects are not followed, so a 3xx is a failure too. */
export function isDelivered(status: number): boolean {
  return status >= 200 && status < 300;
}
