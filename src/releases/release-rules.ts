/**
 * The rules of releases that need no database: what a label may be, what a
 * run of a release sends, and when publishing changes nothing.
 */
import { applyMaxTokensFallback, type CallOptionsModel } from '../prompt/call-options';
import { phpArrayMerge, phpObjectText, type PhpArray } from '../shared/php-json';

export const MAX_LABEL_LENGTH = 64;

const LABEL_PATTERN = /^[A-Za-z0-9._-]+$/;

export type LabelCheck = { ok: true; label: string } | { ok: false; message: string };

/**
 * A label is 1 to 64 letters, digits, `-`, `_` or `.`. It is compared and
 * stored in lower case, so `Production` and `production` are one label on
 * SQLite and on MySQL (whose collation ignores case) alike.
 */
export function checkLabel(label: string): LabelCheck {
  if (label.length === 0) return { ok: false, message: 'label must not be empty' };
  if (label.length > MAX_LABEL_LENGTH) return { ok: false, message: `label must be at most ${MAX_LABEL_LENGTH} characters` };
  if (!LABEL_PATTERN.test(label)) return { ok: false, message: `label may contain only letters, digits, "-", "_" and "."; got "${label}"` };
  return { ok: true, label: label.toLowerCase() };
}

/** One snippet (or skill) version a release or run composed. */
export interface ReleasedRecord {
  uid: number;
  identifier: string;
  version: number;
}

/**
 * The call options of one call of a release run: the frozen options with
 * the run's own overrides (`max_tokens`, `temperature` from `startRun`)
 * merged over them (`array_merge`), then the `max_tokens` fallback, as for
 * a configuration. The system prompt is not among them: the run sends the
 * frozen one as its first message.
 */
export function releaseCallOptions(frozen: PhpArray, overrides: PhpArray, model: Pick<CallOptionsModel, 'maxOutputTokens'> | null): PhpArray {
  const options = phpArrayMerge(frozen, overrides);
  options.delete('provider');
  options.delete('system_prompt');
  applyMaxTokensFallback(options, model);
  return options;
}

/** What a publication freezes; two publications with equal content are one release. */
export interface ReleaseContent {
  configurationVersion: number;
  modelUid: number;
  effectiveSystemPrompt: string;
  callOptions: PhpArray;
  snippets: readonly ReleasedRecord[];
  skills: readonly (ReleasedRecord & { skill: unknown })[];
}

export function sameReleaseContent(a: ReleaseContent, b: ReleaseContent): boolean {
  return (
    a.configurationVersion === b.configurationVersion &&
    a.modelUid === b.modelUid &&
    a.effectiveSystemPrompt === b.effectiveSystemPrompt &&
    phpObjectText(a.callOptions) === phpObjectText(b.callOptions) &&
    JSON.stringify(a.snippets) === JSON.stringify(b.snippets) &&
    JSON.stringify(a.skills) === JSON.stringify(b.skills)
  );
}
