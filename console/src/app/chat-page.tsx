/**
 * The chat pages: `/chat` opens a conversation on a configuration (and lists
 * the caller's recent ones); `/chat/<id>` is the conversation. Its messages
 * come from the server (watchConversation: read in pages, then each new one
 * as it is stored, across reconnections); a reply streams as it is made
 * through the useChat endpoint, and a reload mid-turn resumes it from the
 * start. The stored messages are the authority: a streamed reply gives way
 * to the stored one of the same id.
 */
import { useEffect, useMemo, useRef, useState, type FormEvent } from 'react';
import {
  ConfigurationsDocument,
  ConversationsDocument,
  StartConversationDocument,
  watchConversation,
  WatchConversationError,
  type ConversationMessage,
  type ConversationState,
  type ConversationsQuery,
} from '../../../src/client';
import { ConfigurationSelect, startableConfigurations, type ListedConfiguration } from '../shared/configuration-select';
import { readToken, request } from '../shared/session';
import { ChatRefusal, resumeChatStream, sendChatMessage, type StreamedReply } from './chat-stream';

type ListedConversation = ConversationsQuery['conversationsConnection']['nodes'][number];

export function ChatStart() {
  const [configurations, setConfigurations] = useState<ListedConfiguration[] | null>(null);
  const [recent, setRecent] = useState<ListedConversation[]>([]);
  const [configuration, setConfiguration] = useState('');
  const [title, setTitle] = useState('');
  const [problem, setProblem] = useState<string | null>(null);
  const [starting, setStarting] = useState(false);

  useEffect(() => {
    Promise.all([request(ConfigurationsDocument, { limit: 100 }), request(ConversationsDocument, { first: 20 })])
      .then(([configurationData, conversationData]) => {
        const { active, chosen } = startableConfigurations(configurationData.configurations);
        setConfigurations(active);
        setConfiguration(chosen);
        setRecent(conversationData.conversationsConnection.nodes);
      })
      .catch((error: Error) => setProblem(error.message));
  }, []);

  const start = async (event: FormEvent) => {
    event.preventDefault();
    setProblem(null);
    setStarting(true);
    try {
      const data = await request(StartConversationDocument, { input: { configuration, title: title.trim() === '' ? null : title } });
      window.location.assign(`/chat/${encodeURIComponent(data.startConversation.id)}`);
    } catch (error) {
      setProblem((error as Error).message);
      setStarting(false);
    }
  };

  if (problem && !configurations) return <p className="problem">{problem}</p>;
  if (!configurations) return <p className="muted">Loading…</p>;
  return (
    <section className="chat-start">
      <h1>New chat</h1>
      <form onSubmit={start}>
        <ConfigurationSelect configurations={configurations} value={configuration} onChange={setConfiguration} />
        <label>
          Title
          <input data-field="title" maxLength={255} value={title} placeholder="Optional" onChange={(event) => setTitle(event.target.value)} />
        </label>
        {problem && <p className="problem">{problem}</p>}
        <button type="submit" data-action="start-chat" disabled={starting || configuration === ''}>
          {starting ? 'Starting…' : 'Start chat'}
        </button>
      </form>
      {recent.length > 0 && (
        <>
          <h2>Recent chats</h2>
          <ul data-recent-chats>
            {recent.map((item) => (
              <li key={item.id}>
                <a href={`/chat/${encodeURIComponent(item.id)}`}>{item.title || item.id}</a> <span className="muted">{item.configurationIdentifier || 'default'} · {item.messageCount} messages</span>
              </li>
            ))}
          </ul>
        </>
      )}
    </section>
  );
}

export function ChatPage({ id }: { id: string }) {
  const [messages, setMessages] = useState<Map<string, ConversationMessage>>(new Map());
  const [conversation, setConversation] = useState<ConversationState | null>(null);
  const [reply, setReply] = useState<StreamedReply | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [gone, setGone] = useState<string | null>(null);
  const [text, setText] = useState('');
  const streaming = useRef(false);

  // The stored messages and the conversation's state, for as long as the page is open.
  useEffect(() => {
    const stop = new AbortController();
    const token = readToken() ?? '';
    (async () => {
      for await (const event of watchConversation({ url: `${window.location.origin}/graphql`, token, conversationId: id, signal: stop.signal })) {
        if (event.kind === 'message') setMessages((current) => new Map(current).set(event.message.id, event.message));
        else setConversation(event.conversation);
      }
    })().catch((error: unknown) => {
      if (error instanceof WatchConversationError) setGone(error.message);
      else if (!stop.signal.aborted) setProblem((error as Error).message);
    });
    return () => stop.abort();
  }, [id]);

  // A turn under way that this page does not stream yet (a reload, another tab): replayed from its start.
  const activeRunId = conversation?.activeRunId ?? null;
  useEffect(() => {
    if (!activeRunId || streaming.current) return;
    streaming.current = true;
    resumeChatStream(id, setReply)
      .then((reading) => reading?.done)
      .catch((error: Error) => setProblem(error.message))
      .finally(() => (streaming.current = false));
  }, [id, activeRunId]);

  const send = async (event: FormEvent) => {
    event.preventDefault();
    setProblem(null);
    const content = text;
    // This page streams the turn it starts: the state announcing it must not start a second stream.
    const before = streaming.current;
    streaming.current = true;
    try {
      const reading = await sendChatMessage(id, content, setReply);
      setText('');
      await reading.done;
      streaming.current = false;
    } catch (error) {
      // Refused (a turn is running, …): the server's own words; a stream already being read goes on.
      streaming.current = before;
      setProblem(error instanceof ChatRefusal ? error.message : (error as Error).message);
    }
  };

  const ordered = useMemo(() => [...messages.values()].sort((a, b) => a.sequence - b.sequence), [messages]);
  if (gone) return <p className="problem">{gone}</p>;
  const busy = activeRunId !== null;
  // The streamed reply shows until the stored message of the same id is there.
  const pending = reply && !messages.has(reply.messageId) && (reply.state === 'streaming' || busy || reply.state === 'error') ? reply : null;

  return (
    <section className="chat" data-conversation={id}>
      <h1>{conversation?.title || 'Chat'}</h1>
      <p className="muted">
        {conversation ? `${conversation.configurationIdentifier || 'default configuration'} · ${conversation.messageCount} messages` : 'Loading…'}
      </p>
      <ol className="messages chat-messages" data-messages>
        {ordered.map((message) => (
          <li key={message.id} data-message-id={message.id} data-role={message.role}>
            <span className="role">{message.role}</span>
            {message.role === 'user' && message.droppedTurns !== null && message.droppedTurns > 0 && (
              <p className="notice" data-dropped-turns={message.droppedTurns}>
                {message.droppedTurns === 1 ? '1 earlier turn was' : `${message.droppedTurns} earlier turns were`} left out of this request to fit the context window (they stay stored).
              </p>
            )}
            <div className="content" data-content>
              {message.content}
            </div>
            {message.role === 'assistant' && message.model !== '' && <span className="muted model">{message.model}</span>}
          </li>
        ))}
        {pending && (
          <li data-streaming={pending.state} data-message-id={pending.messageId} data-role="assistant">
            <span className="role">assistant</span>
            <div className="content" data-content>
              {pending.text}
            </div>
            {pending.state === 'paused' && <p className="notice">A tool call waits for approval on the run page.</p>}
            {pending.error && <p className="problem">{pending.error}</p>}
          </li>
        )}
      </ol>
      {busy && (
        <p className="notice" data-busy>
          Replying… (<a href={`/runs/${encodeURIComponent(activeRunId)}`}>run</a>)
        </p>
      )}
      {problem && (
        <p className="problem" data-problem>
          {problem}
        </p>
      )}
      <form className="chat-input" onSubmit={send}>
        <textarea data-field="message" rows={3} required value={text} placeholder="Your message" onChange={(event) => setText(event.target.value)} />
        <button type="submit" data-action="send">
          Send
        </button>
      </form>
    </section>
  );
}
