/**
 * graphql-ws: a connection_init without a valid token is closed with 4403;
 * a valid one is acknowledged. Spoken with the `ws` package directly, so the
 * test sees the raw protocol, not a client library's interpretation of it.
 */
import WebSocket from 'ws';
import { testDialects } from '../support/databases';
import { ADMIN_TOKEN, collect, startTestServer, type TestServer } from '../support/server';

interface Outcome {
  /** Messages the server sent, parsed. */
  messages: { type: string; [key: string]: unknown }[];
  closeCode: number | null;
  closeReason: string;
}

/** Opens a socket, sends connection_init with the payload, and reports what happened within the wait. */
function connectionInit(url: string, payload: Record<string, unknown>, waitMs = 1500): Promise<Outcome> {
  return new Promise((resolve, reject) => {
    const socket = new WebSocket(url, 'graphql-transport-ws');
    const outcome: Outcome = { messages: [], closeCode: null, closeReason: '' };
    const timer = setTimeout(() => {
      socket.close(1000);
      resolve(outcome);
    }, waitMs);
    socket.on('open', () => socket.send(JSON.stringify({ type: 'connection_init', payload })));
    socket.on('message', (data) => {
      outcome.messages.push(JSON.parse(String(data)) as Outcome['messages'][number]);
      if (outcome.messages.some((message) => message.type === 'connection_ack')) {
        clearTimeout(timer);
        socket.close(1000);
        resolve(outcome);
      }
    });
    socket.on('close', (code, reason) => {
      clearTimeout(timer);
      outcome.closeCode ??= code;
      outcome.closeReason = reason.toString();
      resolve(outcome);
    });
    socket.on('error', reject);
  });
}

describe.each(testDialects)('graphql-ws authentication (%s)', (dialect) => {
  let t: TestServer;

  beforeAll(async () => {
    t = await startTestServer(dialect);
  });

  afterAll(async () => {
    await t?.stop();
  });

  it('negotiates the graphql-transport-ws subprotocol', async () => {
    const protocol = await new Promise<string>((resolve, reject) => {
      const socket = new WebSocket(t.server.wsUrl, 'graphql-transport-ws');
      socket.on('open', () => {
        resolve(socket.protocol);
        socket.close(1000);
      });
      socket.on('error', reject);
    });
    expect(protocol).toBe('graphql-transport-ws');
  });

  it('closes a connection_init without a token with 4403', async () => {
    const outcome = await connectionInit(t.server.wsUrl, {});
    expect(outcome.closeCode).toBe(4403);
    expect(outcome.messages.map((message) => message.type)).not.toContain('connection_ack');
  });

  it('closes a connection_init with an invalid token with 4403', async () => {
    const outcome = await connectionInit(t.server.wsUrl, { authorization: 'Bearer not-a-real-token-0123456789' });
    expect(outcome.closeCode).toBe(4403);
    expect(outcome.messages.map((message) => message.type)).not.toContain('connection_ack');
  });

  it('closes a connection_init whose authorization is not a string with 4403', async () => {
    const outcome = await connectionInit(t.server.wsUrl, { authorization: { token: ADMIN_TOKEN } });
    expect(outcome.closeCode).toBe(4403);
  });

  it('acknowledges a connection_init with a valid token', async () => {
    const outcome = await connectionInit(t.server.wsUrl, { authorization: `Bearer ${ADMIN_TOKEN}` });
    expect(outcome.messages.map((message) => message.type)).toContain('connection_ack');
    expect(outcome.closeCode).not.toBe(4403);
  });

  it('acknowledges a VIEWER token, and serves it an operation', async () => {
    const viewer = await t.tokenFor('VIEWER');
    const outcome = await connectionInit(t.server.wsUrl, { authorization: `Bearer ${viewer}` });
    expect(outcome.messages.map((message) => message.type)).toContain('connection_ack');

    const client = t.wsClient(viewer);
    const { events, errors, done } = collect<{ skills: unknown[] }>(client, '{ skills { uid } }', {});
    await done;
    expect(errors).toEqual([]);
    expect(events).toEqual([{ skills: [] }]);
  });

  it('refuses a token revoked before the connection', async () => {
    const created = await t.ok<{ createApiToken: { uid: number; token: string } }>('mutation { createApiToken(name: "ws revoked", role: VIEWER) { uid token } }');
    await t.ok('mutation($uid: Int!) { revokeApiToken(uid: $uid) }', { uid: created.createApiToken.uid });
    const outcome = await connectionInit(t.server.wsUrl, { authorization: `Bearer ${created.createApiToken.token}` });
    expect(outcome.closeCode).toBe(4403);
  });
});
