import { useEffect, useState, type FormEvent } from 'react';
import { UsageDashboardDocument, type UsageDashboardQuery } from '../../../src/client';
import { formatCost, formatTokens } from '../shared/format';
import { GraphQLRequestError, request } from '../shared/session';
import { barGeometry, defaultRange, instantOf, rangeProblem, share, type DateRange } from './usage-chart';

type Dashboard = UsageDashboardQuery;
type Day = Dashboard['daily'][number];

/** The largest groups each breakdown shows. */
const BREAKDOWN_ROWS = 20;

type Metric = 'tokens' | 'cost' | 'requests';

const METRICS: { metric: Metric; title: string; format: (value: number) => string }[] = [
  { metric: 'tokens', title: 'Tokens', format: formatTokens },
  { metric: 'cost', title: 'Cost (US dollars)', format: formatCost },
  { metric: 'requests', title: 'Requests', format: formatCount },
];

function formatCount(value: number): string {
  return value.toLocaleString('en');
}

/** What a failed load says: a role that may not read usage is told so plainly. */
function problemOf(error: unknown): string {
  if (error instanceof GraphQLRequestError && error.code === 'FORBIDDEN') return 'Usage and costs are for administrators: this token may not read them. Sign in with an ADMIN token.';
  if (error instanceof GraphQLRequestError && error.code === 'UNAUTHENTICATED') return 'This token is not valid any more. Sign out and sign in with another.';
  return `The usage could not be loaded: ${(error as Error).message}`;
}

/**
 * The usage ledger over a range of days: the totals, tokens, cost and
 * requests per day (every day, zeros included), and the largest groups by
 * model, configuration and source. One request per range (`UsageDashboard`).
 */
export function UsagePage() {
  const [draft, setDraft] = useState<DateRange>(() => defaultRange(new Date()));
  const [range, setRange] = useState<DateRange>(draft);
  const [dashboard, setDashboard] = useState<Dashboard | null>(null);
  const [problem, setProblem] = useState<string | null>(null);
  const [loading, setLoading] = useState(true);

  useEffect(() => {
    let stopped = false;
    setLoading(true);
    request(UsageDashboardDocument, { from: instantOf(range.from), to: instantOf(range.to), breakdownLimit: BREAKDOWN_ROWS })
      .then((data) => {
        if (stopped) return;
        setDashboard(data);
        setProblem(null);
      })
      .catch((error: unknown) => {
        if (stopped) return;
        setDashboard(null);
        setProblem(problemOf(error));
      })
      .finally(() => !stopped && setLoading(false));
    return () => {
      stopped = true;
    };
  }, [range]);

  const draftProblem = rangeProblem(draft);
  const submit = (event: FormEvent) => {
    event.preventDefault();
    if (draftProblem === null) setRange({ ...draft });
  };

  const totals = dashboard?.usageTotals;
  const empty = totals !== undefined && totals.requests === 0 && totals.tokens === 0 && totals.cost === 0;
  return (
    <section className="usage" data-usage-state={loading ? 'loading' : problem ? 'error' : empty ? 'empty' : dashboard ? 'ready' : 'loading'}>
      <div className="title-row">
        <h1>Usage</h1>
        <form className="range" onSubmit={submit}>
          <label>
            From <input type="date" data-field="from" value={draft.from} onChange={(event) => setDraft({ ...draft, from: event.target.value })} />
          </label>
          <label>
            to <input type="date" data-field="to" value={draft.to} onChange={(event) => setDraft({ ...draft, to: event.target.value })} />
          </label>
          <button type="submit" data-action="show-range" disabled={draftProblem !== null}>
            Show
          </button>
        </form>
      </div>
      {draftProblem && <p className="notice" data-range-problem>{draftProblem}</p>}
      <p className="muted">
        Provider calls booked in the usage ledger (<code>tx_nrllm_service_usage</code>, TYPO3's calls included), by the service's usage days, {range.from} to {range.to}.
      </p>
      {problem ? (
        <p className="problem" data-usage-error>
          {problem}
        </p>
      ) : !dashboard ? (
        <p className="muted">Loading…</p>
      ) : (
        <>
          <dl className="facts totals usage-totals">
            <Total name="requests" label="Requests" value={dashboard.usageTotals.requests} text={formatCount(dashboard.usageTotals.requests)} />
            <Total name="tokens" label="Tokens" value={dashboard.usageTotals.tokens} text={formatTokens(dashboard.usageTotals.tokens)} />
            <Total name="promptTokens" label="Prompt tokens" value={dashboard.usageTotals.promptTokens} text={formatTokens(dashboard.usageTotals.promptTokens)} />
            <Total name="completionTokens" label="Completion tokens" value={dashboard.usageTotals.completionTokens} text={formatTokens(dashboard.usageTotals.completionTokens)} />
            <Total name="cost" label="Cost" value={dashboard.usageTotals.cost} text={formatCost(dashboard.usageTotals.cost)} />
            <Total name="days" label="Days" value={dashboard.usageTotals.days} text={formatCount(dashboard.usageTotals.days)} />
          </dl>
          {empty ? (
            <p className="muted" data-usage-empty>
              Nothing was booked from {range.from} to {range.to}: no provider call of a run or of TYPO3 in these days. Pick another range, or start a run.
            </p>
          ) : (
            <>
              <div className="charts">
                {METRICS.map(({ metric, title, format }) => (
                  <DailyChart key={metric} metric={metric} title={title} format={format} days={dashboard.daily} />
                ))}
              </div>
              <div className="breakdowns">
                <Breakdown name="model" title="By model" rows={dashboard.byModel.map((row) => ({ key: row.modelId ?? '', label: row.modelId || '(none)', ...row }))} />
                <Breakdown
                  name="configuration"
                  title="By configuration"
                  rows={dashboard.byConfiguration.map((row) => ({
                    key: String(row.configurationUid ?? 0),
                    label: row.configuration ?? (row.configurationUid ? `#${row.configurationUid} (deleted)` : '(none)'),
                    ...row,
                  }))}
                />
                <Breakdown name="source" title="By source" rows={dashboard.bySource.map((row) => ({ key: row.source ?? '', label: row.source || '(no source)', ...row }))} />
              </div>
            </>
          )}
        </>
      )}
    </section>
  );
}

function Total({ name, label, value, text }: { name: string; label: string; value: number; text: string }) {
  return (
    <div data-total={name} data-value={value}>
      <dt>{label}</dt>
      <dd>{text}</dd>
    </div>
  );
}

const CHART_WIDTH = 720;
const CHART_HEIGHT = 140;
const AXIS = 18;
/** Room above the bars for the scale's label. */
const TOP = 16;

/** One metric per day as SVG bars; each bar names its date and value (hover shows them). */
function DailyChart({ metric, title, format, days }: { metric: Metric; title: string; format: (value: number) => string; days: readonly Day[] }) {
  const values = days.map((day) => day[metric]);
  const { top, bars } = barGeometry(values, CHART_WIDTH, CHART_HEIGHT);
  const total = values.reduce((sum, value) => sum + value, 0);
  const first = days[0]?.date ?? '';
  const last = days[days.length - 1]?.date ?? '';
  return (
    <figure className="chart" data-chart={metric}>
      <figcaption>
        {title} per day <span className="muted">· peak {format(Math.max(0, ...values))} · total {format(total)}</span>
      </figcaption>
      <svg viewBox={`0 0 ${CHART_WIDTH} ${TOP + CHART_HEIGHT + AXIS}`} role="img" aria-label={`${title} per day from ${first} to ${last}`}>
        <text className="label" x={0} y={11} textAnchor="start">
          {format(Math.max(0, ...values) === 0 ? 0 : top)}
        </text>
        <line className="axis" x1={0} y1={TOP + 0.5} x2={CHART_WIDTH} y2={TOP + 0.5} />
        <g transform={`translate(0 ${TOP})`}>
          {bars.map((bar, index) => (
            <rect key={days[index]!.date ?? index} className="bar" x={bar.x} y={bar.y} width={bar.width} height={bar.height} data-date={days[index]!.date ?? ''} data-value={values[index]}>
              <title>{`${days[index]!.date}: ${format(values[index]!)}`}</title>
            </rect>
          ))}
        </g>
        <line className="axis" x1={0} y1={TOP + CHART_HEIGHT + 0.5} x2={CHART_WIDTH} y2={TOP + CHART_HEIGHT + 0.5} />
        <text className="label" x={0} y={TOP + CHART_HEIGHT + AXIS - 4} textAnchor="start">
          {first}
        </text>
        <text className="label" x={CHART_WIDTH} y={TOP + CHART_HEIGHT + AXIS - 4} textAnchor="end">
          {last}
        </text>
      </svg>
    </figure>
  );
}

interface BreakdownRow {
  key: string;
  label: string;
  requests: number;
  tokens: number;
  cost: number;
}

/** The largest groups of one dimension; the bar shows each one's cost (its tokens when nothing was priced). */
function Breakdown({ name, title, rows }: { name: string; title: string; rows: readonly BreakdownRow[] }) {
  const byCost = rows.some((row) => row.cost > 0);
  const measure = (row: BreakdownRow) => (byCost ? row.cost : row.tokens);
  const largest = rows.reduce((max, row) => Math.max(max, measure(row)), 0);
  return (
    <section className="breakdown" data-breakdown={name}>
      <h2>{title}</h2>
      <table className="runs">
        <thead>
          <tr>
            <th>{name}</th>
            <th>Requests</th>
            <th>Tokens</th>
            <th>Cost</th>
            <th>{byCost ? 'Share of cost' : 'Share of tokens'}</th>
          </tr>
        </thead>
        <tbody>
          {rows.map((row) => (
            <tr key={row.key} data-key={row.key} data-requests={row.requests} data-tokens={row.tokens} data-cost={row.cost}>
              <td>{row.label}</td>
              <td>{formatCount(row.requests)}</td>
              <td>{formatTokens(row.tokens)}</td>
              <td>{formatCost(row.cost)}</td>
              <td className="share">
                <span className="share-bar" style={{ width: `${(share(measure(row), largest) * 100).toFixed(1)}%` }} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </section>
  );
}
