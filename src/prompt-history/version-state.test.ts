import { diffFields, fingerprintState, serializeState, type SkillState, unifiedDiff } from './version-state';

const skill: SkillState = { identifier: 'guide', name: 'Guide', description: null, body: 'Short.', bodyChecksum: 'x', enabled: true, hidden: false, deleted: false };

describe('version states', () => {
  it('equal states have equal fingerprints whatever their key order', () => {
    const reordered = Object.fromEntries(Object.entries(skill).reverse()) as unknown as SkillState;
    expect(serializeState(reordered)).toBe(serializeState(skill));
    expect(fingerprintState(reordered)).toBe(fingerprintState(skill));
    expect(fingerprintState({ ...skill, body: 'Short!' })).not.toBe(fingerprintState(skill));
  });

  it('lists only the fields that differ, by name', () => {
    expect(diffFields(skill, { ...skill, enabled: false, body: 'Long.' })).toEqual([
      { field: 'body', before: 'Short.', after: 'Long.' },
      { field: 'enabled', before: true, after: false },
    ]);
    expect(diffFields(skill, skill)).toEqual([]);
  });

  it('a unified text diff shows removed and added lines; equal texts give ""', () => {
    const diff = unifiedDiff('a\nb\nc', 'a\nB\nc', 'v1', 'v2');
    expect(diff).toContain('--- v1');
    expect(diff).toContain('+++ v2');
    expect(diff).toContain('-b\n+B\n');
    expect(diff).not.toContain('No newline');
    expect(unifiedDiff('same', 'same', 'v1', 'v2')).toBe('');
  });
});
