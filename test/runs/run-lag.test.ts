/**
 * A watcher that falls behind the live trace by more than the queue size is
 * not silently skipped ahead: it gets SUBSCRIBER_LAGGED naming the
 * afterSequence to resubscribe with. graphql-ws drains its iterator as fast
 * as it can send, so the lag is provoked at the RunService level.
 */
import { SubscriberLaggedError } from '../../src/shared/errors';
import type { StoredStep } from '../../src/runs/trace-bus';
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit } from './run-kit';

describe.each(testDialects)('watchers that lag (%s)', (dialect) => {
  let ts: TestServer;
  const kit = new RunKit(() => ts);

  beforeAll(async () => {
    ts = await startTestServer(dialect, { server: { runs: { watcherQueueSize: 2 } } });
  });
  afterAll(async () => {
    await ts?.stop();
    await kit.closeProviders();
  });

  /** A two-round run held before its first answer: CONTEXT and REQUEST (1, 2) are stored, six more steps follow. */
  test('a trace iterator that is not read while steps arrive ends with SUBSCRIBER_LAGGED naming afterSequence', async () => {
    const run = await kit.startHeldToolRun();
    const trace = await ts.server.services.runReader.openTrace(run.id, 0);
    const first = await trace.next(); // replay has begun: the live listener is attached
    expect((first.value as StoredStep).sequence).toBe(1);

    run.release();
    const finished = await kit.waitForRun(run.id);
    expect(finished.steps).toHaveLength(8);

    const second = await trace.next();
    expect((second.value as StoredStep).sequence).toBe(2);
    const lagged = await trace.next();
    expect(lagged.done).toBe(false);
    expect(lagged.value).toBeInstanceOf(SubscriberLaggedError);
    const error = lagged.value as SubscriberLaggedError;
    expect(error.code).toBe('SUBSCRIBER_LAGGED');
    expect(error.field).toBe('afterSequence');
    expect(error.message).toContain('afterSequence: 2');
    expect((await trace.next()).done).toBe(true);

    // Resubscribing where the error says continues without a gap.
    const rest: number[] = [];
    for await (const step of await ts.server.services.runReader.openTrace(run.id, 2)) {
      expect(step).not.toBeInstanceOf(SubscriberLaggedError);
      rest.push((step as StoredStep).sequence);
    }
    expect(rest).toEqual([3, 4, 5, 6, 7, 8]);
  });

  test('a watcher that keeps reading is not lagged, even with a queue of 2', async () => {
    const run = await kit.startHeldToolRun();
    const seen: number[] = [];
    const reading = (async () => {
      for await (const step of await ts.server.services.runReader.openTrace(run.id, 0)) {
        if (step instanceof SubscriberLaggedError) throw step;
        seen.push(step.sequence);
        if (seen.length === 2) run.release();
      }
    })();
    await reading;
    expect(seen).toEqual([1, 2, 3, 4, 5, 6, 7, 8]);
  });
});
