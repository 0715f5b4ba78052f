/**
 * The loop's tool dispatch: what a model's tool call is stored as, and
 * what running one answers — a refusal (denied, no longer permitted,
 * unknown, not offered, invalid arguments) or the tool's result. Failures
 * of a tool are answers to the model, never failures of the run; only a
 * cancel (or a failed overlapping write, see the driver) stops it.
 */
import { performance } from 'node:perf_hooks';
import type { ToolCall } from '../../providers/adapters/types';
import { ToolInputError, type ToolRegistry } from '../tools/tool-registry';
import type { AgentLoopLogger } from './loop-contract';
import { elapsedMs, raceAbort, RunCancelled } from './loop-support';
import { refusal, transcriptToolCall } from './run-machine';
import type { RequestedToolCall } from './loop-step';

export type ParsedArguments = { ok: true; value: unknown } | { ok: false; raw: string };

/** A call's arguments: empty means `{}`; text that is not JSON is kept raw. */
export function parseToolArguments(raw: string): ParsedArguments {
  if (raw.trim() === '') {
    return { ok: true, value: {} };
  }
  try {
    return { ok: true, value: JSON.parse(raw) as unknown };
  } catch {
    return { ok: false, raw };
  }
}

export function requestedToolCall(call: ToolCall): RequestedToolCall {
  const text = call.function.arguments;
  const parsed = parseToolArguments(text);
  const requested: RequestedToolCall = { id: call.id, name: call.function.name, arguments: parsed.ok ? parsed.value : parsed.raw };
  // Stored only when needed, so a run rebuilt from its steps sends the model exactly what it sent before.
  const reencoded = parsed.ok ? (text.trim() === '' ? '{}' : JSON.stringify(parsed.value)) : parsed.raw;
  if (parsed.ok && reencoded !== text && text.trim() !== '') requested.rawArguments = text;
  // A JSON string would be read back as raw text: keep what was sent.
  if (parsed.ok && typeof parsed.value === 'string') requested.rawArguments = text;
  if (call.providerReplay !== undefined) requested.providerReplay = call.providerReplay;
  if (call.wireId !== undefined) requested.wireId = call.wireId;
  return requested;
}

/** The arguments text of a stored call, as it went back to the model. */
export function transcriptArguments(call: RequestedToolCall): string {
  return transcriptToolCall(call).function.arguments;
}

/** What one tool call answered. */
export interface ToolCallAnswer {
  parsed: ParsedArguments;
  result: string;
  isError: boolean;
  durationMs: number;
  /** The tool contacted an external server (MCP). */
  remoteCall: boolean;
}

/** What running a tool call needs of its run. */
export interface ToolCallContext {
  registry: ToolRegistry;
  /** The tools the run offers. */
  offeredNames: ReadonlySet<string>;
  signal: AbortSignal;
  /** Remote calls the run made so far (the tools' budget). */
  remoteCallsMade: number;
  /** The previous call's TOOL step, when this call overlaps its write. */
  previousWrite: Promise<void> | null;
  /** Waits for that write; rethrows its failure. */
  settlePreviousWrite(): Promise<void>;
  logger: AgentLoopLogger;
}

/**
 * Runs one call (or answers it with `refused`, a refusal of the run's
 * approvals): the refusal rules first, then the tool with its validated
 * arguments. Rejects only with `RunCancelled` (the run's signal fired) or
 * with the failure of the overlapped previous write.
 */
export async function dispatchToolCall(call: RequestedToolCall, refused: string | null, afterApproval: boolean, ctx: ToolCallContext): Promise<ToolCallAnswer> {
  const name = call.name;
  const parsed = parseToolArguments(transcriptArguments(call));
  const { registry, offeredNames, previousWrite } = ctx;
  const tool = registry.get(name);
  let result: string;
  let isError = true;
  let durationMs = 0;
  let remoteCall = false;

  if (refused !== null) {
    result = refused;
  } else if (afterApproval && (tool === undefined || !offeredNames.has(name))) {
    // Disabled or dropped from the allow-list while the run waited.
    result = refusal.noLongerPermitted(name);
  } else if (tool === undefined) {
    result = `Error: unknown tool "${name}"`;
  } else if (!offeredNames.has(name)) {
    result = `Error: tool "${name}" not permitted`;
  } else if (!parsed.ok) {
    result = `Error: invalid arguments for tool "${name}": arguments are not valid JSON`;
  } else {
    const check = registry.validateArguments(name, parsed.value);
    if (!check.ok) {
      result = `Error: invalid arguments for tool "${name}": ${check.message}`;
    } else {
      // Overlapping a write: a failed write aborts this call as a cancel would.
      const writeFailed = previousWrite === null ? null : new AbortController();
      previousWrite?.catch(() => writeFailed?.abort());
      const signal = writeFailed === null ? ctx.signal : AbortSignal.any([ctx.signal, writeFailed.signal]);
      const started = performance.now();
      try {
        const context = { signal, remoteCallsMade: ctx.remoteCallsMade, countRemoteCall: () => void (remoteCall = true) };
        const running = (async () => tool.execute(check.args, context))();
        result = await raceAbort(running, signal);
        isError = false;
      } catch (error) {
        // The write's own error (RunTakenOver, the database) is what stops the run.
        if (writeFailed?.signal.aborted === true) await ctx.settlePreviousWrite();
        if (error instanceof RunCancelled || ctx.signal.aborted) {
          throw new RunCancelled();
        }
        if (error instanceof ToolInputError) {
          result = `Error: ${error.message}`;
        } else {
          // The exception may carry internals (URLs, SQL, keys): log it, tell the model only that it failed.
          ctx.logger.error({ tool: name, toolCallId: call.id, err: error }, 'A tool failed');
          result = `Error: tool "${name}" failed.`;
        }
      }
      durationMs = elapsedMs(started);
    }
  }
  return { parsed, result, isError, durationMs, remoteCall };
}
