/**
 * What mapping a stored step to its API view costs (`toRunStep`, once per
 * step and shared by all its watchers and readers), against a bare baseline
 * on the same steps: a spread copy of the stored object. Both then read the
 * fields a trace watcher selects (runs-fanout's TRACE_FIELDS). Steps of the
 * four kinds a run stores most (LLM answer with a tool call, TOOL, CONTEXT,
 * REQUEST), fresh objects in every pass as the loop makes them; passes of
 * the two alternate, and each figure is the median pass.
 *
 * Run: `npx tsc -p tsconfig.build.json && node dist/bench/run-step-view.js`
 */
import 'reflect-metadata';
import { performance } from 'node:perf_hooks';
import { toRunStep } from '../src/runs/run.types';
import type { StoredStep } from '../src/runs/trace-bus';
import { round, writeResult } from './bench-support';

const STEPS = 50_000;
const PASSES = 15;

function storedStep(index: number): StoredStep {
  switch (index % 4) {
    case 0:
      return {
        sequence: index,
        kind: 'llm',
        round: 1,
        durationMs: 5.2,
        content: null,
        finishReason: 'tool_calls',
        rawFinishReason: 'tool_calls',
        promptTokens: 120,
        completionTokens: 12,
        totalTokens: 132,
        estimatedCost: 0.001,
        requestedToolCalls: [{ id: 'c1', name: 'calculator', arguments: { expression: '1 * 21' }, raw: '{"expression":"1 * 21"}' }],
        warnings: [],
      };
    case 1:
      return { sequence: index, kind: 'tool', round: 1, durationMs: 0.2, toolCallId: 'c1', toolName: 'calculator', toolArguments: { expression: '1 * 21' }, toolResult: '21', toolIsError: false };
    case 2:
      return { sequence: index, kind: 'context', round: 2, durationMs: 0, contextBudget: { limit: 8192, used: 230 } };
    default:
      return {
        sequence: index,
        kind: 'request',
        round: 2,
        durationMs: 0,
        messagesSent: [
          { role: 'system', content: 'You are precise.' },
          { role: 'user', content: 'Work it out with the calculator.' },
        ],
        toolsOffered: ['calculator'],
      };
  }
}

type Fields = Record<string, unknown>;

/** Reads what a trace watcher selects, so that neither side is measured without its reads. */
function readTraceFields(view: Fields): number {
  let sum = 0;
  for (const field of ['sequence', 'kind', 'round', 'durationMs', 'status', 'terminationReason', 'content', 'finishReason', 'totalTokens', 'toolName', 'toolResult', 'toolIsError']) {
    if (view[field] !== null && view[field] !== undefined) sum += 1;
  }
  return sum;
}

function pass(map: (step: StoredStep) => Fields): { nsPerStep: number; check: number } {
  const steps = Array.from({ length: STEPS }, (_, index) => storedStep(index));
  let check = 0;
  const started = performance.now();
  for (const step of steps) check += readTraceFields(map(step));
  return { nsPerStep: ((performance.now() - started) * 1e6) / STEPS, check };
}

export function runRunStepView(): { viewNs: number; copyNs: number; ratio: number } {
  const view = (step: StoredStep) => toRunStep(step) as unknown as Fields;
  const copy = (step: StoredStep): Fields => ({ ...step });
  const views: number[] = [];
  const copies: number[] = [];
  for (let i = 0; i < PASSES; i += 1) {
    const a = pass(view);
    const b = pass(copy);
    if (a.check === 0 || b.check === 0) throw new Error('nothing was read');
    views.push(a.nsPerStep);
    copies.push(b.nsPerStep);
  }
  const median = (values: number[]) => [...values].sort((x, y) => x - y)[Math.floor(values.length / 2)]!;
  const result = { viewNs: round(median(views), 0), copyNs: round(median(copies), 0), ratio: round(median(views) / median(copies), 2) };
  writeResult('run-step-view', { measuredAt: new Date().toISOString(), node: process.version, steps: STEPS, passes: PASSES, ...result });
  return result;
}

if (require.main === module) {
  const { viewNs, copyNs, ratio } = runRunStepView();
  console.log(`toRunStep + trace fields: ${viewNs} ns per step; spread copy + the same reads: ${copyNs} ns (${ratio}×)`);
}
