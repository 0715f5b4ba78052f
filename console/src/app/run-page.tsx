import { createClient } from 'graphql-ws';
import { memo, useCallback, useEffect, useMemo, useRef, useState } from 'react';
import { flushSync } from 'react-dom';
import { CancelRunDocument, RunDeltasDocument, RunDocument, RunStepMessagesDocument, watchRun, type RunDeltasSubscription, type RunQuery } from '../../../src/client';
import { FINISHED_STATUSES, formatCost, formatDuration, formatTokens, runDurationMs } from '../shared/format';
import { readToken, request, webSocketUrl } from '../shared/session';
import { ApprovalCard } from './approval-card';
import { StepCard, StepMessagesLoader, type Message, type Step } from './step-card';

type Run = NonNullable<RunQuery['run']>;

type Delta = RunDeltasSubscription['runDeltas'];

interface LiveText {
  round: number;
  content: string;
  thinking: string;
}

/** The status the stored steps imply, where they say more than the last read of the run. */
function statusFromSteps(steps: readonly Step[], fallback: string): string {
  const last = steps[steps.length - 1];
  if (!last) return fallback;
  if (last.kind === 'END') return last.status ?? fallback;
  if (String(last.kind) === 'APPROVAL' && (last as { pendingToolCalls?: unknown[] | null }).pendingToolCalls?.length) return 'WAITING_FOR_APPROVAL';
  return fallback === 'QUEUED' ? 'RUNNING' : fallback;
}

function totals(steps: readonly Step[]) {
  let promptTokens = 0;
  let completionTokens = 0;
  let cost: number | null = null;
  let rounds = 0;
  let durationMs = 0;
  for (const step of steps) {
    rounds = Math.max(rounds, step.round);
    durationMs += step.durationMs;
    if (step.kind !== 'LLM') continue;
    promptTokens += step.promptTokens ?? 0;
    completionTokens += step.completionTokens ?? 0;
    if (step.estimatedCost !== null) cost = (cost ?? 0) + step.estimatedCost;
  }
  return { promptTokens, completionTokens, totalTokens: promptTokens + completionTokens, cost, rounds, durationMs };
}

/** Cards per block of the list (see StepBlocks). */
const BLOCK_SIZE = 100;

/** One block of cards; a full block is the same array from commit to commit, so React skips it. */
const StepBlock = memo(function StepBlock({ steps }: { steps: readonly Step[] }) {
  return steps.map((step) => <StepCard key={step.sequence} step={step} />);
});

/**
 * The cards, in blocks of BLOCK_SIZE: a commit that adds steps to a run of
 * thousands compares a few dozen blocks instead of every card. Blocks are
 * fragments, so the cards stay the list's direct children.
 */
function StepBlocks({ steps }: { steps: readonly Step[] }) {
  const previous = useRef<readonly (readonly Step[])[]>([]);
  const blocks = useMemo(() => {
    const next: (readonly Step[])[] = [];
    for (let start = 0; start < steps.length; start += BLOCK_SIZE) {
      const end = Math.min(steps.length, start + BLOCK_SIZE);
      const kept = previous.current[next.length];
      next.push(kept && kept.length === end - start && kept[0] === steps[start] && kept[kept.length - 1] === steps[end - 1] ? kept : steps.slice(start, end));
    }
    return next;
  }, [steps]);
  useEffect(() => {
    previous.current = blocks;
  }, [blocks]);
  return (
    <div className="steps">
      {blocks.map((block) => (
        <StepBlock key={block[0]!.sequence} steps={block} />
      ))}
    </div>
  );
}

export function RunPage({ id }: { id: string }) {
  const [run, setRun] = useState<Run | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [steps, setSteps] = useState<Step[]>([]);
  const [live, setLive] = useState<LiveText | null>(null);
  const [connection, setConnection] = useState<string | null>(null);
  const [cancelling, setCancelling] = useState(false);
  const pending = useRef<Step[]>([]);
  const flushScheduled = useRef(false);
  const reconnecting = useRef(false);

  // The trace comes without messagesSent; a card reads its step's messages when it shows them (once per step).
  const loadMessages = useMemo(() => {
    const read = new Map<number, Promise<readonly Message[] | null>>();
    return (sequence: number) => {
      let messages = read.get(sequence);
      if (!messages) {
        messages = request(RunStepMessagesDocument, { id, afterSequence: sequence - 1 }).then((data) => {
          const step = data.run?.steps[0];
          if (!step || step.sequence !== sequence) throw new Error(`step ${sequence} is not stored`);
          return step.messagesSent;
        });
        messages.catch(() => read.delete(sequence));
        read.set(sequence, messages);
      }
      return messages;
    };
  }, [id]);

  const loadRun = useCallback(async () => {
    try {
      const data = await request(RunDocument, { id });
      if (!data.run) setProblem(`There is no run ${id}.`);
      else setRun(data.run);
    } catch (error) {
      setProblem((error as Error).message);
    }
  }, [id]);

  // Steps that arrive together (a page of the stored replay, a burst of live steps) are shown in
  // one render: the flush waits for the current task to finish, then commits at once, so a live
  // step's card is in the page within a few milliseconds of its message.
  const enqueue = useCallback((step: Step) => {
    pending.current.push(step);
    if (flushScheduled.current) return;
    flushScheduled.current = true;
    setTimeout(() => {
      flushScheduled.current = false;
      const batch = pending.current;
      pending.current = [];
      const finishedCall = batch.find((step) => step.kind === 'LLM');
      flushSync(() => {
        setSteps((previous) => previous.concat(batch));
        if (finishedCall) setLive((text) => (text && text.round <= finishedCall.round ? null : text));
      });
    }, 0);
  }, []);

  useEffect(() => {
    void loadRun();
    const token = readToken() ?? '';
    const controller = new AbortController();
    (async () => {
      try {
        for await (const step of watchRun({
          url: webSocketUrl(),
          token,
          runId: id,
          // Without the transcript every REQUEST repeats: a long run's replay is a fraction of the bytes.
          messagesSent: false,
          signal: controller.signal,
          onReconnect: ({ afterSequence, reason }) => {
            reconnecting.current = true;
            setConnection(`Reconnecting after step ${afterSequence} (${reason})…`);
          },
        })) {
          // Cleared by the first step after a reconnection, not set again for every step.
          if (reconnecting.current) {
            reconnecting.current = false;
            setConnection(null);
          }
          enqueue(step);
          if (step.kind === 'END') {
            setLive(null);
            void loadRun();
          }
        }
      } catch (error) {
        if (!controller.signal.aborted) setProblem((error as Error).message);
      }
    })();

    // Deltas are not stored: they show what the streaming call is writing now.
    const deltas = createClient({ url: webSocketUrl(), connectionParams: { authorization: `Bearer ${token}` }, retryAttempts: 20, lazyCloseTimeout: 1000 });
    const unsubscribe = deltas.subscribe<{ runDeltas: Delta }>(
      { query: RunDeltasDocument.toString(), variables: { runId: id } },
      {
        next: (result) => {
          const delta = result.data?.runDeltas;
          if (!delta) return;
          setLive((text) => {
            const current = text && text.round === delta.round ? text : { round: delta.round, content: '', thinking: '' };
            return delta.kind === 'thinking' ? { ...current, thinking: current.thinking + delta.text } : { ...current, content: current.content + delta.text };
          });
        },
        error: () => undefined,
        complete: () => undefined,
      },
    );
    return () => {
      controller.abort();
      unsubscribe();
      void deltas.dispose();
    };
  }, [id, enqueue, loadRun]);

  const status = statusFromSteps(steps, run?.status ?? 'QUEUED');
  const lastStep = steps[steps.length - 1];
  const pendingCalls = status === 'WAITING_FOR_APPROVAL' && lastStep?.kind === 'APPROVAL' ? (lastStep.pendingToolCalls ?? []) : [];
  const finished = FINISHED_STATUSES.has(status);
  const sums = useMemo(() => totals(steps), [steps]);

  const cancel = async () => {
    setCancelling(true);
    try {
      const data = await request(CancelRunDocument, { id });
      setRun(data.cancelRun);
    } catch (error) {
      setProblem((error as Error).message);
    } finally {
      setCancelling(false);
    }
  };

  return (
    <section className="run">
      <div className="title-row">
        <h1>
          Run <code className="run-id">{id}</code>
        </h1>
        <span className={`status status-${status.toLowerCase()}`} data-run-status>
          {status}
        </span>
        {!finished && (
          <button type="button" data-action="cancel" onClick={cancel} disabled={cancelling}>
            {cancelling ? 'Cancelling…' : 'Cancel'}
          </button>
        )}
      </div>
      {problem && <p className="problem">{problem}</p>}
      {connection && <p className="notice">{connection}</p>}
      <dl className="facts totals">
        <div>
          <dt>configuration</dt>
          <dd>{run?.configurationIdentifier ?? '–'}</dd>
        </div>
        <div>
          <dt>rounds</dt>
          <dd>{Math.max(sums.rounds, run?.iterations ?? 0)}</dd>
        </div>
        <div>
          <dt>tokens</dt>
          <dd>
            {formatTokens(sums.totalTokens)} <span className="muted">({formatTokens(sums.promptTokens)} in · {formatTokens(sums.completionTokens)} out)</span>
          </dd>
        </div>
        <div>
          <dt>cost</dt>
          <dd>{formatCost(finished && run ? run.estimatedCost : sums.cost)}</dd>
        </div>
        <div>
          <dt>duration</dt>
          {/* Stored times have whole seconds; the steps' own durations are finer. */}
          <dd>{run ? formatDuration(Math.max(runDurationMs(run) ?? 0, sums.durationMs)) : '–'}</dd>
        </div>
        <div>
          <dt>steps</dt>
          <dd data-step-count>{steps.length}</dd>
        </div>
        {run?.dryRun && (
          <div>
            <dt>mode</dt>
            <dd>dry run</dd>
          </div>
        )}
      </dl>
      {finished && run?.finalContent && (
        <div className="final">
          <h2>Answer</h2>
          <pre>{run.finalContent}</pre>
        </div>
      )}
      <StepMessagesLoader.Provider value={loadMessages}>
        <StepBlocks steps={steps} />
      </StepMessagesLoader.Provider>
      {pendingCalls.length > 0 && <ApprovalCard key={lastStep!.sequence} runId={id} calls={pendingCalls} onProblem={setProblem} />}
      {!finished && pendingCalls.length === 0 && (
        <article className="step streaming" aria-live="polite">
          <header>
            <span className="kind">{live ? `streaming · round ${live.round}` : 'waiting for the model'}</span>
          </header>
          {live?.thinking && <pre className="thinking-live">{live.thinking}</pre>}
          <pre className="content" data-run-delta>
            {live?.content ?? ''}
          </pre>
        </article>
      )}
    </section>
  );
}
