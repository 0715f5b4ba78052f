import { splitProfile } from '../../bench/fanout-profile';

const frame = (functionName: string, url: string) => ({ functionName, url, lineNumber: 0 });

describe('fanout-profile', () => {
  it('charges each sample to the window it falls in, per run, and orders by what watched runs spend more', () => {
    const profile = {
      nodes: [
        { id: 1, callFrame: frame('(root)', ''), children: [2, 4] },
        { id: 2, callFrame: frame('deliver', '/x/dist/src/graphql/trace-fanout.js'), children: [3] },
        { id: 3, callFrame: frame('writeBuffer', ''), children: [] },
        { id: 4, callFrame: frame('appendStep', '/x/dist/src/runs/run-store.js'), children: [] },
      ],
      startTime: 0,
      // Samples at t = 10, 20, … 80 µs, each lasting the next delta (10 µs).
      samples: [3, 4, 3, 4, 4, 4, 3, 4],
      timeDeltas: [10, 10, 10, 10, 10, 10, 10, 10],
    };
    const marks = [
      { t: 5, label: 'watched-open' },
      { t: 45, label: 'watched-done' },
      { t: 45, label: 'unwatched-open' },
      { t: 65, label: 'unwatched-done' },
      { t: 70, label: 'cpu' },
    ];
    const { runs, rows } = splitProfile(profile, marks);
    expect(runs).toEqual({ watched: 1, unwatched: 1 });
    const byName = new Map(rows.map((row) => [row.name.split(' ').filter(Boolean).slice(0, 2).join(' '), row]));
    // Watched window (t 10–40): writeBuffer twice, appendStep twice; unwatched (t 50–60): appendStep twice. 10 µs each.
    expect(byName.get('self writeBuffer')).toMatchObject({ watched: 0.02, unwatched: 0 });
    expect(byName.get('incl deliver')).toMatchObject({ watched: 0.02, unwatched: 0 });
    expect(byName.get('self appendStep')).toMatchObject({ watched: 0.02, unwatched: 0.02 });
    // Samples outside every window (t 70, 80) are nobody's.
    expect(rows.reduce((sum, row) => sum + (row.name.startsWith('self') ? row.watched + row.unwatched : 0), 0)).toBeCloseTo(0.06);
    expect(rows[0]!.name).toMatch(/writeBuffer|deliver/);
  });
});
