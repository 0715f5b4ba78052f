/**
 * Carries stored run steps and live deltas to watchers: in-process by default,
 * through Redis when several instances share one database (REDIS_URL).
 * The bus never holds history — the event table does; a watcher that missed
 * something reads it from there.
 */
import crypto from 'node:crypto';
import Redis from 'ioredis';
import type { Logger } from '../logger';
import type { LoopDelta } from './engine/loop-step';

/** A step as stored: the engine's step plus its sequence number. */
export interface StoredStep {
  sequence: number;
  kind: string;
  round: number;
  durationMs: number;
  [field: string]: unknown;
}

export type BusMessage =
  | { type: 'step'; step: StoredStep }
  | { type: 'delta'; delta: LoopDelta }
  /** On the run feed's channel: a run's row changed (see run-feed). */
  | { type: 'run-changed'; runId: string }
  /**
   * Local only, never published: the bus was disconnected and is back, so
   * messages published meanwhile are lost. Watchers read the table.
   */
  | { type: 'reconnected' };

export type BusListener = (message: BusMessage) => void;

export interface TraceBus {
  publish(runId: string, message: BusMessage): void;
  subscribe(runId: string, listener: BusListener): () => void;
  /** Listeners of a run in this process. */
  listenerCount(runId: string): number;
  /**
   * Asks whichever instance drives the run to abort it. Resolves with how
   * many drivers heard it: 0 when no live instance that the bus reaches
   * drives the run (its driver died; in-process, any driver in another
   * process); null when the bus could not ask (Redis unreachable).
   */
  requestCancel(runId: string): Promise<number | null>;
  /** The driver of a run hears the run's cancel requests, from any instance; returns the unsubscribe. */
  onCancelRequest(runId: string, listener: () => void): () => void;
  close(): Promise<void>;
}

/** Listeners by run id (bus messages; for cancel requests, nothing). */
class ListenerTable<M = BusMessage> {
  private readonly listeners = new Map<string, Set<(message: M) => void>>();

  add(runId: string, listener: (message: M) => void): boolean {
    let set = this.listeners.get(runId);
    const first = !set;
    if (!set) this.listeners.set(runId, (set = new Set()));
    set.add(listener);
    return first;
  }

  /** Returns true when the run has no listener left. */
  remove(runId: string, listener: (message: M) => void): boolean {
    const set = this.listeners.get(runId);
    if (!set) return false;
    set.delete(listener);
    if (set.size > 0) return false;
    this.listeners.delete(runId);
    return true;
  }

  count(runId: string): number {
    return this.listeners.get(runId)?.size ?? 0;
  }

  deliverToAll(message: M): void {
    for (const runId of [...this.listeners.keys()]) this.deliver(runId, message);
  }

  /** Returns how many listeners the message was handed to. */
  deliver(runId: string, message: M): number {
    const set = this.listeners.get(runId);
    if (!set) return 0;
    const listeners = [...set];
    for (const listener of listeners) listener(message);
    return listeners.length;
  }
}

export class InProcessTraceBus implements TraceBus {
  private readonly table = new ListenerTable();
  private readonly cancels = new ListenerTable<void>();

  async requestCancel(runId: string): Promise<number | null> {
    return this.cancels.deliver(runId, undefined);
  }

  onCancelRequest(runId: string, listener: () => void): () => void {
    this.cancels.add(runId, listener);
    return () => void this.cancels.remove(runId, listener);
  }

  listenerCount(runId: string): number {
    return this.table.count(runId);
  }

  publish(runId: string, message: BusMessage): void {
    this.table.deliver(runId, message);
  }

  subscribe(runId: string, listener: BusListener): () => void {
    this.table.add(runId, listener);
    return () => void this.table.remove(runId, listener);
  }

  async close(): Promise<void> {}
}

const CHANNEL_PREFIX = 'promptwire:run:';
/** Cancel requests, on a channel of their own: only a run's driver subscribes, so PUBLISH counts the drivers that heard one. */
const CANCEL_PREFIX = 'promptwire:run-cancel:';
const CANCEL_ASK_TIMEOUT_MS = 500;

export class RedisTraceBus implements TraceBus {
  private readonly table = new ListenerTable();
  private readonly cancels = new ListenerTable<void>();

  listenerCount(runId: string): number {
    return this.table.count(runId);
  }
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  readonly subscriberName = `promptwire-trace-${crypto.randomBytes(6).toString('hex')}`;

  constructor(
    url: string,
    private readonly logger: Logger,
  ) {
    this.publisher = new Redis(url, { lazyConnect: false, maxRetriesPerRequest: 3 });
    // Named, so an operator (or a test) can tell this instance's subscriber apart in CLIENT LIST.
    this.subscriber = new Redis(url, { lazyConnect: false, connectionName: this.subscriberName });
    this.subscriber.on('message', (channel: string, payload: string) => {
      if (channel.startsWith(CANCEL_PREFIX)) {
        this.cancels.deliver(channel.slice(CANCEL_PREFIX.length), undefined);
        return;
      }
      try {
        this.table.deliver(channel.slice(CHANNEL_PREFIX.length), JSON.parse(payload) as BusMessage);
      } catch (error) {
        this.logger.warn({ err: error }, 'dropped an unreadable trace message from Redis');
      }
    });
    // ioredis subscribes again by itself after a reconnect; what was published meanwhile is gone.
    let connectedBefore = false;
    this.subscriber.on('ready', () => {
      if (connectedBefore) {
        this.logger.warn({}, 'Redis trace bus reconnected; watchers read what they missed from the table');
        this.table.deliverToAll({ type: 'reconnected' });
      }
      connectedBefore = true;
    });
    for (const client of [this.publisher, this.subscriber]) {
      client.on('error', (error: Error) => this.logger.warn({ err: error.message }, 'Redis trace bus error'));
    }
  }

  async ready(): Promise<void> {
    await Promise.all([this.publisher.ping(), this.subscriber.ping()]);
  }

  publish(runId: string, message: BusMessage): void {
    this.publisher.publish(CHANNEL_PREFIX + runId, JSON.stringify(message)).catch((error: unknown) => {
      // Watchers fill any gap from the event table on the next step or on resubscribe.
      this.logger.warn({ err: error, runId }, 'could not publish a trace message to Redis');
    });
  }

  subscribe(runId: string, listener: BusListener): () => void {
    if (this.table.add(runId, listener)) void this.subscriber.subscribe(CHANNEL_PREFIX + runId);
    return () => {
      if (this.table.remove(runId, listener)) void this.subscriber.unsubscribe(CHANNEL_PREFIX + runId);
    };
  }

  async requestCancel(runId: string): Promise<number | null> {
    let timer: NodeJS.Timeout | undefined;
    try {
      // PUBLISH answers how many subscribers got the message: the drivers of the run, on any instance.
      const published = this.publisher.publish(CANCEL_PREFIX + runId, 'cancel');
      // A Redis that does not answer soon (reconnecting, retrying) is an unknown answer, not a wait.
      const late = new Promise<null>((resolve) => (timer = setTimeout(() => resolve(null), CANCEL_ASK_TIMEOUT_MS)));
      return await Promise.race([published, late]);
    } catch (error) {
      this.logger.warn({ err: error, runId }, 'could not publish a cancel request to Redis');
      return null;
    } finally {
      clearTimeout(timer);
    }
  }

  onCancelRequest(runId: string, listener: () => void): () => void {
    if (this.cancels.add(runId, listener)) void this.subscriber.subscribe(CANCEL_PREFIX + runId);
    return () => {
      if (this.cancels.remove(runId, listener)) void this.subscriber.unsubscribe(CANCEL_PREFIX + runId);
    };
  }

  async close(): Promise<void> {
    this.publisher.disconnect();
    this.subscriber.disconnect();
  }
}
