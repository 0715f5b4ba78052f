/**
 * A graphql-ws connection spoken by hand (the `graphql-transport-ws`
 * protocol over `ws`): for tests that need what a client library hides —
 * bursts of raw messages, close codes, the order answers arrive in.
 */
import WebSocket from 'ws';

export interface WsMessage {
  type: string;
  id?: string;
  payload?: unknown;
}

export class RawGraphQLSocket {
  readonly messages: WsMessage[] = [];
  /** The same messages as the text that arrived, for exact JSON bytes. */
  readonly texts: string[] = [];
  /** Resolves with the close code and reason once the socket is closed, by either side. */
  readonly closed: Promise<{ code: number; reason: string }>;
  private readonly waiters: { test: (message: WsMessage) => boolean; missing: number; resolve: () => void }[] = [];

  private constructor(readonly socket: WebSocket) {
    this.closed = new Promise((resolve) => socket.once('close', (code: number, reason: Buffer) => resolve({ code, reason: String(reason) })));
    socket.on('message', (data: Buffer) => {
      this.texts.push(String(data));
      const message = JSON.parse(String(data)) as WsMessage;
      this.messages.push(message);
      for (const waiter of [...this.waiters]) {
        if (waiter.test(message)) waiter.missing -= 1;
        if (waiter.missing <= 0) {
          this.waiters.splice(this.waiters.indexOf(waiter), 1);
          waiter.resolve();
        }
      }
    });
  }

  /** Opens a connection and completes `connection_init` with the token (or none). */
  static async connect(url: string, token: string | null): Promise<RawGraphQLSocket> {
    const socket = new WebSocket(url, 'graphql-transport-ws');
    const raw = new RawGraphQLSocket(socket);
    await new Promise<void>((resolve, reject) => {
      socket.once('open', () => resolve());
      socket.once('error', reject);
    });
    raw.send({ type: 'connection_init', payload: token ? { authorization: `Bearer ${token}` } : {} });
    await Promise.race([raw.waitFor((m) => m.type === 'connection_ack'), raw.closed]);
    return raw;
  }

  send(message: WsMessage): void {
    this.socket.send(JSON.stringify(message));
  }

  subscribe(id: string, query: string, variables: Record<string, unknown> = {}): void {
    this.send({ type: 'subscribe', id, payload: { query, variables } });
  }

  /** Resolves once a message matching `test` has arrived (or at once if one has). */
  waitFor(test: (message: WsMessage) => boolean, count = 1): Promise<void> {
    const missing = count - this.messages.filter(test).length;
    if (missing <= 0) return Promise.resolve();
    return new Promise((resolve) => this.waiters.push({ test, missing, resolve }));
  }

  of(id: string): WsMessage[] {
    return this.messages.filter((message) => message.id === id);
  }

  /** Resolves once everything sent has left this process. */
  async flushed(): Promise<void> {
    while (this.socket.bufferedAmount > 0) await new Promise((resolve) => setImmediate(resolve));
  }

  close(): void {
    this.socket.close();
  }
}

/** The `extensions.code` of an `error` message's first error. */
export function errorCode(message: WsMessage | undefined): string | undefined {
  const errors = message?.payload as { extensions?: { code?: string } }[] | undefined;
  return errors?.[0]?.extensions?.code;
}
