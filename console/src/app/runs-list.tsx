import { useEffect, useState } from 'react';
import { RunsDocument, type RunsQuery } from '../../../src/client';
import { FINISHED_STATUSES, formatCost, formatDuration, formatTime, formatTokens, runDurationMs } from '../shared/format';
import { request } from '../shared/session';

/** How often the list asks again, in ms, while any run is unfinished (slower when all are). */
const ACTIVE_REFRESH_MS = 1000;
const IDLE_REFRESH_MS = 3000;

export function RunsList() {
  const [runs, setRuns] = useState<RunsQuery['runs'] | null>(null);
  const [problem, setProblem] = useState<string | null>(null);

  useEffect(() => {
    let stopped = false;
    let timer: ReturnType<typeof setTimeout> | undefined;
    const load = async () => {
      let active = false;
      try {
        const data = await request(RunsDocument, { limit: 100 });
        if (stopped) return;
        setRuns(data.runs);
        setProblem(null);
        active = data.runs.some((run) => !FINISHED_STATUSES.has(run.status));
      } catch (error) {
        if (!stopped) setProblem((error as Error).message);
      }
      if (!stopped) timer = setTimeout(load, document.hidden ? IDLE_REFRESH_MS * 3 : active ? ACTIVE_REFRESH_MS : IDLE_REFRESH_MS);
    };
    void load();
    return () => {
      stopped = true;
      clearTimeout(timer);
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
        <p className="muted">
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
