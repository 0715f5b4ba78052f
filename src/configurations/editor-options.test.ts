import { phpJsonDecode, phpValueOf, type PhpArray } from '../shared/php-json';
import { adminOnlyOptionChanged, optionEntries } from './editor-options';

const php = (value: Record<string, unknown>) => phpValueOf(value) as PhpArray;
const changed = (before: Record<string, unknown>, after: Record<string, unknown>) => adminOnlyOptionChanged(php(before), php(after));
const changedText = (before: string, after: string) => adminOnlyOptionChanged(optionEntries(before), optionEntries(after));

describe('options an EDITOR may set', () => {
  test('generation parameters are the EDITOR\'s', () => {
    expect(changed({}, { temperature: 0.2, stop: ['x'], seed: 1 })).toBeNull();
    expect(changed({ top_p: 0.5 }, {})).toBeNull();
  });
  test('the model, or any other key, is the ADMIN\'s: not added, changed or removed', () => {
    expect(changed({}, { model: 'gpt-4o' })).toBe('model');
    expect(changed({ model: 'a' }, { model: 'b' })).toBe('model');
    expect(changed({ model: 'a', base_url: 'x' }, { model: 'a' })).toBe('base_url');
  });
  test('a key the ADMIN set may stay as it is while the EDITOR changes others', () => {
    expect(changed({ model: 'a', nested: { b: 1 } }, { model: 'a', nested: { b: 1 }, temperature: 1 })).toBeNull();
    expect(changedText('{"budget":9007199254740993}', '{ "budget": 9007199254740993, "seed": 9007199254740995 }')).toBeNull();
  });
  test('values are compared with their exact digits: an integer beyond 2^53 is not rounded into an equal one', () => {
    expect(changedText('{"budget":9007199254740993}', '{"budget":9007199254740992}')).toBe('budget');
    expect(changedText('{"n":{"id":9007199254740993}}', '{"n":{"id":9007199254740992}}')).toBe('n');
  });
  test('the column reads as an object\'s entries; anything else as none', () => {
    expect(optionEntries('{"seed":9007199254740993}')).toEqual(phpJsonDecode('{"seed":9007199254740993}'));
    expect(optionEntries('{"seed":9007199254740993}').get('seed')).toBe(9007199254740993n);
    for (const text of [null, undefined, '', 'null', '["model"]', '5', '{"a":', ' [{"model":"x"}]']) expect(optionEntries(text).size).toBe(0);
  });
});
