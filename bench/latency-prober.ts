/**
 * A bystander client in its own process: sends `{ __typename }` over HTTP one
 * request after another until told to stop and prints, as one JSON line, when
 * each request was sent (ms since the prober started) and how long its answer
 * took. Used by the burst benchmark to see what other clients see while one
 * client floods the server.
 *
 * Usage: node latency-prober.js <graphql url>; it stops when its standard input closes.
 */
import http from 'node:http';
import { performance } from 'node:perf_hooks';

async function main(): Promise<void> {
  const url = new URL(process.argv[2] ?? '');
  let stopped = false;
  process.stdin.resume();
  process.stdin.once('end', () => (stopped = true));
  process.stdin.once('close', () => (stopped = true));
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const body = JSON.stringify({ query: '{ __typename }' });
  const samples: [number, number][] = [];
  const start = performance.now();
  const once = () =>
    new Promise<void>((resolve, reject) => {
      const request = http.request(
        url,
        { method: 'POST', agent, headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(body) } },
        (response) => {
          response.resume();
          response.once('end', () => resolve());
        },
      );
      request.once('error', reject);
      request.end(body);
    });
  process.stdout.write('PROBING\n');
  while (!stopped) {
    const sentAt = performance.now();
    await once();
    samples.push([Math.round((sentAt - start) * 100) / 100, Math.round((performance.now() - sentAt) * 100) / 100]);
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  agent.destroy();
  process.stdout.write(`SAMPLES ${JSON.stringify(samples)}\n`);
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
