/**
 * Prometheus metrics (`GET /metrics`). Every label takes its values from a
 * small fixed set — statuses, token classes, adapter types, operation types,
 * root fields of the schema — never from run ids, tokens or other free text,
 * so the number of series stays bounded however the service is used.
 */
import { collectDefaultMetrics, Counter, Gauge, Histogram, Registry } from 'prom-client';
import type { OperationDefinitionNode } from 'graphql';
import type { LoopStep } from '../runs';
import type { ObservedRun, RunObservation, RunObserver } from './run-observer';

/** Node's process metrics (CPU, memory, event-loop lag, GC): one collector per process, shared by every server in it. */
let processRegistry: Registry | null = null;

function processMetrics(): Registry {
  if (!processRegistry) {
    processRegistry = new Registry();
    collectDefaultMetrics({ register: processRegistry });
  }
  return processRegistry;
}

const RUN_STATUSES = ['completed', 'failed', 'cancelled'] as const;
const OPEN_RUN_STATE_LABELS = ['queued', 'running', 'waiting_for_approval'] as const;
const TOKEN_CLASSES = ['input', 'output'] as const;

export class ServiceMetrics implements RunObserver {
  private readonly registry = new Registry();
  private readonly runs = new Counter({
    name: 'promptwire_runs_total',
    help: 'Runs that ended, by final status (completed, failed, cancelled).',
    labelNames: ['status'],
    registers: [this.registry],
  });
  private readonly runsInProgress = new Gauge({
    name: 'promptwire_runs_in_progress',
    help: 'Runs this instance is executing now (queued or running).',
    registers: [this.registry],
  });
  /** Where the open-run gauge reads its counts (the run table); set once the runs exist. */
  private openRunCounts: (() => Promise<Record<string, number>>) | null = null;
  private readonly openRuns = new Gauge({
    name: 'promptwire_runs_open',
    help: 'Runs that have not ended, in the database (every instance\'s), by state: queued, running, waiting_for_approval.',
    labelNames: ['state'],
    registers: [this.registry],
    collect: async () => {
      if (!this.openRunCounts) return;
      try {
        const counts = await this.openRunCounts();
        for (const state of OPEN_RUN_STATE_LABELS) this.openRuns.set({ state }, counts[state.toUpperCase()] ?? 0);
      } catch {
        // A scrape while the database is away keeps the last counts.
      }
    },
  });
  private readonly tokens = new Counter({
    name: 'promptwire_run_tokens_total',
    help: 'Tokens of model calls made by runs, as the provider reported them: class input (prompt) or output (completion).',
    labelNames: ['class'],
    registers: [this.registry],
  });
  private readonly cost = new Counter({
    name: 'promptwire_run_cost_dollars_total',
    help: 'Estimated cost of model calls made by runs, in US dollars (priced models only).',
    registers: [this.registry],
  });
  private readonly toolCalls = new Counter({
    name: 'promptwire_tool_calls_total',
    help: 'Tool calls executed by runs, by outcome (ok, error).',
    labelNames: ['outcome'],
    registers: [this.registry],
  });
  private readonly providerDuration = new Histogram({
    name: 'promptwire_provider_request_duration_seconds',
    help: 'Duration of model calls made by runs (every retry included), by adapter type and outcome (ok, error, cancelled).',
    labelNames: ['provider', 'outcome'],
    buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300],
    registers: [this.registry],
  });
  private readonly graphqlDuration = new Histogram({
    name: 'promptwire_graphql_request_duration_seconds',
    help: 'Duration of GraphQL requests over HTTP, by operation type and root field ("multiple" for several, "unknown" before the operation is known).',
    labelNames: ['type', 'operation'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [this.registry],
  });
  private readonly subscriptions = new Gauge({
    name: 'promptwire_active_subscriptions',
    help: 'GraphQL subscriptions open over graphql-ws on this instance.',
    registers: [this.registry],
  });
  private readonly rateLimited = new Counter({
    name: 'promptwire_rate_limited_total',
    help: 'Operations refused with TOO_MANY_REQUESTS, by limit (start_run, writes).',
    labelNames: ['limit'],
    registers: [this.registry],
  });

  constructor() {
    // Series that exist from the start, so rates and sums are defined before the first event.
    for (const status of RUN_STATUSES) this.runs.inc({ status }, 0);
    for (const tokenClass of TOKEN_CLASSES) this.tokens.inc({ class: tokenClass }, 0);
    for (const outcome of ['ok', 'error']) this.toolCalls.inc({ outcome }, 0);
  }

  readonly contentType = Registry.PROMETHEUS_CONTENT_TYPE;

  /** Reads the open runs by state at each scrape (`promptwire_runs_open`). */
  countOpenRunsWith(source: () => Promise<Record<string, number>>): void {
    this.openRunCounts = source;
  }

  /** The text a scrape receives: the process metrics, then the service's. */
  async render(): Promise<string> {
    const [process, service] = await Promise.all([processMetrics().metrics(), this.registry.metrics()]);
    return spellNaN(`${process.trimEnd()}\n\n${service}`);
  }

  runStarted(run: ObservedRun): RunObservation {
    this.runsInProgress.inc();
    const provider = run.providerType ?? 'none';
    /** When the model call in flight started (its REQUEST step), or null when none is. */
    let callStartedAt: number | null = null;
    let finished = false;
    return {
      step: (step: LoopStep, at: number) => {
        switch (step.kind) {
          case 'request':
            callStartedAt = at;
            break;
          case 'llm':
            callStartedAt = null;
            this.providerDuration.observe({ provider, outcome: 'ok' }, step.durationMs / 1000);
            this.tokens.inc({ class: 'input' }, step.promptTokens);
            this.tokens.inc({ class: 'output' }, step.completionTokens);
            if (step.estimatedCost !== null && step.estimatedCost > 0) this.cost.inc(step.estimatedCost);
            break;
          case 'tool':
            this.toolCalls.inc({ outcome: step.toolIsError ? 'error' : 'ok' });
            break;
          case 'end':
            // A call still in flight when the run ended failed (or was cancelled) without an answer.
            if (callStartedAt !== null) {
              this.providerDuration.observe({ provider, outcome: step.status === 'CANCELLED' ? 'cancelled' : 'error' }, Math.max(0, at - callStartedAt) / 1000);
              callStartedAt = null;
            }
            this.runs.inc({ status: statusLabel(step.status) });
            break;
          case 'assembled':
          case 'context':
            break;
        }
      },
      finish: () => {
        if (finished) return;
        finished = true;
        this.runsInProgress.dec();
      },
    };
  }

  runClosed(status: string): void {
    this.runs.inc({ status: statusLabel(status) });
  }

  graphqlRequest(type: string, operation: string, seconds: number): void {
    this.graphqlDuration.observe({ type, operation }, seconds);
  }

  subscriptionOpened(): void {
    this.subscriptions.inc();
  }

  subscriptionClosed(): void {
    this.subscriptions.dec();
  }

  refused(limit: 'start_run' | 'writes'): void {
    this.rateLimited.inc({ limit });
  }
}

/**
 * The text format spells a sample value that is not a number `NaN`; prom-client
 * (15.1.3, its latest release) writes `Nan`, which strict parsers refuse. Such
 * a value is ordinary here: the event-loop lag's mean and standard deviation
 * come from a histogram that each scrape empties, so they are NaN at the first
 * scrape and whenever two scrapes come within its 10 ms resolution. Only the
 * value at the end of a sample line is rewritten (prom-client writes no
 * timestamps; a label value holds no raw line feed), never a comment or label.
 */
export function spellNaN(exposition: string): string {
  return exposition.replace(/^([^#\n].*) Nan$/gm, '$1 NaN');
}

/** Statuses as labels: lower-case, and only the three a run can end with. */
function statusLabel(status: string): string {
  const lower = status.toLowerCase();
  return (RUN_STATUSES as readonly string[]).includes(lower) ? lower : 'failed';
}

/** The root field an operation selects, when it selects one; otherwise "multiple". Names come from the schema, so the set is bounded. */
export function rootFieldOf(operation: OperationDefinitionNode): string {
  const fields = operation.selectionSet.selections;
  const only = fields.length === 1 ? fields[0] : undefined;
  return only?.kind === 'Field' ? only.name.value : 'multiple';
}
