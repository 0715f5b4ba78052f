import { early, SessionGuesses } from './turn-prefetch';

describe('SessionGuesses', () => {
  test('remembers the last turn\'s session per uuid, forgets the least recent past its bound and on forget', () => {
    const guesses = new SessionGuesses(2);
    guesses.remember('a', { uid: 1, configurationIdentifier: 'x' });
    guesses.remember('b', { uid: 2, configurationIdentifier: 'y' });
    guesses.remember('a', { uid: 1, configurationIdentifier: 'z' });
    guesses.remember('c', { uid: 3, configurationIdentifier: '' });
    expect(guesses.guess('a')).toEqual({ uid: 1, configurationIdentifier: 'z' });
    expect(guesses.guess('b')).toBeNull();
    expect(guesses.guess('c')).toEqual({ uid: 3, configurationIdentifier: '' });
    guesses.forget('c');
    expect(guesses.guess('c')).toBeNull();
  });

  test('a read started early settles: a rejection thrown away is never unhandled', async () => {
    const unhandled: unknown[] = [];
    const listener = (reason: unknown) => unhandled.push(reason);
    process.on('unhandledRejection', listener);
    try {
      const settled = early(Promise.reject(new Error('discarded')));
      await new Promise((resolve) => setImmediate(resolve));
      expect(unhandled).toEqual([]);
      expect(await settled).toMatchObject({ status: 'rejected' });
      expect(await early(Promise.resolve(7))).toEqual({ status: 'fulfilled', value: 7 });
    } finally {
      process.off('unhandledRejection', listener);
    }
  });
});
