/**
 * What a trace watcher keeps while it waits for the next live step: with
 * 1,000 watchers of a run, whatever each keeps for the run's length is
 * promoted to the old generation and collected by full (mark-compact)
 * collections during the fan-out. A watcher keeps neither the run's row (not
 * the one it reads again when it looks at the table for what the bus may have
 * missed either) nor the stored steps it has already sent.
 */
import v8 from 'node:v8';
import vm from 'node:vm';
import { RunStore } from '../../src/runs/run-store';
import type { StoredStep } from '../../src/runs/trace-bus';
import { testDialects } from '../support/databases';
import { startTestServer, type TestServer } from '../support/server';
import { RunKit, sleep } from './run-kit';

v8.setFlagsFromString('--expose-gc');
const collectGarbage = vm.runInNewContext('gc') as () => void;

/** Collects until every reference is gone or a few rounds have passed; how many are still alive. */
async function alive(references: WeakRef<object>[]): Promise<number> {
  for (let round = 0; round < 5; round += 1) {
    // A WeakRef keeps its target until the current job ends: collect in a later turn.
    await sleep(10);
    collectGarbage();
    if (references.every((reference) => reference.deref() === undefined)) return 0;
  }
  return references.filter((reference) => reference.deref() !== undefined).length;
}

describe.each(testDialects)('a waiting trace watcher (%s)', (dialect) => {
  let ts: TestServer;
  const kit = new RunKit(() => ts);

  beforeAll(async () => {
    // Watchers that hear nothing look at the table again after 400 ms, on a timer of 200 ms (see the second test).
    ts = await startTestServer(dialect, { server: { runs: { watcherRecheckMs: 400 } } });
  });
  afterAll(async () => {
    await ts?.stop();
    await kit.closeProviders();
  });

  test('keeps none of the replayed steps once they are sent', async () => {
    const run = await kit.startHeldToolRun();
    const trace = await ts.server.services.runReader.openTrace(run.id, 0);
    const sent: WeakRef<object>[] = [];
    const sequences: number[] = [];
    // In a function of its own, so that no variable of the test holds a step.
    const readOne = async () => {
      const { value } = await trace.next();
      sequences.push((value as StoredStep).sequence);
      sent.push(new WeakRef(value as object));
    };
    await readOne();
    await readOne();
    expect(sequences).toEqual([1, 2]);
    // The watcher now waits for the run's next live step.
    const next = trace.next();
    expect(await alive(sent)).toBe(0);

    run.release();
    expect(((await next).value as StoredStep).sequence).toBe(3);
    await trace.return?.();
  });

  test('keeps none of the rows it read again while its run was quiet', async () => {
    const run = await kit.startHeldToolRun();
    const rows: WeakRef<object>[] = [];
    let looked: (() => void) | null = null;
    const findRun = RunStore.prototype.findRun;
    const spy = jest.spyOn(RunStore.prototype, 'findRun').mockImplementation(async function (this: RunStore, uuid: string) {
      const row = await findRun.call(this, uuid);
      if (row) rows.push(new WeakRef(row));
      // Once whoever asked has gone on with the answer (its microtasks run before an immediate).
      setImmediate(() => looked?.());
      return row;
    });
    try {
      const trace = await ts.server.services.runReader.openTrace(run.id, 2);
      const next = trace.next();
      // (After the immediate of openTrace's own read.)
      await sleep(20);
      const read = rows.length;
      // The run is held: its watcher hears nothing and reads the table and the row again. Right after that
      // look it waits again, and the next is 400 ms away: nothing of the watcher's is under way.
      await new Promise<void>((resolve) => (looked = resolve));
      looked = null;
      expect(rows.length).toBeGreaterThan(read);
      // The spy's own record of what it returned would keep them.
      spy.mockClear();
      expect(await alive(rows)).toBe(0);

      run.release();
      expect(((await next).value as StoredStep).sequence).toBe(3);
      await trace.return?.();
    } finally {
      spy.mockRestore();
    }
  });
});
