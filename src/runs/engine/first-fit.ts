/**
 * The context fit of a run's first model call, known before the run starts:
 * the same assembly, offered tools, budget and first-send calibration the
 * loop's first call fits with, so both give the same result. A conversation
 * records how many turns that fit dropped on the user message it stores
 * before the call. The assembly is handed to the loop with the run, so the
 * messages are assembled once.
 */
import { assembleRunMessages, type AssembledRun } from '../../prompt/run-messages';
import { toToolDefinition } from '../tools/tool-registry';
import { CALIBRATION_SEED, contextBudget, fitContext, type ContextFit } from './context-window';
import type { AgentLoopInput } from './loop-contract';

export function firstCallFit(input: Omit<AgentLoopInput, 'signal'>): { assembled: AssembledRun; fit: ContextFit } {
  const assembled = assembleRunMessages(input);
  const messages = assembled.messages;
  // The first call offers every tool the run offers (none: a plain call).
  const tools = input.tools.registry.resolveOffered(input.tools.allowList).map(toToolDefinition);
  const budget = contextBudget({ contextLength: input.model.contextLength, runMaxTokens: input.runMaxTokens, modelMaxOutputTokens: input.model.maxOutputTokens });
  return { assembled, fit: fitContext(messages, tools, budget, CALIBRATION_SEED) };
}
