import { useState } from 'react';
import { ResolveToolApprovalDocument, type RunStep } from '../../../src/client';
import { request } from '../shared/session';

type PendingCall = NonNullable<RunStep['pendingToolCalls']>[number];

/**
 * The tool calls a run waits on: approve or deny each; once every call of
 * the turn is decided, the decisions go to the server at once (the run
 * then goes on and its next steps arrive on the trace).
 */
export function ApprovalCard({ runId, calls, onProblem }: { runId: string; calls: readonly PendingCall[]; onProblem: (message: string) => void }) {
  const [decisions, setDecisions] = useState<Record<string, boolean>>({});
  const [sending, setSending] = useState(false);

  const decide = async (toolCallId: string, approve: boolean) => {
    const next = { ...decisions, [toolCallId]: approve };
    setDecisions(next);
    if (!calls.every((call) => call.id in next)) return;
    setSending(true);
    try {
      await request(ResolveToolApprovalDocument, { runId, decisions: calls.map((call) => ({ toolCallId: call.id, approve: next[call.id] === true })) });
    } catch (error) {
      setDecisions({});
      onProblem((error as Error).message);
    } finally {
      setSending(false);
    }
  };

  return (
    <article className="step approval" data-approval>
      <header>
        <span className="kind">waiting for approval</span>
      </header>
      {calls.map((call) => (
        <div key={call.id} className="approval-call" data-approval-call={call.id}>
          <code>{call.name}</code>
          <pre>{JSON.stringify(call.arguments, null, 2)}</pre>
          {call.id in decisions ? (
            <span className="muted">{decisions[call.id] ? 'approved' : 'denied'}</span>
          ) : (
            <span className="actions">
              <button type="button" data-action="approve" disabled={sending} onClick={() => void decide(call.id, true)}>
                Approve
              </button>
              <button type="button" data-action="deny" disabled={sending} onClick={() => void decide(call.id, false)}>
                Deny
              </button>
            </span>
          )}
        </div>
      ))}
    </article>
  );
}
