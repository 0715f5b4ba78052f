/**
 * Sends the outbox: every instance polls for due deliveries, claims each
 * one before sending it (see WebhookRepository.claim), posts it, and records
 * the outcome. A non-2xx answer, a timeout or a refused address is tried
 * again later (webhook-rules: nextAttemptDelay) with the same delivery id
 * and the same body. A delivery whose sender died mid-attempt is taken over
 * once its lease has run out, by any instance, after a restart too.
 */
import crypto from 'node:crypto';
import type { Logger } from '../logger';
import type { OutboundFetch } from '../shared/outbound-address';
import type { SecretBox } from '../shared/secret-box';
import type { WebhookDeliveryEntity } from './webhook.entity';
import type { WebhookRepository } from './webhook.repository';
import { deliveryHeaders, isDelivered, nextAttemptDelay, type DeliveryRetryPolicy } from './webhook-rules';

export interface WebhookDispatcherOptions extends DeliveryRetryPolicy {
  /** How long one attempt may take before it counts as failed. */
  timeoutMs: number;
  /** How often the outbox is read. */
  pollMs: number;
  /** Attempts in flight at once per instance. */
  concurrency: number;
}

export class WebhookDispatcher {
  readonly instanceId = crypto.randomUUID();
  private timer: NodeJS.Timeout | null = null;
  private nudgeTimer: NodeJS.Timeout | null = null;
  private polling: Promise<void> | null = null;
  private stopped = true;
  private readonly inFlight = new Map<string, { controller: AbortController; done: Promise<void> }>();

  constructor(
    private readonly repository: WebhookRepository,
    private readonly secrets: SecretBox,
    private readonly outbound: OutboundFetch,
    private readonly logger: Logger,
    private readonly options: WebhookDispatcherOptions,
  ) {}

  /**
   * An attempt's lease: longer than the attempt itself (its timeout) plus
   * the writes around it, so nobody takes over a delivery still being sent.
   */
  get leaseMs(): number {
    return this.options.timeoutMs * 2 + 5_000;
  }

  start(): void {
    this.stopped = false;
    this.schedule(0);
  }

  /** Looks at the outbox soon (deliveries were just written; their transaction commits first). */
  nudge(): void {
    if (this.stopped || this.nudgeTimer) return;
    this.nudgeTimer = setTimeout(() => {
      this.nudgeTimer = null;
      void this.pollOnce();
    }, 50);
  }

  /** Stops polling and abandons attempts in flight: they are due again at once, for whichever instance runs next. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    if (this.nudgeTimer) clearTimeout(this.nudgeTimer);
    this.timer = null;
    this.nudgeTimer = null;
    await this.polling;
    for (const attempt of this.inFlight.values()) attempt.controller.abort(new Error('the service is stopping'));
    await Promise.all([...this.inFlight.values()].map((attempt) => attempt.done));
    await this.outbound.close();
  }

  private schedule(delay: number): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      void this.pollOnce().finally(() => this.schedule(this.options.pollMs));
    }, delay);
  }

  private pollOnce(): Promise<void> {
    if (this.polling) return this.polling;
    this.polling = this.claimDue()
      .catch((error: unknown) => this.logger.warn({ errorClass: error instanceof Error ? error.name : typeof error }, 'reading the webhook outbox failed; trying again'))
      .finally(() => {
        this.polling = null;
      });
    return this.polling;
  }

  private async claimDue(): Promise<void> {
    const free = this.options.concurrency - this.inFlight.size;
    if (this.stopped || free <= 0) return;
    const now = Date.now();
    const due = await this.repository.due(now, free * 2);
    for (const row of due) {
      if (this.stopped || this.inFlight.size >= this.options.concurrency) break;
      if (this.inFlight.has(row.id)) continue;
      if (!(await this.repository.claim(row.id, this.instanceId, now, Date.now() + this.leaseMs))) continue;
      const controller = new AbortController();
      const done = this.attempt(row, row.attempts + 1, controller.signal)
        .catch((error: unknown) => this.logger.warn({ delivery: row.id, errorClass: error instanceof Error ? error.name : typeof error }, 'recording a webhook attempt failed; the delivery is retried when its lease runs out'))
        .finally(() => {
          this.inFlight.delete(row.id);
          if (!this.stopped) this.nudge();
        });
      this.inFlight.set(row.id, { controller, done });
    }
  }

  private async attempt(row: WebhookDeliveryEntity, attempts: number, stopping: AbortSignal): Promise<void> {
    const webhook = await this.repository.find(row.webhookId);
    if (!webhook) return; // deleted since: its deliveries went with it
    let responseStatus: number | null = null;
    let problem: string | null = null;
    const secret = webhook.secret === null ? null : this.secrets.decrypt(webhook.secret);
    if (webhook.secret !== null && secret === null) {
      problem = 'the secret cannot be decrypted with this SECRET_KEY; create the webhook again';
    } else {
      const signal = AbortSignal.any([stopping, AbortSignal.timeout(this.options.timeoutMs)]);
      try {
        const response = await this.outbound.fetch(webhook.url, { method: 'POST', headers: deliveryHeaders({ id: row.id, event: row.event, body: row.payload }, secret), body: row.payload, signal });
        responseStatus = response.status;
        await response.body?.cancel().catch(() => undefined);
        if (!isDelivered(response.status)) problem = `the receiver answered HTTP ${response.status}`;
      } catch (error) {
        problem = stopping.aborted ? 'the sending instance stopped during the attempt' : describeFailure(error, this.options.timeoutMs);
      }
    }
    const now = Date.now();
    if (problem === null) {
      await this.repository.settle(row.id, this.instanceId, { status: 'delivered', nextAttemptAt: now, lastError: null, responseStatus, deliveredAt: now });
      this.logger.info({ delivery: row.id, event: row.event, attempts }, 'webhook delivered');
      return;
    }
    // An attempt cut short by a stop does not wait: the next instance sends it at once.
    const delay = stopping.aborted ? 0 : nextAttemptDelay(attempts, this.options, Math.random());
    await this.repository.settle(row.id, this.instanceId, {
      status: delay === null ? 'failed' : 'pending',
      nextAttemptAt: now + (delay ?? 0),
      lastError: problem.slice(0, 500),
      responseStatus,
      deliveredAt: 0,
    });
    this.logger.warn({ delivery: row.id, event: row.event, attempts, problem, retryInMs: delay }, delay === null ? 'webhook delivery failed for good' : 'webhook attempt failed; retrying later');
  }
}

/** Words for a failed attempt; never a header (the signature) or the body. */
function describeFailure(error: unknown, timeoutMs: number): string {
  const failure = error as { name?: string; message?: string; cause?: { code?: string; message?: string; name?: string } } | null;
  if (failure?.name === 'TimeoutError') return `no answer within ${timeoutMs / 1000} s`;
  if (failure?.cause?.name === 'OutboundAddressRefusedError' || failure?.name === 'OutboundAddressRefusedError') return failure.cause?.message ?? failure.message ?? 'address refused';
  const code = failure?.cause?.code;
  return code ? `the connection failed (${code})` : `the request failed (${failure?.message ?? 'unknown error'})`;
}
