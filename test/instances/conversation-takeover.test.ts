/**
 * A conversation turn whose process is killed (SIGKILL) in the middle of its
 * provider call: another process takes the run over, reads the turn's
 * history again from the conversation (the run stores a reference, not a
 * copy), sends exactly what the first process sent, stores the reply once
 * and leaves the conversation idle for the next turn.
 */
import { testDialects } from '../support/databases';
import { Instances, waitForRunEnd } from '../support/instances';
import type { ServerProcess } from '../support/server-process';
import { createScriptedConfiguration } from '../runs/run-kit';
import { gate } from '../runs/scripted-provider';

const LEASE = { RUN_LEASE_SECONDS: '3' };
const redisUrl = process.env.TEST_REDIS_URL;

type Message = { sequence: number; role: string; content: string };
type Step = { sequence: number; kind: string; messagesSent: { role: string; content: string | null }[] | null; warnings: string[] | null };
type Run = { status: string; finalContent: string | null; steps: Step[] };
const RUN = 'status finalContent steps { sequence kind messagesSent { role content } warnings }';

const wire = (body: Record<string, unknown>) => (body.messages as { role: string; content: string }[]).map((m) => `${m.role}:${m.content}`);

async function startConversation(server: ServerProcess, configuration: string): Promise<string> {
  return (await server.ok<{ startConversation: { id: string } }>('mutation($input: StartConversationInput!) { startConversation(input: $input) { id } }', { input: { configuration } })).startConversation.id;
}

async function send(server: ServerProcess, conversationId: string, content: string): Promise<string> {
  return (await server.ok<{ sendMessage: { run: { id: string } } }>('mutation($input: SendMessageInput!) { sendMessage(input: $input) { run { id } } }', { input: { conversationId, content } })).sendMessage.run.id;
}

async function messagesOf(server: ServerProcess, conversationId: string): Promise<Message[]> {
  return (await server.ok<{ conversation: { messages: Message[] } }>('query($id: ID!) { conversation(id: $id) { messages { sequence role content } } }', { id: conversationId })).conversation.messages;
}

describe.each(testDialects)('a conversation turn taken over after a crash (%s)', (dialect) => {
  const instances = new Instances(dialect);
  afterEach(() => instances.stop(), 60_000);

  /** Turn 1 answered, turn 2 killed mid-call on `owner`; `survivor` (started by the caller) finishes it. */
  async function killedMidTurn(owner: ServerProcess, startSurvivor: () => Promise<ServerProcess>) {
    const provider = await instances.provider();
    const configuration = await createScriptedConfiguration(owner, provider);
    provider.script(
      { text: 'First answer.', usage: { prompt: 3, completion: 2 } },
      { text: 'never sent', gate: gate().promise },
      { text: 'Second answer, after the takeover.', usage: { prompt: 5, completion: 4 } },
      { text: 'Third answer.', usage: { prompt: 7, completion: 2 } },
    );
    const conversation = await startConversation(owner, configuration);
    await waitForRunEnd(owner, await send(owner, conversation, 'one'), 'status');
    const second = await send(owner, conversation, 'two');
    await provider.waitForRequest(2);
    await owner.kill();

    const survivor = await startSurvivor();
    const run = await waitForRunEnd<Run>(survivor, second, RUN);
    return { provider, survivor, conversation, second, run };
  }

  function expectTakenOver({ provider, run }: { provider: Awaited<ReturnType<Instances['provider']>>; run: Run }): void {
    expect(run).toMatchObject({ status: 'COMPLETED', finalContent: 'Second answer, after the takeover.' });
    // The call in flight is made again with the history read back from the conversation: the very messages of the first try.
    expect(provider.requests).toHaveLength(3);
    expect(wire(provider.requests[2]!.body)).toEqual(wire(provider.requests[1]!.body));
    expect(wire(provider.requests[2]!.body)).toEqual(['user:one', 'assistant:First answer.', 'user:two']);
    // The REQUEST, read back, is what was sent; nothing is said to be left out.
    const request = run.steps.find((step) => step.kind === 'REQUEST')!;
    expect(request.messagesSent!.map((m) => `${m.role}:${m.content}`)).toEqual(wire(provider.requests[2]!.body));
    expect(request.warnings ?? []).toEqual([]);
  }

  async function expectIdleWithOneReply(server: ServerProcess, conversation: string, provider: Awaited<ReturnType<Instances['provider']>>): Promise<void> {
    expect((await messagesOf(server, conversation)).map((m) => [m.sequence, m.role, m.content])).toEqual([
      [0, 'user', 'one'],
      [1, 'assistant', 'First answer.'],
      [2, 'user', 'two'],
      [3, 'assistant', 'Second answer, after the takeover.'],
    ]);
    // Released: the next turn is taken, and sends the whole stored history.
    await waitForRunEnd(server, await send(server, conversation, 'three'), 'status');
    expect(wire(provider.requests[3]!.body)).toEqual(['user:one', 'assistant:First answer.', 'user:two', 'assistant:Second answer, after the takeover.', 'user:three']);
    expect((await messagesOf(server, conversation)).map((m) => m.content)).toEqual(['one', 'First answer.', 'two', 'Second answer, after the takeover.', 'three', 'Third answer.']);
  }

  test('the restarted service finishes the turn from the stored reference: the same history sent, the reply stored once, the conversation released', async () => {
    const owner = await instances.start(LEASE);
    const taken = await killedMidTurn(owner, () => instances.start({ ...LEASE, RUN_MIGRATIONS: 'false' }));
    expectTakenOver(taken);
    await expectIdleWithOneReply(taken.survivor, taken.conversation, taken.provider);
  }, 90_000);

  // Two live processes on one database: MySQL + Redis only (defined there alone, so nothing is listed as skipped).
  if (dialect === 'mysql') (redisUrl ? test : test.skip)('two instances on MySQL + Redis: the other instance, which never served the conversation, finishes the killed turn and takes the next one', async () => {
    const env = { ...LEASE, REDIS_URL: redisUrl! };
    const owner = await instances.start(env);
    const survivor = await instances.start({ ...env, RUN_MIGRATIONS: 'false' });
    const taken = await killedMidTurn(owner, async () => survivor);
    expectTakenOver(taken);
    await expectIdleWithOneReply(survivor, taken.conversation, taken.provider);
  }, 90_000);
});
