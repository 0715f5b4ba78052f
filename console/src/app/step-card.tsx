import { createContext, memo, useContext, useEffect, useState, type ReactNode } from 'react';
import type { RunStep, RunStepSummary } from '../../../src/client';
import { formatCost, formatDuration, formatTokens } from '../shared/format';

export type Message = NonNullable<RunStep['messagesSent']>[number];

/**
 * A step as the run page has it: the replay and the live trace come without
 * `messagesSent` (each REQUEST repeats the whole transcript so far), which is
 * read when a card shows it; a step that has it (a RunStep) is shown as is.
 */
export type Step = RunStepSummary & { messagesSent?: RunStep['messagesSent'] };

/** Reads one step's messages (by sequence; null: the step has none); provided by the run page. */
export const StepMessagesLoader = createContext<((sequence: number) => Promise<readonly Message[] | null>) | null>(null);

type Loaded = { done: boolean; messages: readonly Message[] | null; problem: string | null };

/** The step's messages: its own, or read through StepMessagesLoader once this is mounted. */
function useStepMessages(step: Step): Loaded {
  const load = useContext(StepMessagesLoader);
  const own = step.messagesSent;
  const [loaded, setLoaded] = useState<Loaded>({ done: false, messages: null, problem: null });
  useEffect(() => {
    if (own !== undefined) return;
    if (!load) {
      setLoaded({ done: false, messages: null, problem: 'The messages of this step cannot be read here.' });
      return;
    }
    let current = true;
    load(step.sequence).then(
      (messages) => current && setLoaded({ done: true, messages, problem: null }),
      (error: unknown) => current && setLoaded({ done: false, messages: null, problem: `The messages could not be read: ${(error as Error).message}` }),
    );
    return () => {
      current = false;
    };
  }, [own, load, step.sequence]);
  return own !== undefined ? { done: true, messages: own, problem: null } : loaded;
}

function Loading({ loaded, children }: { loaded: Loaded; children: (messages: readonly Message[] | null) => ReactNode }) {
  if (loaded.problem) return <p className="problem">{loaded.problem}</p>;
  if (!loaded.done) return <p className="muted" data-messages-loading>Loading messages…</p>;
  return children(loaded.messages);
}

function StepMessages({ step }: { step: Step }) {
  const loaded = useStepMessages(step);
  return <Loading loaded={loaded}>{(messages) => <Messages messages={messages ?? []} />}</Loading>;
}

function Messages({ messages }: { messages: readonly Message[] }) {
  return (
    <ol className="messages">
      {messages.map((message, index) => (
        <li key={index} className={`message role-${message.role}`}>
          <span className="role">{message.role}</span>
          {message.toolCallId && <span className="muted">{` (for ${message.toolCallId})`}</span>}
          {message.content && <pre>{message.content}</pre>}
          {message.toolCalls?.map((call) => (
            <pre key={call.id}>
              {`→ ${call.name}(${JSON.stringify(call.arguments)}) `}
              <span className="muted">{call.id}</span>
            </pre>
          ))}
        </li>
      ))}
    </ol>
  );
}

function Budget({ budget }: { budget: unknown }) {
  if (typeof budget !== 'object' || budget === null) return null;
  return (
    <dl className="facts">
      {Object.entries(budget as Record<string, unknown>).map(([key, value]) => (
        <div key={key}>
          <dt>{key}</dt>
          <dd>{typeof value === 'object' ? JSON.stringify(value) : String(value)}</dd>
        </div>
      ))}
    </dl>
  );
}

function Fact({ label, value }: { label: string; value: string | number | null | undefined }) {
  if (value === null || value === undefined || value === '') return null;
  return (
    <div>
      <dt>{label}</dt>
      <dd>{value}</dd>
    </div>
  );
}

function StepBody({ step }: { step: Step }) {
  switch (step.kind) {
    case 'ASSEMBLED':
      return <StepMessages step={step} />;
    case 'CONTEXT':
      return <Budget budget={step.contextBudget} />;
    case 'REQUEST':
      return (
        <>
          <p>
            Tools offered:{' '}
            {step.toolsOffered && step.toolsOffered.length > 0 ? (
              step.toolsOffered.map((tool) => (
                <code key={tool} className="chip">
                  {tool}
                </code>
              ))
            ) : (
              <span className="muted">none</span>
            )}
          </p>
          <Collapsed summary={`${step.messageCount ?? step.messagesSent?.length ?? 0} messages sent`} className="messages-sent">
            {() => <StepMessages step={step} />}
          </Collapsed>
        </>
      );
    case 'LLM':
      return (
        <>
          {step.thinking && (
            <details className="thinking">
              <summary>Thinking</summary>
              <pre>{step.thinking}</pre>
            </details>
          )}
          {step.content && <pre className="content">{step.content}</pre>}
          {step.requestedToolCalls?.map((call) => (
            <pre key={call.id} className="tool-request">
              {`→ ${call.name}(${JSON.stringify(call.arguments)})`}
            </pre>
          ))}
          <dl className="facts">
            <Fact label="finish" value={step.finishReason ? `${step.finishReason}${step.rawFinishReason && step.rawFinishReason !== step.finishReason ? ` (${step.rawFinishReason})` : ''}` : null} />
            <Fact label="tokens" value={step.totalTokens !== null ? `${formatTokens(step.promptTokens)} in · ${formatTokens(step.completionTokens)} out` : null} />
            <Fact label="cost" value={step.estimatedCost !== null ? formatCost(step.estimatedCost) : null} />
            <Fact label="latency" value={formatDuration(step.durationMs)} />
          </dl>
          {step.warnings && step.warnings.length > 0 && <p className="muted">Ignored: {step.warnings.join('; ')}</p>}
        </>
      );
    case 'TOOL':
      return (
        <>
          <p>
            <code>{step.toolName}</code>
            <span className="muted">{` ${step.toolCallId ?? ''}`}</span>
          </p>
          <pre>{JSON.stringify(step.toolArguments, null, 2)}</pre>
          <pre className={step.toolIsError ? 'tool-result error' : 'tool-result'}>{step.toolResult}</pre>
        </>
      );
    case 'END':
      return (
        <dl className="facts">
          <Fact label="status" value={step.status} />
          <Fact label="reason" value={step.terminationReason} />
          <Fact label="error" value={step.error} />
        </dl>
      );
    default:
      return <GenericFields step={step} />;
  }
}

/** A kind this page does not know yet: its set fields, as they are. */
function GenericFields({ step }: { step: Step }) {
  const fields = Object.entries(step).filter(([key, value]) => value !== null && !['sequence', 'kind', 'round', 'durationMs', '__typename'].includes(key));
  return (
    <dl className="facts">
      {fields.map(([key, value]) => (
        <Fact key={key} label={key} value={typeof value === 'object' ? JSON.stringify(value) : String(value)} />
      ))}
    </dl>
  );
}

/**
 * A closed <details> whose body is built only once it is opened: a long
 * run's REQUEST steps sent the whole transcript (thousands of messages
 * each), and every card has its JSON; neither costs anything until asked for
 * (the messages are not even read before).
 */
function Collapsed({ summary, className, children }: { summary: string; className?: string; children: () => ReactNode }) {
  const [open, setOpen] = useState(false);
  return (
    <details className={className} onToggle={(event) => setOpen((event.currentTarget as HTMLDetailsElement).open)}>
      <summary>{summary}</summary>
      {open && children()}
    </details>
  );
}

/** The step as the API gives it with every field: messagesSent where the full step has it. */
function fullStep(step: Step, messages: readonly Message[] | null): object {
  const { sequence, kind, round, durationMs, messagesSent: _own, ...rest } = step;
  return { sequence, kind, round, durationMs, messagesSent: messages, ...rest };
}

function StepJsonBody({ step }: { step: Step }) {
  const loaded = useStepMessages(step);
  return <Loading loaded={loaded}>{(messages) => <pre>{JSON.stringify(fullStep(step, messages), null, 2)}</pre>}</Loading>;
}

function StepJson({ step }: { step: Step }) {
  return (
    <Collapsed summary="JSON" className="json">
      {() => <StepJsonBody step={step} />}
    </Collapsed>
  );
}

// Text is given as one string wherever JSX would split it (`#{n}` is two text nodes): a long run has thousands of cards.
export const StepCard = memo(function StepCard({ step }: { step: Step }) {
  const kind = String(step.kind);
  return (
    <article className={`step kind-${kind.toLowerCase()}`} data-step-sequence={step.sequence} data-step-kind={kind}>
      <header>
        <span className="sequence">{`#${step.sequence}`}</span>
        <span className="kind">{kind}</span>
        <span className="muted">{`round ${step.round}`}</span>
        <span className="muted right">{formatDuration(step.durationMs)}</span>
      </header>
      <StepBody step={step} />
      <StepJson step={step} />
    </article>
  );
});
