import { memo, useState, type ReactNode } from 'react';
import type { RunStep } from '../../../src/client';
import { formatCost, formatDuration, formatTokens } from '../shared/format';

type Message = NonNullable<RunStep['messagesSent']>[number];

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

function StepBody({ step }: { step: RunStep }) {
  switch (step.kind) {
    case 'ASSEMBLED':
      return <Messages messages={step.messagesSent ?? []} />;
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
          <Collapsed summary={`${step.messagesSent?.length ?? 0} messages sent`}>{() => <Messages messages={step.messagesSent ?? []} />}</Collapsed>
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
function GenericFields({ step }: { step: RunStep }) {
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
 * run's REQUEST steps carry the whole transcript (thousands of messages
 * each), and every card has its JSON; neither costs anything until asked for.
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

function StepJson({ step }: { step: RunStep }) {
  return (
    <Collapsed summary="JSON" className="json">
      {() => <pre>{JSON.stringify(step, null, 2)}</pre>}
    </Collapsed>
  );
}

// Text is given as one string wherever JSX would split it (`#{n}` is two text nodes): a long run has thousands of cards.
export const StepCard = memo(function StepCard({ step }: { step: RunStep }) {
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
