/**
 * What a version of a snippet, configuration or skill holds, and how two
 * versions compare. Pure functions over plain records: the history service
 * stores these states, the change detector compares their fingerprints, the
 * diff query shows them side by side.
 */
import crypto from 'node:crypto';

export type VersionedKind = 'snippet' | 'configuration' | 'skill' | 'task';

export const VERSIONED_KINDS: readonly VersionedKind[] = ['snippet', 'configuration', 'skill', 'task'];

/** Where a version came from: a write through this API, or a row someone else changed in the table. */
export type VersionSource = 'api' | 'external';

export interface SnippetState {
  identifier: string;
  name: string;
  description: string | null;
  /** The stored CSV, exactly as in the row. */
  tags: string;
  snippet: string;
  /** The stored metadata text, exactly as in the row. */
  metadata: string | null;
  isActive: boolean;
  hidden: boolean;
  sorting: number;
  deleted: boolean;
}

export interface ConfigurationState {
  identifier: string;
  name: string;
  description: string | null;
  modelUid: number;
  /** The model's identifier when the version was taken ('' without a model). */
  model: string;
  systemPrompt: string;
  snippetTags: string;
  temperature: number;
  maxTokens: number;
  topP: number;
  frequencyPenalty: number;
  presencePenalty: number;
  timeout: number;
  options: string | null;
  /** Attached skill uids in injection order. */
  skillUids: number[];
  isActive: boolean;
  hidden: boolean;
  isDefault: boolean;
  sorting: number;
  deleted: boolean;
}

export interface SkillState {
  identifier: string;
  name: string;
  description: string | null;
  body: string;
  bodyChecksum: string;
  enabled: boolean;
  hidden: boolean;
  deleted: boolean;
}

/** A task: its `tx_nrllm_task` columns, its skills, and what `promptwire_task_extension` adds. */
export interface TaskState {
  identifier: string;
  name: string;
  description: string | null;
  category: string;
  /** 0: the active default configuration. */
  configurationUid: number;
  promptTemplate: string;
  inputType: string;
  outputFormat: string;
  /** Attached skill uids in injection order. */
  skillUids: number[];
  /** The declared variables as stored (JSON text; "[]" without any). */
  variables: string;
  /** The output schema as stored (JSON text); null: none. */
  outputSchema: string | null;
  isActive: boolean;
  hidden: boolean;
  sorting: number;
  deleted: boolean;
}

export interface StateOf {
  snippet: SnippetState;
  configuration: ConfigurationState;
  skill: SkillState;
  task: TaskState;
}

export type AnyState = SnippetState | ConfigurationState | SkillState | TaskState;

/** The field whose text a text diff shows, per kind. */
export const TEXT_FIELD: { [K in VersionedKind]: keyof StateOf[K] & string } = {
  snippet: 'snippet',
  configuration: 'systemPrompt',
  skill: 'body',
  task: 'promptTemplate',
};

/** A state as stored: keys in a fixed order, so equal states serialise to equal text. */
export function serializeState(state: AnyState): string {
  return JSON.stringify(state, Object.keys(state).sort());
}

/**
 * Identifies a state for change detection: equal states have equal
 * fingerprints whichever key order they were built in.
 */
export function fingerprintState(state: AnyState): string {
  return crypto.createHash('sha256').update(serializeState(state), 'utf8').digest('hex');
}

export interface FieldChange {
  field: string;
  before: unknown;
  after: unknown;
}

/** The fields whose values differ between two states of one kind, by field name. */
export function diffFields(before: AnyState, after: AnyState): FieldChange[] {
  const changes: FieldChange[] = [];
  const keys = [...new Set([...Object.keys(before), ...Object.keys(after)])].sort();
  for (const key of keys) {
    const a = (before as unknown as Record<string, unknown>)[key];
    const b = (after as unknown as Record<string, unknown>)[key];
    if (JSON.stringify(a) !== JSON.stringify(b)) changes.push({ field: key, before: a ?? null, after: b ?? null });
  }
  return changes;
}

/** A unified diff of two texts; `""` when they are equal (see unified-diff.ts). */
export { unifiedDiff } from './unified-diff';
