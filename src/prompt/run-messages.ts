/**
 * A run's messages, assembled once before its first model call
 * (behaviour.md §8): the effective system prompt, the forced snippets as
 * leading system messages, and the skill block in the user prompt. The
 * agent loop (src/runs/engine) sends them; context fitting comes after.
 */
import type { ChatMessage } from '../providers/adapters/types';
import { buildSkillBlock, injectSkillBlock, SKILL_BLOCK_MAX_BYTES, type SkillBlock, type SkillInput } from './skill-block';
import { composeSnippets } from './snippet-text';

/** A snippet forced onto a run: sent as its own leading system message. */
export interface ForcedSnippet {
  identifier: string;
  name: string;
  snippet: string;
}

export interface AssembledRun {
  /** The messages of the first request, before any context fitting. */
  messages: ChatMessage[];
  skills: SkillBlock;
  /** A non-empty skill block found no user message (never the case for a run, which always has its prompt). */
  skillBlockWithoutUserMessage: boolean;
}

/** What the assembly reads of a run. */
export interface AssemblyInput {
  /**
   * The effective system prompt, already composed by the caller: the
   * override if non-empty, else the configuration's prompt, with the snippet
   * block appended (behaviour.md §4). `""` sends no system message.
   */
  systemPrompt: string;
  /** Forced snippets, in the order given. */
  forcedSnippets?: readonly ForcedSnippet[];
  /** The configuration's skills, in relation order (`sorting`). */
  configurationSkills?: readonly SkillInput[];
  /** Skills forced onto this run, after the configuration's. */
  forcedSkills?: readonly SkillInput[];
  /**
   * Earlier turns of a conversation (user and assistant messages, oldest
   * first), sent between the leading system messages and the prompt. The
   * system prompt is never part of them: it is sent again on every turn.
   */
  history?: readonly ChatMessage[];
  /** The user prompt: the last user message (the only one without history). */
  prompt: string;
}

/**
 * The one-time assembly of behaviour.md §8:
 * 1. the skill block goes into the first user message (§6): with a
 *    conversation's history that is its first stored user message, the head
 *    a context fit never drops (as nr_llm injects it after its fit);
 * 2. the effective system prompt becomes message 0 if non-empty;
 * 3. each forced snippet, composed on its own with its name as label, becomes
 *    one more leading system message in the order given — unless the system
 *    prompt already contains that exact block (it was selected by tag). As in
 *    nr_llm's `ToolLoopService::assemble`, nothing else is de-duplicated: a
 *    snippet forced twice is sent twice.
 */
export function assembleRunMessages(input: AssemblyInput): AssembledRun {
  const skills = buildSkillBlock(input.configurationSkills ?? [], input.forcedSkills ?? []);
  const injection = injectSkillBlock([...(input.history ?? []), { role: 'user', content: input.prompt }], skills.block);

  const leading: ChatMessage[] = [];
  if (input.systemPrompt !== '') {
    leading.push({ role: 'system', content: input.systemPrompt });
  }
  for (const snippet of input.forcedSnippets ?? []) {
    const block = composeSnippets([{ label: snippet.name, snippet: snippet.snippet }]);
    if (block === '' || (input.systemPrompt !== '' && input.systemPrompt.includes(block))) {
      continue;
    }
    leading.push({ role: 'system', content: block });
  }

  return {
    messages: [...leading, ...injection.messages],
    skills,
    skillBlockWithoutUserMessage: injection.noUserMessage,
  };
}

/** What the loop logs about an assembly: skills skipped (changed since review) or dropped (over the cap), a skill block without a user message. */
export function assemblyWarnings(assembled: AssembledRun): { fields: Record<string, unknown>; message: string }[] {
  const warnings: { fields: Record<string, unknown>; message: string }[] = assembled.skills.skipped.map((skipped) =>
    skipped.reason === 'checksum_mismatch'
      ? { fields: { skill: skipped.identifier }, message: 'Skill skipped: its body no longer matches the reviewed checksum' }
      : { fields: { skill: skipped.identifier, maxBytes: SKILL_BLOCK_MAX_BYTES }, message: 'Skill dropped: the skill block would exceed its byte cap' },
  );
  if (assembled.skillBlockWithoutUserMessage) warnings.push({ fields: {}, message: 'No user message to carry the skill block; no skill was injected' });
  return warnings;
}
