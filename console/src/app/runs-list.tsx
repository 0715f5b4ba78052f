import { createClient } from 'graphql-ws';
import { useEffect, useState } from 'react';
import { RunsDocument, RunUpdatedDocument, type RunsQuery, type RunUpdatedSubscription } from '../../../src/client';
import { formatCost, formatDuration, formatTime, formatTokens, runDurationMs } from '../shared/format';
import { readToken, request, webSocketUrl } from '../shared/session';

/** Rows the list shows. */
const LIST_SIZE = 100;

type RunRow = RunsQuery['runs'][number];

/** The list with `run` put in: replaced where it is, else added in creation order (newest first). */
export function withRun(runs: readonly RunRow[], run: RunRow): RunRow[] {
  const index = runs.findIndex((other) => other.id === run.id);
  if (index >= 0) return runs.map((other, i) => (i === index ? run : other));
  const next = [run, ...runs].sort((a, b) => (a.createdAt < b.createdAt ? 1 : a.createdAt > b.createdAt ? -1 : 0));
  return next.slice(0, LIST_SIZE);
}

/**
 * The runs, newest first: loaded once, then kept current by the `runUpdated`
 * subscription (a run started, waiting for approval, going on, ended, on any
 * instance). Whenever the socket (re)connects the list is loaded again, so a
 * change made while it was away is not missed.
 */
export function RunsList() {
  const [runs, setRuns] = useState<RunRow[] | null>(null);
  const [problem, setProblem] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    const load = async () => {
      try {
        const data = await request(RunsDocument, { limit: LIST_SIZE });
        if (stopped) return;
        setRuns(data.runs);
        setProblem(null);
      } catch (error) {
        if (!stopped) setProblem((error as Error).message);
      }
    };
    const client = createClient({
      url: webSocketUrl(),
      connectionParams: { authorization: `Bearer ${readToken() ?? ''}` },
      retryAttempts: Number.POSITIVE_INFINITY,
      shouldRetry: () => true,
      on: { connected: () => void load() },
    });
    const unsubscribe = client.subscribe<RunUpdatedSubscription>(
      { query: RunUpdatedDocument.toString() },
      {
        next: (result) => {
          const run = result.data?.runUpdated;
          if (run) setRuns((current) => (current ? withRun(current, run) : current));
        },
        error: (error) => {
          if (!stopped) setProblem(error instanceof Error ? error.message : 'The live updates stopped; reload the page.');
        },
        complete: () => undefined,
      },
    );
    return () => {
      stopped = true;
      unsubscribe();
      void client.dispose();
    };
  }, []);

  return (
    <section>
      <div className="title-row">
        <h1>Runs</h1>
        <a className="button" href="/runs/new">
          New run
        </a>
      </div>
      {problem && <p className="problem">{problem}</p>}
      {runs === null ? (
        <p className="muted">Loading…</p>
      ) : runs.length === 0 ? (
        <p className="muted" data-runs-empty>
          No runs yet. <a href="/runs/new">Start one</a>.
        </p>
      ) : (
        <table className="runs">
          <thead>
            <tr>
              <th>Status</th>
              <th>Configuration</th>
              <th>Rounds</th>
              <th>Tokens</th>
              <th>Cost</th>
              <th>Duration</th>
              <th>Created</th>
            </tr>
          </thead>
          <tbody>
            {runs.map((run) => (
              <tr key={run.id} data-run-id={run.id} data-status={run.status}>
                <td>
                  <a href={`/runs/${run.id}`}>
                    <span className={`status status-${run.status.toLowerCase()}`}>{run.status}</span>
                  </a>
                  {run.dryRun && <span className="tag">dry run</span>}
                </td>
                <td>
                  <a href={`/runs/${run.id}`}>{run.configurationIdentifier ?? '–'}</a>
                </td>
                <td>{run.iterations}</td>
                <td>{formatTokens(run.totalTokens)}</td>
                <td>{formatCost(run.estimatedCost)}</td>
                <td>{formatDuration(runDurationMs(run))}</td>
                <td>{formatTime(run.createdAt)}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
    </section>
  );
}
