/**
 * A waiting run's state as nr_llm keeps it in `tx_nrllm_agentrun.suspended_state`
 * (its `SuspendedRunState::toArray()`, JSON): the transcript up to and
 * including the assistant's tool-call turn, the turn's calls, the counters,
 * the allow-list and the call options. TYPO3's approvals inbox reads it to
 * show the pending calls of a run.
 *
 * This service never reads it back: a run goes on from its stored steps
 * (`run-machine.ts`), and the column is written with the APPROVAL step that
 * makes the run wait and emptied when the wait ends. nr_llm seals the column
 * with nr-vault's envelope; a value without its marker is read as
 * cleartext, which is what is written here (the same transcript is in the
 * run's steps, `tx_nrllm_agentrun_event.payload`, in cleartext already).
 */
import type { CallOptions, ChatMessage } from '../../providers/adapters/types';
import { transcriptToolCall, type RunProgress } from './run-machine';
import type { RequestedToolCall } from './loop-step';

/** `ToolOptions::fromArray` reads these keys; the rest of the call options means nothing to it. */
const TOOL_OPTION_KEYS = ['temperature', 'max_tokens', 'top_p', 'frequency_penalty', 'presence_penalty', 'response_format', 'stop_sequences', 'model', 'think', 'tool_choice', 'parallel_tool_calls'] as const;

/** `SuspendedRunState::toArray()`. */
export interface Typo3SuspendedState {
  messages: Typo3Message[];
  pendingCalls: Typo3ToolCall[];
  iterations: number;
  promptTokens: number;
  completionTokens: number;
  allowedToolNames: string[] | null;
  options: Record<string, unknown>;
  inputToolName: null;
  inputSchema: [];
  callPreviews: [];
  forcedSnippetUids: [];
  forcedSkillUids: [];
}

/** `ChatMessage::toArray()`: content always a string; tool-call arguments as JSON text. */
interface Typo3Message {
  role: string;
  content: string;
  tool_calls?: { id: string; type: 'function'; function: { name: string; arguments: string } }[];
  tool_call_id?: string;
}

/** `ToolCall::toArray()`: the arguments decoded. */
interface Typo3ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: unknown };
}

export function suspendedStateOf(
  progress: RunProgress,
  pending: readonly RequestedToolCall[],
  run: { allowList: readonly string[] | null; callOptions: CallOptions },
): Typo3SuspendedState {
  const options: Record<string, unknown> = {};
  for (const key of TOOL_OPTION_KEYS) {
    const value = run.callOptions[key];
    if (value !== undefined && value !== null && value !== '') options[key] = value;
  }
  return {
    messages: (progress.transcript ?? []).map(typo3Message),
    pendingCalls: pending.map((call) => {
      const wire = transcriptToolCall(call);
      const decoded = isPlainObject(call.arguments) ? call.arguments : wire.function.arguments;
      return { id: call.id, type: 'function', function: { name: call.name, arguments: decoded } };
    }),
    iterations: progress.iterations,
    promptTokens: progress.usage.promptTokens,
    completionTokens: progress.usage.completionTokens,
    allowedToolNames: run.allowList === null ? null : [...run.allowList],
    options,
    inputToolName: null,
    inputSchema: [],
    callPreviews: [],
    forcedSnippetUids: [],
    forcedSkillUids: [],
  };
}

function typo3Message(message: ChatMessage): Typo3Message {
  switch (message.role) {
    case 'assistant': {
      const out: Typo3Message = { role: 'assistant', content: message.content ?? '' };
      if (message.tool_calls && message.tool_calls.length > 0) {
        out.tool_calls = message.tool_calls.map((call) => ({ id: call.id, type: 'function', function: { name: call.function.name, arguments: call.function.arguments } }));
      }
      return out;
    }
    case 'tool':
      return { role: 'tool', content: message.content, tool_call_id: message.tool_call_id };
    default:
      return { role: message.role, content: message.content };
  }
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
