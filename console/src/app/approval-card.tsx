import { useEffect, useState } from 'react';
import { ResolveToolApprovalDocument, RunApprovalDocument, type RunStep } from '../../../src/client';
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
  const deadline = useApprovalDeadline(runId);

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
        {deadline && <Countdown deadline={deadline} />}
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

/** When the run's pending calls are refused as not approved if nobody decides; null without a timeout. */
function useApprovalDeadline(runId: string): Date | null {
  const [deadline, setDeadline] = useState<Date | null>(null);
  useEffect(() => {
    let current = true;
    request(RunApprovalDocument, { id: runId })
      .then((data) => {
        const at = data.run?.status === 'WAITING_FOR_APPROVAL' ? data.run.approvalDeadline : null;
        if (current && at) setDeadline(new Date(at as string));
      })
      // Only the countdown is missing then; the decisions still work.
      .catch(() => undefined);
    return () => {
      current = false;
    };
  }, [runId]);
  return deadline;
}

function Countdown({ deadline }: { deadline: Date }) {
  const [now, setNow] = useState(() => Date.now());
  useEffect(() => {
    const timer = setInterval(() => setNow(Date.now()), 1000);
    return () => clearInterval(timer);
  }, []);
  const seconds = Math.max(0, Math.ceil((deadline.getTime() - now) / 1000));
  return (
    <span className="muted" data-approval-deadline={deadline.toISOString()} title={deadline.toLocaleString()}>
      {seconds > 0 ? `refused as not approved in ${formatSeconds(seconds)} unless decided` : 'timed out; refusing the calls…'}
    </span>
  );
}

function formatSeconds(seconds: number): string {
  if (seconds < 120) return `${seconds} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 120 ? `${minutes} min ${seconds % 60} s` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}
