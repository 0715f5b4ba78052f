import { adminOnlyOptionChanged } from './editor-options';

describe('options an EDITOR may set', () => {
  test('generation parameters are the EDITOR\'s', () => {
    expect(adminOnlyOptionChanged({}, { temperature: 0.2, stop: ['x'], seed: 1 })).toBeNull();
    expect(adminOnlyOptionChanged({ top_p: 0.5 }, {})).toBeNull();
  });
  test('the model, or any other key, is the ADMIN\'s: not added, changed or removed', () => {
    expect(adminOnlyOptionChanged({}, { model: 'gpt-4o' })).toBe('model');
    expect(adminOnlyOptionChanged({ model: 'a' }, { model: 'b' })).toBe('model');
    expect(adminOnlyOptionChanged({ model: 'a', base_url: 'x' }, { model: 'a' })).toBe('base_url');
  });
  test('a key the ADMIN set may stay as it is while the EDITOR changes others', () => {
    expect(adminOnlyOptionChanged({ model: 'a', nested: { b: 1 } }, { model: 'a', nested: { b: 1 }, temperature: 1 })).toBeNull();
  });
});
