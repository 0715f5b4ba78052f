/**
 * Carries stored run steps and live deltas to watchers: in-process by default,
 * through Redis when several instances share one database (REDIS_URL).
 * The bus never holds history — the event table does; a watcher that missed
 * something reads it from there.
 */
import crypto from 'node:crypto';
import Redis from 'ioredis';
import type { Logger } from '../logger';
import type { RunDelta } from './engine/run-step';

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
  | { type: 'delta'; delta: RunDelta }
  /** Asks whichever instance executes the run to abort it. */
  | { type: 'cancel' }
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
  close(): Promise<void>;
}

class ListenerTable {
  private readonly listeners = new Map<string, Set<BusListener>>();

  add(runId: string, listener: BusListener): boolean {
    let set = this.listeners.get(runId);
    const first = !set;
    if (!set) this.listeners.set(runId, (set = new Set()));
    set.add(listener);
    return first;
  }

  /** Returns true when the run has no listener left. */
  remove(runId: string, listener: BusListener): boolean {
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

  deliverToAll(message: BusMessage): void {
    for (const runId of [...this.listeners.keys()]) this.deliver(runId, message);
  }

  deliver(runId: string, message: BusMessage): void {
    const set = this.listeners.get(runId);
    if (!set) return;
    for (const listener of [...set]) listener(message);
  }
}

export class InProcessTraceBus implements TraceBus {
  private readonly table = new ListenerTable();

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

export class RedisTraceBus implements TraceBus {
  private readonly table = new ListenerTable();

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

  async close(): Promise<void> {
    this.publisher.disconnect();
    this.subscriber.disconnect();
  }
}
