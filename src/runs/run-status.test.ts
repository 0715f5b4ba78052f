import type { RunState } from './engine/run-machine';
import { KNOWN_READ_STATUSES, publicRunStatus, readRunStatus, readStatusesShownAs } from './run-status';

describe('the run list finds a run under the status it shows', () => {
  const stored = ['queued', 'RUNNING', ' running ', 'waiting_for_approval', 'waiting_for_input', 'completed', 'failed', 'cancelled', 'CANCELLED', '', 'paused', 'done'];
  const statuses: RunState[] = ['QUEUED', 'RUNNING', 'WAITING_FOR_APPROVAL', 'COMPLETED', 'FAILED', 'CANCELLED'];

  it.each(statuses)('%s', (status) => {
    const { values, unknownToo } = readStatusesShownAs([status]);
    for (const value of stored) {
      const read = readRunStatus(value);
      const found = values.includes(read) || (unknownToo && !KNOWN_READ_STATUSES.includes(read));
      expect([value, found]).toEqual([value, publicRunStatus(read) === status]);
    }
  });

  it('waiting for input shows and filters as RUNNING; unknown values as FAILED', () => {
    expect(readStatusesShownAs(['RUNNING'])).toEqual({ values: ['RUNNING', 'WAITING_FOR_INPUT'], unknownToo: false });
    expect(readStatusesShownAs(['FAILED'])).toEqual({ values: ['FAILED'], unknownToo: true });
  });
});
