import { phpObjectJson } from '../graphql/raw-json';
import { phpJsonEncode, plainJsonText, plainValueOf, phpValueOf, type PhpArray } from '../shared/php-json';
import { type CallOptionsInput, DEFAULT_TIMEOUT_SECONDS, buildCallOptions, effectiveTimeout, readOptions } from './call-options';

type Configuration = CallOptionsInput['configuration'];
type Model = NonNullable<CallOptionsInput['model']>;
/** Options and overrides may be given as plain objects here; they become PHP arrays as JSON text would decode. */
type Loose<T> = Omit<T, 'options'> & { options?: Record<string, unknown> | PhpArray };

function configuration(overrides: Partial<Loose<Configuration>> = {}): Configuration {
  const { options, ...rest } = overrides;
  return {
    temperature: 0.7,
    topP: 1,
    frequencyPenalty: 0,
    presencePenalty: 0,
    maxTokens: 1000,
    systemPrompt: '',
    timeout: 0,
    translator: '',
    ...rest,
    options: asPhpArray(options ?? {}),
  };
}

function asPhpArray(value: Record<string, unknown> | PhpArray): PhpArray {
  return value instanceof Map ? value : (phpValueOf(value) as PhpArray);
}

function model(overrides: Partial<Model> = {}): Model {
  return { modelId: 'gpt-4o', defaultTimeout: 120, maxOutputTokens: 0, ...overrides };
}

interface BuildInput {
  configuration?: Configuration;
  model?: Model | null;
  overrides?: Record<string, unknown> | PhpArray;
  snippetBlock?: string;
}

function buildPhp(input: BuildInput = {}): PhpArray {
  return buildCallOptions({
    configuration: input.configuration ?? configuration(),
    model: input.model === undefined ? model() : input.model,
    snippetBlock: input.snippetBlock ?? '',
    ...(input.overrides ? { overrides: asPhpArray(input.overrides) } : {}),
  });
}

/** The options as a JavaScript object (ints as numbers, bigints beyond 2^53). */
function build(input: BuildInput = {}): Record<string, unknown> {
  return plainValueOf(buildPhp(input)) as Record<string, unknown>;
}

/** The options as nr_llm's JSON of them: PHP's values and key order. */
function json(input: BuildInput = {}): string {
  return phpObjectJson(buildPhp(input)).text;
}

/** A configuration whose `options` column holds `text`, read as nr_llm reads it. */
function withOptionsColumn(text: string, overrides: Partial<Loose<Configuration>> = {}): Configuration {
  return configuration({ ...overrides, options: readOptions(text) });
}

describe('buildCallOptions: base options', () => {
  it('always carries temperature, top_p, frequency_penalty and presence_penalty', () => {
    const options = build({
      configuration: configuration({ temperature: 0, topP: 0.5, frequencyPenalty: -1.5, presencePenalty: 2, maxTokens: 0 }),
      model: null,
    });
    expect(options).toEqual({
      temperature: 0,
      top_p: 0.5,
      frequency_penalty: -1.5,
      presence_penalty: 2,
      timeout: 120,
    });
  });

  it('lists the keys in the documented order', () => {
    const options = build({ configuration: configuration({ systemPrompt: 'P', timeout: 30 }) });
    expect(Object.keys(options)).toEqual([
      'temperature',
      'top_p',
      'frequency_penalty',
      'presence_penalty',
      'max_tokens',
      'system_prompt',
      'model',
      'timeout',
    ]);
  });

  it('carries max_tokens when > 0', () => {
    expect(build({ configuration: configuration({ maxTokens: 1 }) }).max_tokens).toBe(1);
  });

  it('carries system_prompt when non-empty, as given', () => {
    expect(build({ configuration: configuration({ systemPrompt: ' Be brief. \n' }) }).system_prompt).toBe(' Be brief. \n');
  });

  it('leaves system_prompt out when empty', () => {
    expect(build({ configuration: configuration({ systemPrompt: '' }) })).not.toHaveProperty('system_prompt');
  });

  it("carries the model's model_id as model", () => {
    expect(build({ model: model({ modelId: 'claude-sonnet-4' }) }).model).toBe('claude-sonnet-4');
  });

  it('leaves model out without a model or with an empty model_id', () => {
    expect(build({ model: null })).not.toHaveProperty('model');
    expect(build({ model: model({ modelId: '' }) })).not.toHaveProperty('model');
  });
});

describe('buildCallOptions: timeout', () => {
  it("uses the configuration's timeout when > 0", () => {
    expect(build({ configuration: configuration({ timeout: 45 }), model: model({ defaultTimeout: 300 }) }).timeout).toBe(45);
  });

  it("falls back to the model's default_timeout", () => {
    expect(build({ configuration: configuration({ timeout: 0 }), model: model({ defaultTimeout: 300 }) }).timeout).toBe(300);
  });

  it('falls back to 120 without a model', () => {
    expect(build({ configuration: configuration({ timeout: 0 }), model: null }).timeout).toBe(120);
  });

  it("takes the model's default_timeout as it is, 0 included, as nr_llm's getEffectiveTimeout does", () => {
    expect(build({ model: model({ defaultTimeout: 0 }) }).timeout).toBe(0);
  });

  it('effectiveTimeout applies the same chain; 120 only without a model', () => {
    expect(effectiveTimeout(10, { defaultTimeout: 20 })).toBe(10);
    expect(effectiveTimeout(0, { defaultTimeout: 20 })).toBe(20);
    expect(effectiveTimeout(-5, { defaultTimeout: -1 })).toBe(-1);
    expect(effectiveTimeout(0, null)).toBe(DEFAULT_TIMEOUT_SECONDS);
  });

  it('carries the translator after the model when one is set, as nr_llm does', () => {
    expect(Object.keys(build({ configuration: configuration({ translator: 'deepl' }) }))).toEqual([
      'temperature', 'top_p', 'frequency_penalty', 'presence_penalty', 'max_tokens', 'model', 'translator', 'timeout',
    ]);
    expect(build().translator).toBeUndefined();
  });

  it('removes a provider key, whether from the options or an override', () => {
    expect(build({ configuration: configuration({ options: { provider: 'openai', seed: 1 } }) })).not.toHaveProperty('provider');
    expect(build({ overrides: { provider: 'x' } })).not.toHaveProperty('provider');
  });

  it('replaces only an integer max_tokens ≤ 0; a fraction or a string stays, as PHP\'s is_int decides', () => {
    const withMaximum = model({ maxOutputTokens: 4096 });
    expect(build({ model: withMaximum, configuration: configuration({ options: { max_tokens: -1.5 } }) }).max_tokens).toBe(-1.5);
    expect(build({ model: withMaximum, configuration: configuration({ options: { max_tokens: '0' } }) }).max_tokens).toBe('0');
    expect(build({ model: withMaximum, configuration: configuration({ options: { max_tokens: 0 } }) }).max_tokens).toBe(4096);
  });
});

describe('buildCallOptions: merging', () => {
  it('the options JSON is merged over the typed parameters', () => {
    const options = build({
      configuration: configuration({ temperature: 0.7, options: { temperature: 0.2, stop: ['\n'], timeout: 5 } }),
    });
    expect(options.temperature).toBe(0.2);
    expect(options.stop).toEqual(['\n']);
    expect(options.timeout).toBe(5);
  });

  it('per-call overrides are merged over the options JSON', () => {
    const options = build({
      configuration: configuration({ options: { temperature: 0.2, seed: 1 } }),
      overrides: { temperature: 1.1, user: 'u-1' },
    });
    expect(options.temperature).toBe(1.1);
    expect(options.seed).toBe(1);
    expect(options.user).toBe('u-1');
  });

  it('keeps the base position of an overridden key and appends new keys in merge order', () => {
    const options = build({
      configuration: configuration({ options: { seed: 1, temperature: 0.1 } }),
      overrides: { user: 'u', top_p: 0.3 },
    });
    expect(Object.keys(options)).toEqual([
      'temperature',
      'top_p',
      'frequency_penalty',
      'presence_penalty',
      'max_tokens',
      'model',
      'timeout',
      'seed',
      'user',
    ]);
  });

  it('the options JSON may set the model and the system prompt', () => {
    const options = build({
      configuration: configuration({ systemPrompt: 'Column.', options: { model: 'other', system_prompt: 'From options.' } }),
    });
    expect(options.model).toBe('other');
    expect(options.system_prompt).toBe('From options.');
  });

  it('an integer beyond 2^53 in the options JSON keeps its digits, in nr_llm\'s JSON and in the plain options a run sends', () => {
    const column = withOptionsColumn('{"seed":9007199254740993,"nested":{"ids":[-9007199254740993,7]}}');
    expect(json({ configuration: column })).toContain('"seed":9007199254740993,"nested":{"ids":[-9007199254740993,7]}');
    const options = build({ configuration: column });
    expect(options.seed).toBe(9007199254740993n);
    expect(options.nested).toEqual({ ids: [-9007199254740993n, 7] });
    // Safe integers stay numbers for the code that reads them.
    expect(options.max_tokens).toBe(1000);
    expect(options.timeout).toBe(120);
    expect(plainJsonText(options)).toContain('"seed":9007199254740993,"nested":{"ids":[-9007199254740993,7]}');
  });

  it('does not change its inputs', () => {
    const columnOptions = readOptions('{"max_tokens":0}');
    const overrides: PhpArray = new Map([['system_prompt', 'O']]);
    build({ configuration: configuration({ options: columnOptions }), overrides, snippetBlock: 'B:\nx' });
    expect(phpJsonEncode(columnOptions)).toBe('{"max_tokens":0}');
    expect(phpJsonEncode(overrides)).toBe('{"system_prompt":"O"}');
  });
});

describe('buildCallOptions: snippet block', () => {
  const block = 'Nova persona:\nYou are Nova, a friendly expert.';

  it("appends the block behind the configuration's prompt", () => {
    expect(build({ configuration: configuration({ systemPrompt: 'You are helpful.' }), snippetBlock: block }).system_prompt).toBe(
      'You are helpful.\n\n' + block,
    );
  });

  it('a configuration without a prompt gets the block alone', () => {
    expect(build({ snippetBlock: block }).system_prompt).toBe(block);
  });

  it('a per-call system prompt override replaces the prompt before the append', () => {
    const options = build({
      configuration: configuration({ systemPrompt: 'Configuration prompt.' }),
      overrides: { system_prompt: 'Override.' },
      snippetBlock: block,
    });
    expect(options.system_prompt).toBe('Override.\n\n' + block);
  });

  it('an empty override leaves the block alone', () => {
    const options = build({
      configuration: configuration({ systemPrompt: 'Configuration prompt.' }),
      overrides: { system_prompt: '' },
      snippetBlock: block,
    });
    expect(options.system_prompt).toBe(block);
  });

  it('the block is appended to a system prompt from the options JSON', () => {
    const options = build({ configuration: configuration({ options: { system_prompt: 'From options.' } }), snippetBlock: block });
    expect(options.system_prompt).toBe('From options.\n\n' + block);
  });

  it('an empty block leaves the options exactly as merged', () => {
    const withoutBlock = build({ configuration: configuration({ systemPrompt: 'P \n' }), snippetBlock: '' });
    expect(withoutBlock.system_prompt).toBe('P \n');
  });

  it('an empty block adds no system_prompt key', () => {
    expect(build({ snippetBlock: '' })).not.toHaveProperty('system_prompt');
  });

  it('an empty block keeps a non-string system prompt untouched', () => {
    expect(build({ overrides: { system_prompt: null }, snippetBlock: '' }).system_prompt).toBeNull();
    expect(build({ configuration: configuration({ options: { system_prompt: 5 } }) }).system_prompt).toBe(5);
  });

  it('a non-string system prompt counts as empty when a block is appended', () => {
    expect(build({ overrides: { system_prompt: null }, snippetBlock: block }).system_prompt).toBe(block);
    expect(build({ overrides: { system_prompt: ['x'] }, snippetBlock: block }).system_prompt).toBe(block);
  });

  it('a system prompt set by the block is the last key', () => {
    expect(Object.keys(build({ snippetBlock: block })).at(-1)).toBe('system_prompt');
  });
});

describe('buildCallOptions: max_tokens fallback', () => {
  it('keeps a positive max_tokens', () => {
    expect(build({ configuration: configuration({ maxTokens: 500 }), model: model({ maxOutputTokens: 4096 }) }).max_tokens).toBe(500);
  });

  it("a missing max_tokens becomes the model's max_output_tokens when > 0", () => {
    expect(build({ configuration: configuration({ maxTokens: 0 }), model: model({ maxOutputTokens: 4096 }) }).max_tokens).toBe(4096);
  });

  it('a missing max_tokens stays missing when the model does not know its limit', () => {
    expect(build({ configuration: configuration({ maxTokens: 0 }), model: model({ maxOutputTokens: 0 }) })).not.toHaveProperty(
      'max_tokens',
    );
  });

  it('a missing max_tokens stays missing without a model', () => {
    expect(build({ configuration: configuration({ maxTokens: 0 }), model: null })).not.toHaveProperty('max_tokens');
  });

  it("an override of 0 means unset: the model's max_output_tokens is used", () => {
    expect(build({ overrides: { max_tokens: 0 }, model: model({ maxOutputTokens: 8192 }) }).max_tokens).toBe(8192);
  });

  it('a negative max_tokens from the options JSON is removed when the model has no limit', () => {
    const options = build({
      configuration: configuration({ options: { max_tokens: -1 } }),
      model: model({ maxOutputTokens: 0 }),
    });
    expect(options).not.toHaveProperty('max_tokens');
  });

  it('a null max_tokens counts as missing', () => {
    expect(build({ overrides: { max_tokens: null }, model: model({ maxOutputTokens: 2048 }) }).max_tokens).toBe(2048);
    expect(build({ overrides: { max_tokens: null }, model: model({ maxOutputTokens: 0 }) })).not.toHaveProperty('max_tokens');
  });

  it('a positive override beats the configuration and the model', () => {
    expect(
      build({ configuration: configuration({ maxTokens: 500 }), overrides: { max_tokens: 50 }, model: model({ maxOutputTokens: 4096 }) })
        .max_tokens,
    ).toBe(50);
  });

  it('a max_tokens that is not a number is left alone', () => {
    expect(build({ overrides: { max_tokens: '0' }, model: model({ maxOutputTokens: 4096 }) }).max_tokens).toBe('0');
  });

  it('a max_tokens filled from the model keeps the position of the replaced key', () => {
    const options = build({ overrides: { max_tokens: 0 }, model: model({ maxOutputTokens: 8192 }) });
    expect(Object.keys(options).indexOf('max_tokens')).toBe(4);
  });
});

describe('buildCallOptions: everything together', () => {
  it('builds the full options of a typical call, byte for byte as nr_llm\'s JSON of them', () => {
    expect(
      json({
        configuration: configuration({
          temperature: 0.3,
          topP: 0.9,
          frequencyPenalty: 0.1,
          presencePenalty: 0.2,
          maxTokens: 0,
          systemPrompt: 'You are a helpful assistant.',
          timeout: 0,
          options: readOptions('{"seed": 42}'),
        }),
        model: model({ modelId: 'gpt-4o-mini', defaultTimeout: 60, maxOutputTokens: 16384 }),
        overrides: new Map([['temperature', 0]]),
        snippetBlock: 'Formal tone:\nUse a formal, professional tone of voice.',
      }),
    ).toBe(
      '{"temperature":0.0,"top_p":0.9,"frequency_penalty":0.1,"presence_penalty":0.2,' +
        '"system_prompt":"You are a helpful assistant.\\n\\nFormal tone:\\nUse a formal, professional tone of voice.",' +
        '"model":"gpt-4o-mini","timeout":60,"seed":42,"max_tokens":16384}',
    );
  });
});

describe('buildCallOptions: the options column as nr_llm decodes and merges it', () => {
  it('a model with default_timeout 0 gives "timeout":0', () => {
    expect(json({ configuration: configuration({ maxTokens: 0 }), model: model({ defaultTimeout: 0 }) })).toBe(
      '{"temperature":0.7,"top_p":1.0,"frequency_penalty":0.0,"presence_penalty":0.0,"model":"gpt-4o","timeout":0}',
    );
  });

  it('a translator is included after the model', () => {
    expect(json({ configuration: configuration({ maxTokens: 0, translator: 'deepl' }) })).toBe(
      '{"temperature":0.7,"top_p":1.0,"frequency_penalty":0.0,"presence_penalty":0.0,"model":"gpt-4o","translator":"deepl","timeout":120}',
    );
  });

  it('an options key "provider" is removed', () => {
    expect(json({ configuration: withOptionsColumn('{"provider":"openai","seed":1}', { maxTokens: 0 }) })).toBe(
      '{"temperature":0.7,"top_p":1.0,"frequency_penalty":0.0,"presence_penalty":0.0,"model":"gpt-4o","timeout":120,"seed":1}',
    );
  });

  it('a list ["a"] is merged as array_merge merges it: "0":"a" appended', () => {
    expect(json({ configuration: withOptionsColumn('["a"]', { maxTokens: 0 }) })).toBe(
      '{"temperature":0.7,"top_p":1.0,"frequency_penalty":0.0,"presence_penalty":0.0,"model":"gpt-4o","timeout":120,"0":"a"}',
    );
  });

  it('an int key is renumbered from 0 and goes to the end: {"5":"x"} gives "0":"x"', () => {
    expect(json({ configuration: withOptionsColumn('{"5":"x","seed":1,"9":"y"}', { maxTokens: 0 }) })).toBe(
      '{"temperature":0.7,"top_p":1.0,"frequency_penalty":0.0,"presence_penalty":0.0,"model":"gpt-4o","timeout":120,"0":"x","seed":1,"1":"y"}',
    );
  });

  it('a string key that is not a canonical int stays a string key in place ("05", "-0")', () => {
    expect(json({ configuration: withOptionsColumn('{"05":"a","-0":"b"}', { maxTokens: 0 }) })).toBe(
      '{"temperature":0.7,"top_p":1.0,"frequency_penalty":0.0,"presence_penalty":0.0,"model":"gpt-4o","timeout":120,"05":"a","-0":"b"}',
    );
  });

  it('{"max_tokens":0.0} stays 0.0 with a model maximum of 4096: a float, not an int, as PHP\'s is_int sees it', () => {
    const options = json({ configuration: withOptionsColumn('{"max_tokens":0.0}', { maxTokens: 0 }), model: model({ maxOutputTokens: 4096 }) });
    expect(options).toContain('"max_tokens":0.0');
    expect(json({ configuration: withOptionsColumn('{"max_tokens":0}', { maxTokens: 0 }), model: model({ maxOutputTokens: 4096 }) })).toContain('"max_tokens":4096');
  });

  it('max_tokens from the options replaces the configuration\'s where it stands', () => {
    expect(json({ configuration: withOptionsColumn('{"max_tokens":-1}', { maxTokens: 500 }), model: model({ maxOutputTokens: 4096 }) })).toBe(
      '{"temperature":0.7,"top_p":1.0,"frequency_penalty":0.0,"presence_penalty":0.0,"max_tokens":4096,"model":"gpt-4o","timeout":120}',
    );
  });

  it('integers beyond 2^53 keep their exact value', () => {
    expect(json({ configuration: withOptionsColumn('{"seed":9007199254740993}', { maxTokens: 0 }) })).toContain('"seed":9007199254740993');
    expect(json({ configuration: withOptionsColumn('{"max_tokens":9007199254740993}', { maxTokens: 0 }), model: model({ maxOutputTokens: 4096 }) })).toContain(
      '"max_tokens":9007199254740993',
    );
  });

  it('key order is the text\'s, nested arrays included', () => {
    expect(json({ configuration: withOptionsColumn('{"b":{"z":1,"1":"a"},"a":2}', { maxTokens: 0 }) })).toBe(
      '{"temperature":0.7,"top_p":1.0,"frequency_penalty":0.0,"presence_penalty":0.0,"model":"gpt-4o","timeout":120,"b":{"z":1,"1":"a"},"a":2}',
    );
  });
});

describe('readOptions (LlmConfiguration::getOptionsArray)', () => {
  it.each([
    ['NULL', null],
    ['an empty text', ''],
    ['whitespace', '  '],
    ['invalid JSON', '{seed: 1}'],
    ['a scalar', '5'],
    ['a string', '"x"'],
    ['null', 'null'],
    ['an unpaired surrogate escape', '{"a":"\\ud800"}'],
  ])('%s reads as an empty array', (_case, text) => {
    expect(readOptions(text).size).toBe(0);
  });

  it('keeps any array as decoded, a list included', () => {
    expect(phpJsonEncode(readOptions('["a"]'))).toBe('["a"]');
    expect(phpJsonEncode(readOptions(' {"seed": 1, "stop": ["\\n"]} '))).toBe('{"seed":1,"stop":["\\n"]}');
  });
});
