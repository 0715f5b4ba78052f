import { spellNaN } from './metrics';

describe('spellNaN', () => {
  test('a sample value Nan is written NaN; comments, labels and other values stay as they are', () => {
    const text = [
      '# HELP lag_mean_seconds The mean. Nan',
      '# TYPE lag_mean_seconds gauge',
      'lag_mean_seconds Nan',
      'lag_stddev_seconds{kind="Nan"} Nan',
      'lag_max_seconds{kind="a Nan"} 0',
      'upper_bound{le="+Inf"} 3',
      'ratio -Inf',
      'Nan 1',
      '',
    ].join('\n');
    expect(spellNaN(text).split('\n')).toEqual([
      '# HELP lag_mean_seconds The mean. Nan',
      '# TYPE lag_mean_seconds gauge',
      'lag_mean_seconds NaN',
      'lag_stddev_seconds{kind="Nan"} NaN',
      'lag_max_seconds{kind="a Nan"} 0',
      'upper_bound{le="+Inf"} 3',
      'ratio -Inf',
      'Nan 1',
      '',
    ]);
  });
});
