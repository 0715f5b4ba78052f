import { applyPatch, createTwoFilesPatch } from 'diff';
import { unifiedDiff } from './unified-diff';

/** The diff library on the whole texts: what `unifiedDiff` must match. */
function whole(before: string, after: string): string {
  const newline = (text: string) => (text === '' || text.endsWith('\n') ? text : text + '\n');
  return before === after ? '' : createTwoFilesPatch('now', 'after', newline(before), newline(after), undefined, undefined, { context: 3 });
}

function random(seed: number): () => number {
  let state = seed;
  return () => {
    state = (state * 1_103_515_245 + 12_345) % 2_147_483_648;
    return state / 2_147_483_648;
  };
}

/** A text of `count` lines drawn by `line`, and an edit of it: lines replaced, inserted, removed, at the ends too. */
function editedPair(next: () => number, count: number, line: (index: number) => string): [string, string] {
  const lines = Array.from({ length: count }, (_, index) => line(index));
  const edited = [...lines];
  for (let edit = Math.floor(next() * 4); edit >= 0; edit -= 1) {
    const at = Math.floor(next() * (edited.length + 1));
    const kind = next();
    if (kind < 0.4 && at < edited.length) edited[at] = `changed ${edit} ${next()}`;
    else if (kind < 0.7) edited.splice(at, 0, `inserted ${edit} ${next()}`);
    else edited.splice(at, 1);
  }
  const end = (list: string[]) => list.join('\n') + (next() < 0.8 ? '\n' : '');
  return [end(lines), end(edited)];
}

describe('unified diffs of long texts', () => {
  it('match the diff of the whole texts when every line is distinct', () => {
    const next = random(3);
    for (let round = 0; round < 400; round += 1) {
      const [before, after] = editedPair(next, Math.floor(next() * 40), (index) => `line ${index}`);
      expect(unifiedDiff(before, after, 'now', 'after')).toBe(whole(before, after));
    }
  });

  it('always turn the text before into the text after, also with repeated lines', () => {
    const next = random(11);
    for (let round = 0; round < 400; round += 1) {
      const [before, after] = editedPair(next, Math.floor(next() * 30), () => ['a', 'b', '', 'a b'][Math.floor(next() * 4)]!);
      const diff = unifiedDiff(before, after, 'now', 'after');
      if (before === after) {
        expect(diff).toBe('');
        continue;
      }
      const newline = (text: string) => (text === '' || text.endsWith('\n') ? text : text + '\n');
      expect(applyPatch(newline(before), diff)).toBe(newline(after));
    }
  });

  it('numbers the hunks of a change deep inside a long prompt as the whole diff does', () => {
    const lines = Array.from({ length: 900 }, (_, index) => `Snippet ${index}:\nFragment ${index}.`);
    const before = lines.join('\n\n');
    const after = before.replace('Fragment 450.', 'Edited.').replace('Fragment 452.', 'Edited too.');
    const diff = unifiedDiff(before, after, 'c (now)', 'c (after the change)');
    expect(diff).toBe(whole(before, after).replace('--- now', '--- c (now)').replace('+++ after', '+++ c (after the change)'));
    expect(diff).toContain('@@ -1349,');
  });

  it('handles empty texts and a change on the first or last line', () => {
    for (const [before, after] of [
      ['', 'one'],
      ['one', ''],
      ['one\ntwo\nthree\nfour\nfive', 'ONE\ntwo\nthree\nfour\nfive'],
      ['one\ntwo\nthree\nfour\nfive', 'one\ntwo\nthree\nfour\nFIVE'],
      ['one\ntwo\nthree\nfour\nfive', 'one\ntwo\nthree\nfour\nfive\nsix'],
      ['same', 'same\n'],
      ['\nx\ny\nz\nw\nv', '\nx\ny\nz\nw\nV'],
      ['\n\n\n\n\na', '\n\n\n\n\nb'],
      ['a\n\n\n\n\n', 'b\n\n\n\n\n'],
    ]) {
      expect(unifiedDiff(before!, after!, 'now', 'after')).toBe(whole(before!, after!));
    }
  });
});
