/**
 * Splits a fan-out server's CPU profile into the windows its CPU per delivery
 * is measured over, and shows where a watched run spends more than the
 * unwatched run paired with it.
 *
 * Record: `FANOUT_SERVICE_NODE_ARGS="--cpu-prof --cpu-prof-dir=/tmp/prof" FANOUT_CPU_MARKS=/tmp/prof/marks
 * SIZES=1 TURNS=2 NODE_ENV=production node --expose-gc dist/bench/runs-fanout.js`
 * Read: `node dist/bench/fanout-profile.js /tmp/prof/CPU.<…>.cpuprofile /tmp/prof/marks.<pid>.json [top]`
 *
 * Every sample between a `watched-open` and the next `watched-done` mark is
 * a watched run's, every one between `unwatched-open` and `unwatched-done` an
 * unwatched run's (see runs-fanout.ts). Per function (self time, and inclusive
 * time of the service's own frames), it prints the milliseconds per run in
 * each kind of window and their difference, largest difference first.
 */
import fs from 'node:fs';

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}
interface Profile {
  nodes: ProfileNode[];
  startTime: number;
  samples: number[];
  timeDeltas: number[];
}
interface Mark {
  t: number;
  label: string;
}

type Kind = 'watched' | 'unwatched';

function windows(marks: readonly Mark[]): { kind: Kind; from: number; to: number }[] {
  const found: { kind: Kind; from: number; to: number }[] = [];
  let open: { kind: Kind; from: number } | null = null;
  for (const mark of marks) {
    const [kind, edge] = mark.label.split('-') as [Kind, string];
    if (kind !== 'watched' && kind !== 'unwatched') continue;
    if (edge === 'open') open = { kind, from: mark.t };
    else if (edge === 'done' && open?.kind === kind) {
      found.push({ ...open, to: mark.t });
      open = null;
    }
  }
  return found;
}

function frameName(node: ProfileNode): string {
  const { functionName, url, lineNumber } = node.callFrame;
  return `${functionName || '(anonymous)'} ${url.replace(/.*\/(dist|node_modules)\//, '$1/')}:${lineNumber + 1}`;
}

export function splitProfile(profile: Profile, marks: readonly Mark[]): { runs: Record<Kind, number>; rows: { name: string; watched: number; unwatched: number }[] } {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map<number, number>();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node.id);
  const spans = windows(marks);
  const runs: Record<Kind, number> = { watched: 0, unwatched: 0 };
  for (const span of spans) runs[span.kind] += 1;
  const totals = new Map<string, Record<Kind, number>>();
  const add = (name: string, kind: Kind, us: number) => {
    let entry = totals.get(name);
    if (!entry) totals.set(name, (entry = { watched: 0, unwatched: 0 }));
    entry[kind] += us;
  };
  let t = profile.startTime;
  let w = 0;
  for (let i = 0; i < profile.samples.length; i += 1) {
    t += profile.timeDeltas[i] ?? 0;
    const us = profile.timeDeltas[i + 1] ?? 0;
    while (w < spans.length && spans[w]!.to < t) w += 1;
    const span = spans[w];
    if (!span || t < span.from) continue;
    const leaf = byId.get(profile.samples[i]!)!;
    add(`self  ${frameName(leaf)}`, span.kind, us);
    const seen = new Set<string>();
    for (let id: number | undefined = leaf.id; id !== undefined; id = parentOf.get(id)) {
      const node = byId.get(id)!;
      if (!node.callFrame.url.includes('/dist/src/')) continue;
      const name = `incl  ${frameName(node)}`;
      if (seen.has(name)) continue;
      seen.add(name);
      add(name, span.kind, us);
    }
  }
  const rows = [...totals].map(([name, total]) => ({
    name,
    watched: total.watched / 1000 / Math.max(1, runs.watched),
    unwatched: total.unwatched / 1000 / Math.max(1, runs.unwatched),
  }));
  rows.sort((a, b) => b.watched - b.unwatched - (a.watched - a.unwatched));
  return { runs, rows };
}

if (require.main === module) {
  const [profilePath, marksPath, top = '40'] = process.argv.slice(2);
  if (!profilePath || !marksPath) {
    console.error('usage: node dist/bench/fanout-profile.js <cpuprofile> <marks json> [top]');
    process.exit(2);
  }
  const { runs, rows } = splitProfile(JSON.parse(fs.readFileSync(profilePath, 'utf8')) as Profile, JSON.parse(fs.readFileSync(marksPath, 'utf8')) as Mark[]);
  console.log(`windows: ${runs.watched} watched, ${runs.unwatched} unwatched; ms per run: watched · unwatched (difference)`);
  for (const row of rows.slice(0, Number(top))) {
    console.log(`${row.watched.toFixed(3).padStart(8)} · ${row.unwatched.toFixed(3).padStart(8)} (${(row.watched - row.unwatched).toFixed(3).padStart(7)})  ${row.name}`);
  }
}
