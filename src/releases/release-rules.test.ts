import { phpJsonDecode, phpObjectText, phpValueOf, plainValueOf, type PhpArray } from '../shared/php-json';
import { checkLabel, releaseCallOptions as releaseCallOptionsOf, sameReleaseContent, type ReleaseContent } from './release-rules';

const php = (value: Record<string, unknown>) => phpValueOf(value) as PhpArray;
/** releaseCallOptions with plain objects in and out. */
const releaseCallOptions = (frozen: Record<string, unknown>, overrides: Record<string, unknown>, model: { maxOutputTokens: number } | null) =>
  plainValueOf(releaseCallOptionsOf(php(frozen), php(overrides), model)) as Record<string, unknown>;

describe('release labels', () => {
  it('accepts letters, digits, "-", "_" and "." and stores them in lower case', () => {
    expect(checkLabel('production')).toEqual({ ok: true, label: 'production' });
    expect(checkLabel('Staging-2.1_rc')).toEqual({ ok: true, label: 'staging-2.1_rc' });
    expect(checkLabel('x'.repeat(64))).toEqual({ ok: true, label: 'x'.repeat(64) });
  });

  it.each([
    ['', 'must not be empty'],
    ['x'.repeat(65), 'at most 64 characters'],
    ['prod uction', 'only letters, digits'],
    ['prod/1', 'only letters, digits'],
    ['prödüction', 'only letters, digits'],
    [' production', 'only letters, digits'],
  ])('refuses %j', (label, message) => {
    const checked = checkLabel(label);
    expect(checked.ok).toBe(false);
    expect(!checked.ok && checked.message).toContain(message);
  });
});

describe('call options of a release run', () => {
  const frozen = { temperature: 0.2, top_p: 1, max_tokens: 300, system_prompt: 'Frozen.', model: 'gpt-frozen', timeout: 30 };

  it('are the frozen options without the system prompt (the run sends it as its first message)', () => {
    expect(releaseCallOptions(frozen, {}, { maxOutputTokens: 4096 })).toEqual({ temperature: 0.2, top_p: 1, max_tokens: 300, model: 'gpt-frozen', timeout: 30 });
  });

  it('take the run\'s own maxTokens and temperature over the frozen ones', () => {
    expect(releaseCallOptions(frozen, { temperature: 1.1, max_tokens: 50 }, null)).toMatchObject({ temperature: 1.1, max_tokens: 50 });
  });

  it('apply the max_tokens fallback to a run\'s 0, as for a configuration', () => {
    expect(releaseCallOptions(frozen, { max_tokens: 0 }, { maxOutputTokens: 4096 }).max_tokens).toBe(4096);
    expect('max_tokens' in releaseCallOptions(frozen, { max_tokens: 0 }, { maxOutputTokens: 0 })).toBe(false);
  });

  it('do not change the frozen array', () => {
    const stored = php(frozen);
    releaseCallOptionsOf(stored, php({ temperature: 2 }), null);
    expect(stored.get('temperature')).toBe(0.2);
    expect(stored.get('system_prompt')).toBe('Frozen.');
  });

  it('keep PHP\'s values and key order: 64-bit integers, a float 0.0 that the fallback leaves alone, int keys', () => {
    const stored = phpJsonDecode('{"seed":9007199254740993,"max_tokens":0.0,"b":2,"0":"a","system_prompt":"x"}') as PhpArray;
    const options = releaseCallOptionsOf(stored, new Map([['temperature', 1.5]]), { maxOutputTokens: 4096 });
    expect(phpObjectText(options)).toBe('{"seed":9007199254740993,"max_tokens":0.0,"b":2,"0":"a","temperature":1.5}');
  });
});

describe('release content', () => {
  const content: ReleaseContent = {
    configurationVersion: 3,
    modelUid: 7,
    effectiveSystemPrompt: 'You help.\n\nTone:\nBe brief.',
    callOptions: new Map([['temperature', 0.5]]),
    snippets: [{ uid: 1, identifier: 'tone', version: 2 }],
    skills: [],
  };

  it('is the same when everything frozen is equal', () => {
    expect(sameReleaseContent(content, { ...content, snippets: [{ uid: 1, identifier: 'tone', version: 2 }] })).toBe(true);
  });

  it('differs with a snippet version, the prompt, the options or the configuration version', () => {
    expect(sameReleaseContent(content, { ...content, snippets: [{ uid: 1, identifier: 'tone', version: 3 }] })).toBe(false);
    expect(sameReleaseContent(content, { ...content, effectiveSystemPrompt: 'You help.' })).toBe(false);
    expect(sameReleaseContent(content, { ...content, callOptions: new Map([['temperature', 0.6]]) })).toBe(false);
    expect(sameReleaseContent(content, { ...content, callOptions: new Map([['temperature', 0.5]]) })).toBe(true);
    expect(sameReleaseContent(content, { ...content, configurationVersion: 4 })).toBe(false);
  });
});
