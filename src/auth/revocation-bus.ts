/**
 * Tells every instance on one database that an API token was revoked, so that
 * each drops it from its authentication cache and closes its WebSockets at
 * once: in-process by default, through Redis when several instances share a
 * database (the channel names the database, as the other buses do).
 */
import { EventEmitter } from 'node:events';
import Redis from 'ioredis';
import type { Logger } from '../logger';

export type RevocationListener = (tokenUid: number) => void;

export interface RevocationBus {
  /** Announces the revocation to every instance, this one included (its listeners have run when this resolves). */
  publish(tokenUid: number): Promise<void>;
  subscribe(listener: RevocationListener): () => void;
  close(): Promise<void>;
}

export class InProcessRevocationBus implements RevocationBus {
  private readonly emitter = new EventEmitter().setMaxListeners(0);

  async publish(tokenUid: number): Promise<void> {
    this.emitter.emit('revoked', tokenUid);
  }

  subscribe(listener: RevocationListener): () => void {
    this.emitter.on('revoked', listener);
    return () => void this.emitter.off('revoked', listener);
  }

  async close(): Promise<void> {
    this.emitter.removeAllListeners();
  }
}

export class RedisRevocationBus implements RevocationBus {
  private readonly local = new InProcessRevocationBus();
  private readonly publisher: Redis;
  private readonly subscriber: Redis;
  private readonly channel: string;

  constructor(url: string, databaseKey: string, private readonly logger: Logger) {
    this.channel = `promptwire:token-revoked:${databaseKey}`;
    this.publisher = new Redis(url, { maxRetriesPerRequest: 3 });
    this.subscriber = new Redis(url);
    this.subscriber.on('message', (_channel: string, payload: string) => {
      const tokenUid = Number(payload);
      if (Number.isSafeInteger(tokenUid)) void this.local.publish(tokenUid);
    });
    for (const client of [this.publisher, this.subscriber]) {
      client.on('error', (error: Error) => this.logger.warn({ err: error.message }, 'Redis revocation bus error'));
    }
  }

  async ready(): Promise<void> {
    await this.subscriber.subscribe(this.channel);
    await this.publisher.ping();
  }

  async publish(tokenUid: number): Promise<void> {
    // This instance acts at once; the others when Redis delivers (this instance hears its own message again: harmless).
    await this.local.publish(tokenUid);
    try {
      await this.publisher.publish(this.channel, String(tokenUid));
    } catch (error) {
      this.logger.error({ err: error, tokenUid }, 'could not announce a token revocation to the other instances; they notice it when their cache expires');
    }
  }

  subscribe(listener: RevocationListener): () => void {
    return this.local.subscribe(listener);
  }

  async close(): Promise<void> {
    await this.local.close();
    this.publisher.disconnect();
    this.subscriber.disconnect();
  }
}
