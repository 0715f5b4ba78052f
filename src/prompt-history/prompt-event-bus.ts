/**
 * Carries prompt change events to `promptChanged` subscribers: in-process by
 * default, through Redis when several instances share one database. The
 * channel name includes a key of the database, so instances on different
 * databases (and parallel test servers) never hear each other.
 */
import { EventEmitter } from 'node:events';
import Redis from 'ioredis';
import type { Logger } from '../logger';
import type { VersionedKind, VersionSource } from './version-state';

export interface PromptChangeEvent {
  kind: VersionedKind;
  uid: number;
  identifier: string;
  /** The version the change stored; null when nothing was stored (a hard-deleted row). */
  version: number | null;
  source: VersionSource;
  /** Identifiers of the configurations whose prompt the change may alter. */
  affectedConfigurations: string[];
  /** Unix milliseconds. */
  at: number;
}

export type PromptChangeListener = (event: PromptChangeEvent) => void;

export interface PromptEventBus {
  publish(event: PromptChangeEvent): void;
  subscribe(listener: PromptChangeListener): () => void;
  close(): Promise<void>;
}

export class InProcessPromptEventBus implements PromptEventBus {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  publish(event: PromptChangeEvent): void {
    this.emitter.emit('change', event);
  }

  subscribe(listener: PromptChangeListener): () => void {
    this.emitter.on('change', listener);
    return () => void this.emitter.off('change', listener);
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

export class RedisPromptEventBus implements PromptEventBus {
  private readonly local = new InProcessPromptEventBus();
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly channel: string;

  constructor(url: string, databaseKey: string, private readonly logger: Logger) {
    this.channel = `promptwire:prompt-changed:${databaseKey}`;
    this.publisher = new Redis(url, { maxRetriesPerRequest: 3 });
    this.subscriber = new Redis(url);
    this.subscriber.on('message', (_channel: string, payload: string) => {
      try {
        this.local.publish(JSON.parse(payload) as PromptChangeEvent);
      } catch (error) {
        this.logger.warn({ err: error }, 'dropped an unreadable prompt change message from Redis');
      }
    });
    for (const client of [this.publisher, this.subscriber]) {
      client.on('error', (error: Error) => this.logger.warn({ err: error.message }, 'Redis prompt event bus error'));
    }
  }

  async ready(): Promise<void> {
    await this.subscriber.subscribe(this.channel);
    await this.publisher.ping();
  }

  publish(event: PromptChangeEvent): void {
    this.publisher.publish(this.channel, JSON.stringify(event)).catch((error: unknown) => {
      this.logger.warn({ err: error }, 'could not publish a prompt change to Redis');
    });
  }

  subscribe(listener: PromptChangeListener): () => void {
    return this.local.subscribe(listener);
  }

  async close(): Promise<void> {
    await this.local.close();
    this.publisher.disconnect();
    this.subscriber.disconnect();
  }
}
