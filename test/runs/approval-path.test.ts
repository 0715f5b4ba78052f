/**
 * The approval path stays short: resolveToolApproval reaches the approval
 * flow in one call, and the flow's steps live in few files.
 *
 * The measure (test/support/path-files.ts, calls as the type checker
 * resolves them): the files of src/runs holding a function that
 * `RunResolver.resolveToolApproval` calls, or that the flow
 * `RunApprovals.resolve` calls — one call from either, calls within one file
 * followed without counting — other than the resolver's own file. What
 * those functions call in turn (SQL, the loop the driver starts) is not
 * counted here; the whole path's figures are in the test's output.
 */
import path from 'node:path';
import { pathFiles } from '../support/path-files';

const root = path.resolve(__dirname, '../..');
const RESOLVER = 'src/runs/run.resolver.ts';
const FLOW = 'src/runs/run-approvals.ts';
const inRuns = (files: readonly string[]) => files.filter((file) => file.startsWith('src/runs/'));

describe('the approval path', () => {
  jest.setTimeout(120_000);

  it('goes from the resolver straight to the flow and enters at most 5 files of src/runs directly', () => {
    const fromResolver = pathFiles({ root, file: RESOLVER, entry: 'RunResolver.resolveToolApproval', maxDepth: 1 });
    expect(fromResolver.functions).toContain(`${FLOW}:RunApprovals.resolve`);
    const fromFlow = pathFiles({ root, file: FLOW, entry: 'RunApprovals.resolve', maxDepth: 1 });
    const direct = inRuns([...new Set([...fromResolver.files, ...fromFlow.files])]).filter((file) => file !== RESOLVER).sort();
    // The pure rules are one of them: what the decisions make of the pending calls is decided in one place.
    expect(direct).toContain('src/runs/engine/approval-decision.ts');
    expect({ direct, count: direct.length, atMost5: direct.length <= 5 }).toMatchObject({ atMost5: true });

    const whole = pathFiles({ root, file: RESOLVER, entry: 'RunResolver.resolveToolApproval' });
    console.log(`approval path: ${direct.length} files of src/runs directly (${direct.join(', ')}); all-depth ${whole.files.length} files (${inRuns(whole.files).length} in src/runs), ${whole.hops} hops`);
  });

  it('is measured by a tool that follows method calls across files, only as deep as asked', () => {
    // RunService.start calls the preparer and the driver; the tool must see both files one call away.
    const start = pathFiles({ root, file: 'src/runs/run.service.ts', entry: 'RunService.start', maxDepth: 1 });
    expect(start.files).toEqual(expect.arrayContaining(['src/runs/run-preparer.ts', 'src/runs/run-driver.ts', 'src/runs/run.service.ts']));
    expect(start.functions).toEqual(expect.arrayContaining(['src/runs/run-driver.ts:RunDriver.drive']));
    expect(start.functions.every((name) => !name.startsWith('src/runs/engine/agent-loop.ts'))).toBe(true);
  });
});
