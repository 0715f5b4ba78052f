/**
 * The useChat endpoint end to end: a real server, a scripted streaming
 * provider, and the Vercel AI SDK's own client side (`DefaultChatTransport`,
 * which posts and parses the stream with the SDK's chunk schema, and
 * `readUIMessageStream`, which builds the message as useChat does), so that
 * compatibility is proven, not assumed. On SQLite and MySQL.
 */
import { AbstractChat, DefaultChatTransport, lastAssistantMessageIsCompleteWithApprovalResponses, readUIMessageStream, type ChatState, type ChatStatus, type UIMessage, type UIMessageChunk } from 'ai';
import { testDialects } from '../support/databases';
import { waitUntil } from '../support/instances';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit } from '../runs/run-kit';
import { gate } from '../runs/scripted-provider';
import { ConversationKit } from './conversation-kit';

const userMessage = (text: string): UIMessage => ({ id: `u-${Math.random()}`, role: 'user', parts: [{ type: 'text', text }] });

/** Every chunk of a stream, and the message useChat builds from them. */
async function readAll(stream: ReadableStream<UIMessageChunk>): Promise<{ chunks: UIMessageChunk[]; message: UIMessage | undefined }> {
  const chunks: UIMessageChunk[] = [];
  const tee = stream.pipeThrough(
    new TransformStream<UIMessageChunk, UIMessageChunk>({
      transform(chunk, controller) {
        chunks.push(chunk);
        controller.enqueue(chunk);
      },
    }),
  );
  let message: UIMessage | undefined;
  for await (const snapshot of readUIMessageStream({ stream: tee, terminateOnError: true })) message = snapshot;
  return { chunks, message };
}

/** useChat without React: the AI SDK's own chat, its state in memory (as @ai-sdk/react keeps it in a hook). */
class MemoryChat extends AbstractChat<UIMessage> {
  constructor(init: ConstructorParameters<typeof AbstractChat<UIMessage>>[0] extends infer I ? Omit<I, 'state'> : never) {
    const messages: UIMessage[] = [];
    const state: ChatState<UIMessage> = {
      status: 'ready' as ChatStatus,
      error: undefined,
      messages,
      pushMessage: (message) => void messages.push(message),
      popMessage: () => void messages.pop(),
      replaceMessage: (index, message) => void (messages[index] = message),
      snapshot: (thing) => structuredClone(thing),
    };
    super({ ...init, state });
  }
}

const textOf = (message: UIMessage | undefined) => (message?.parts ?? []).flatMap((part) => (part.type === 'text' ? [part.text] : [])).join('');
const deltasOf = (chunks: UIMessageChunk[]) => chunks.flatMap((chunk) => (chunk.type === 'text-delta' ? [chunk.delta] : [])).join('');

describe.each(testDialects)('the useChat endpoint (%s)', (dialect) => {
  let ts: TestServer;
  const runs = new RunKit(() => ts);
  const chats = new ConversationKit(() => ts, runs);
  let api = '';
  const transport = (token: string | null = null, seen: Response[] = []) =>
    new DefaultChatTransport({
      api,
      headers: token ? { authorization: `Bearer ${token}` } : undefined,
      fetch: async (input, init) => {
        const response = await fetch(input, init);
        seen.push(response);
        return response;
      },
    });
  let admin: string;

  beforeAll(async () => {
    ts = await startTestServer(dialect);
    api = new URL('/api/chat', ts.url).toString();
    admin = await ts.tokenFor('ADMIN');
  });
  afterAll(async () => {
    await ts?.stop();
    await runs.closeProviders();
  });

  const send = (chat: DefaultChatTransport<UIMessage>, chatId: string, text: string, history: UIMessage[] = []) =>
    chat.sendMessages({ chatId, messages: [...history, userMessage(text)], trigger: 'submit-message', messageId: undefined, abortSignal: undefined });

  test('POST /api/chat streams the turn as useChat reads it; the text joins to the stored reply, and the client history is ignored', async () => {
    const setup = await runs.setup();
    setup.provider.script({ text: 'Hello world', contentChunks: ['Hel', 'lo ', 'world'], usage: { prompt: 7, completion: 3 } }, { text: 'Second.', usage: { prompt: 9, completion: 1 } });
    const conversation = await chats.start({ configuration: setup.configuration });
    const seen: Response[] = [];
    const chat = transport(admin, seen);

    const first = await readAll(await send(chat, conversation.id, 'hi'));
    expect(seen[0]!.status).toBe(200);
    expect(seen[0]!.headers.get('content-type')).toBe('text/event-stream');
    expect(seen[0]!.headers.get('x-vercel-ai-ui-message-stream')).toBe('v1');
    expect(first.chunks[0]).toEqual({ type: 'start', messageId: `${conversation.id}:1` });
    expect(first.chunks.map((c) => c.type)).toEqual(['start', 'start-step', 'text-start', 'text-delta', 'text-delta', 'text-delta', 'text-end', 'finish-step', 'finish']);
    expect(first.message).toMatchObject({ id: `${conversation.id}:1`, role: 'assistant' });
    expect(textOf(first.message)).toBe('Hello world');

    // A client that sends its own (different) history: only its last user message counts.
    const stale = [userMessage('something else'), { id: 'x', role: 'assistant' as const, parts: [{ type: 'text' as const, text: 'made up' }] }];
    const second = await readAll(await send(chat, conversation.id, 'and now?', stale));
    expect(second.chunks[0]).toEqual({ type: 'start', messageId: `${conversation.id}:3` });
    expect(textOf(second.message)).toBe('Second.');
    expect((setup.provider.requests[1]!.body.messages as { role: string; content: string }[]).map((m) => `${m.role}:${m.content}`)).toEqual(['user:hi', 'assistant:Hello world', 'user:and now?']);

    const messages = await chats.messages(conversation.id);
    expect(messages.map((m) => [m.id, m.role, m.content])).toEqual([
      [`${conversation.id}:0`, 'user', 'hi'],
      [`${conversation.id}:1`, 'assistant', 'Hello world'],
      [`${conversation.id}:2`, 'user', 'and now?'],
      [`${conversation.id}:3`, 'assistant', 'Second.'],
    ]);
    // The raw stream ends with [DONE].
    setup.provider.script({ text: 'Third.' });
    const raw = await fetch(api, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${admin}` }, body: JSON.stringify({ id: conversation.id, messages: [userMessage('3')] }) });
    expect((await raw.text()).trimEnd().endsWith('data: [DONE]')).toBe(true);
  });

  test('GET /api/chat/{id}/stream during a turn replays the whole answer without gap or duplicate; 204 once idle', async () => {
    const setup = await runs.setup();
    const held = gate();
    const midway = gate();
    setup.provider.script({ text: 'One two three four', contentChunks: ['One ', 'two ', 'three ', 'four'], gate: held.promise, holdAfter: { frames: 3, gate: midway.promise } });
    const conversation = await chats.start({ configuration: setup.configuration });
    const chat = transport(admin);

    const posted = send(chat, conversation.id, 'count').then(readAll);
    await setup.provider.waitForRequest(1);
    // Before any output: the resumed stream follows the turn from its start.
    const early = chat.reconnectToStream({ chatId: conversation.id }).then((stream) => readAll(stream!));
    held.open();
    // Midway: two pieces streamed; a client resuming now gets the rest from the stored step, not a gap.
    await waitUntil(() => setup.provider.requests[0]!.chunksSent >= 3, { what: 'two streamed pieces' });
    const late = await chat.reconnectToStream({ chatId: conversation.id });
    expect(late).not.toBeNull();
    const lateRead = readAll(late!);
    midway.open();

    const [a, b, c] = await Promise.all([posted, early, lateRead]);
    for (const read of [a, b, c]) {
      expect(read.chunks[0]).toEqual({ type: 'start', messageId: `${conversation.id}:1` });
      expect(deltasOf(read.chunks)).toBe('One two three four');
      expect(textOf(read.message)).toBe('One two three four');
      expect(read.chunks[read.chunks.length - 1]).toEqual({ type: 'finish', finishReason: 'stop' });
    }
    await waitUntil(async () => (await chats.get(conversation.id))!.messageCount === 2, { what: 'the stored reply' });
    expect(await chat.reconnectToStream({ chatId: conversation.id })).toBeNull();
  });

  test('a tool waiting for approval emits tool-approval-request and ends the stream; once decided, a new stream replays the turn to its answer', async () => {
    const setup = await runs.setup();
    const answer = gate();
    setup.provider.script({ toolCalls: [{ name: 'calculator', arguments: { expression: '2+3' } }] }, { text: 'It is 5.', gate: answer.promise });
    const conversation = await chats.start({ configuration: setup.configuration });
    const sent = await chats.send(conversation.id, 'what is 2+3?', { tools: ['calculator'], approvalRequired: ['calculator'] });
    await waitUntil(async () => String((await runs.run(sent.run.id)).status) === 'WAITING_FOR_APPROVAL', { what: 'the approval wait' });

    const resumed = await readAll((await transport(admin).reconnectToStream({ chatId: conversation.id }))!);
    const types = resumed.chunks.map((c) => c.type);
    expect(types).toEqual(['start', 'start-step', 'tool-input-available', 'tool-approval-request', 'finish-step', 'finish']);
    const request = resumed.chunks.find((c) => c.type === 'tool-approval-request') as Extract<UIMessageChunk, { type: 'tool-approval-request' }>;
    const part = resumed.message!.parts.find((p) => p.type === 'dynamic-tool') as { state: string; toolName: string; toolCallId: string };
    expect(part).toMatchObject({ state: 'approval-requested', toolName: 'calculator', toolCallId: request.toolCallId });

    // Approved: a new stream replays the turn, the decision and the tool's output included, to its answer.
    await ts.ok('mutation($runId: ID!, $decisions: [ToolDecisionInput!]!) { resolveToolApproval(runId: $runId, decisions: $decisions) { id } }', {
      runId: sent.run.id,
      decisions: [{ toolCallId: request.toolCallId, approve: true }],
    });
    const resumedAgain = await transport(admin).reconnectToStream({ chatId: conversation.id });
    answer.open();
    const whole = await readAll(resumedAgain!);
    expect(whole.chunks).toContainEqual({ type: 'tool-output-available', toolCallId: request.toolCallId, output: '5', dynamic: true });
    expect(textOf(whole.message)).toBe('It is 5.');
  });

  test('useChat unchanged with tools: addToolApprovalResponse decides the waiting call and the turn streams on into the same message', async () => {
    const setup = await runs.setup();
    setup.provider.script({ toolCalls: [{ name: 'calculator', arguments: { expression: '2+3' } }] }, { text: 'It is 5.', usage: { prompt: 3, completion: 2 } });
    const conversation = await chats.start({ configuration: setup.configuration });
    const seen: Response[] = [];
    const base = transport(admin, seen);
    const chat = new MemoryChat({
      id: conversation.id,
      transport: new DefaultChatTransport({ api, headers: { authorization: `Bearer ${admin}` }, body: { tools: ['calculator'], approvalRequired: ['calculator'] }, fetch: (input, init) => base['fetch']!(input, init) }),
      sendAutomaticallyWhen: lastAssistantMessageIsCompleteWithApprovalResponses,
    });
    await chat.sendMessage({ text: 'what is 2+3?' });
    expect(chat.status).toBe('ready');
    const waiting = chat.lastMessage!;
    const part = waiting.parts.find((p) => p.type === 'dynamic-tool') as { state: string; toolCallId: string; approval?: { id: string } };
    expect(part).toMatchObject({ state: 'approval-requested' });
    expect(setup.provider.requests[0]!.body.tools).toBeDefined();

    // Approving sends the decision back by itself (sendAutomaticallyWhen) and the answer follows in the same message.
    await chat.addToolApprovalResponse({ id: part.approval!.id, approved: true });
    await waitUntil(async () => chat.status === 'ready' && textOf(chat.lastMessage) !== '', { what: 'the answer after the approval' });
    expect(seen.map((r) => r.status)).toEqual([200, 200]);
    expect(chat.messages.map((m) => m.role)).toEqual(['user', 'assistant']);
    const answered = chat.lastMessage!;
    expect(answered.id).toBe(waiting.id);
    expect(answered.parts.filter((p) => p.type === 'dynamic-tool')).toEqual([expect.objectContaining({ toolCallId: part.toolCallId, state: 'output-available', output: '5' })]);
    expect(answered.parts.filter((p) => p.type === 'text').map((p) => (p as { text: string }).text)).toEqual(['It is 5.']);
    // What is stored: the question and the answer.
    await waitUntil(async () => (await chats.messages(conversation.id)).length === 2, { what: 'the stored reply' });
    expect((await chats.messages(conversation.id)).map((m) => `${m.role}:${m.content}`)).toEqual(['user:what is 2+3?', 'assistant:It is 5.']);

    // Deciding again, with nothing waiting, is a CONFLICT; an unknown tool in the body is refused before anything is written.
    const decided = { ...waiting, parts: waiting.parts.map((p) => (p.type === 'dynamic-tool' ? { ...p, state: 'approval-responded', approval: { id: part.approval!.id, approved: true } } : p)) };
    const again = await fetch(api, { method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' }, body: JSON.stringify({ id: conversation.id, messages: [decided] }) });
    expect(again.status).toBe(409);
    expect(((await again.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('CONFLICT');
    const unknownTool = await fetch(api, { method: 'POST', headers: { authorization: `Bearer ${admin}`, 'content-type': 'application/json' }, body: JSON.stringify({ id: conversation.id, messages: [userMessage('x')], tools: ['no_such_tool'] }) });
    expect(unknownTool.status).toBe(400);
    expect(((await unknownTool.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('BAD_USER_INPUT');
    expect(await chats.messages(conversation.id)).toHaveLength(2);
  });

  test('refusals: 401 without a valid token, 403 for VIEWER, 404 foreign or unknown, 400 bad body, 409 busy; nothing written', async () => {
    const setup = await runs.setup();
    const held = gate();
    setup.provider.script({ text: 'ok', gate: held.promise });
    const conversation = await chats.start({ configuration: setup.configuration });
    const post = (body: unknown, token: string | null = admin, contentType = 'application/json') =>
      fetch(api, { method: 'POST', headers: { 'content-type': contentType, ...(token ? { authorization: `Bearer ${token}` } : {}) }, body: JSON.stringify(body) });
    const body = (text: string, id = conversation.id) => ({ id, messages: [userMessage(text)] });

    expect((await post(body('x'), null)).status).toBe(401);
    expect((await post(body('x'), 'pw_not_a_token')).status).toBe(401);
    expect((await fetch(`${api}/${conversation.id}/stream`)).status).toBe(401);
    const viewer = await post(body('x'), await ts.tokenFor('VIEWER'));
    expect(viewer.status).toBe(403);
    expect(((await viewer.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('FORBIDDEN');
    const other = (await ts.ok<{ createApiToken: { token: string } }>('mutation { createApiToken(name: "chat other", role: EDITOR) { token } }')).createApiToken.token;
    expect((await post(body('x'), other)).status).toBe(404);
    expect((await fetch(`${api}/${conversation.id}/stream`, { headers: { authorization: `Bearer ${other}` } })).status).toBe(404);
    expect((await post(body('x', '00000000-0000-4000-8000-000000000000'))).status).toBe(404);
    // An id that is not even valid percent-encoding names no conversation: 404, not a server error.
    const undecodable = await fetch(`${api}/%E0%A4%A/stream`, { headers: { authorization: `Bearer ${admin}` } });
    expect(undecodable.status).toBe(404);
    expect(((await undecodable.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('NOT_FOUND');
    for (const bad of [{ id: conversation.id }, body(''), { ...body('x'), trigger: 'regenerate-message' }, 'text']) {
      const refused = await post(bad);
      expect(refused.status).toBe(400);
      expect(((await refused.json()) as { errors: { extensions: { code: string } }[] }).errors[0]!.extensions.code).toBe('BAD_USER_INPUT');
    }
    expect((await post(body('x'), admin, 'text/plain')).status).toBe(400);
    expect((await chats.get(conversation.id))!.messageCount).toBe(0);

    const streaming = await post(body('first'));
    expect(streaming.status).toBe(200);
    const busy = await post(body('second'));
    expect(busy.status).toBe(409);
    const refusal = (await busy.json()) as { errors: { extensions: { code: string; runId: string } }[] };
    expect(refusal.errors[0]!.extensions.code).toBe('CONFLICT');
    expect(refusal.errors[0]!.extensions.runId).toMatch(/^[0-9a-f-]{36}$/);
    held.open();
    expect((await streaming.text()).trimEnd().endsWith('data: [DONE]')).toBe(true);
    expect((await chats.messages(conversation.id)).map((m) => m.content)).toEqual(['first', 'ok']);
  });
});
