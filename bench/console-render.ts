/**
 * The console's figures, measured in headless Chromium against the real
 * server (a scripted model stands in for the provider, so the run's shape is
 * exact and no time goes to a model):
 *
 * - gzip size of what the run pages load (entry, preloaded chunks, CSS) and
 *   of what the playground loads;
 * - a finished run of about 2,000 steps: time from navigation start until
 *   every card is in the page;
 * - a live run: for each step, the time from its WebSocket message arriving
 *   in the page to its card being in the DOM (p50, p99, max).
 *
 * The server runs in this process, so run it as the service is deployed
 * (the Docker image sets NODE_ENV=production; graphql-js checks more without it):
 *
 *     npm run build && NODE_ENV=production node dist/bench/console-render.js
 */
import 'reflect-metadata';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import zlib from 'node:zlib';
import pino from 'pino';
import { loadConfig } from '../src/config';
import type { ChatRequest } from '../src/providers/adapters/types';
import { createScriptedAdapter, type ScriptedAnswer } from '../test/support/scripted-adapter';
import { createServer } from '../src/server';
import { buildConsole } from '../scripts/build-console';
import { launchBrowser } from '../scripts/chromium';
import { round, writeResult } from './bench-support';

const TOKEN = 'console-bench-admin-token-0123456789';
const root = path.resolve(__dirname, '..', '..');

/** The prompt carries the run's shape: `rounds=19 calls=105 delay=0 first=0`. */
function shapeOf(request: ChatRequest): { rounds: number; calls: number; delay: number; first: number } {
  const prompt = [...request.messages].reverse().find((message) => message.role === 'user')?.content ?? '';
  const read = (key: string, fallback: number) => Number(new RegExp(`${key}=(\\d+)`).exec(prompt)?.[1] ?? fallback);
  return { rounds: read('rounds', 1), calls: read('calls', 1), delay: read('delay', 0), first: read('first', 0) };
}

function scriptedAnswer(request: ChatRequest, callNumber: number): ScriptedAnswer {
  const shape = shapeOf(request);
  const delayMs = callNumber === 1 ? shape.first : shape.delay;
  if (callNumber > shape.rounds) return { content: 'Done.', usage: [50, 5], delayMs };
  return {
    toolCalls: Array.from({ length: shape.calls }, (_, index) => ({ name: 'calculator', arguments: { expression: `${callNumber} + ${index}` } })),
    usage: [50, 20],
    delayMs,
  };
}

/** The page globals the functions below touch (the project compiles without the DOM library). */
interface InPage {
  document: { querySelectorAll(selector: string): ArrayLike<{ getAttribute(name: string): string | null }> };
  performance: { now(): number };
  __arrived: Map<number, number>;
  __shown: Map<number, number>;
}

/**
 * Runs in the page before its scripts (plain JavaScript: the project compiles
 * without the DOM library): notes when each runTrace step's WebSocket message
 * arrives and when its card first appears in the DOM.
 */
const TIMING_SCRIPT = `
  window.__arrived = new Map();
  window.__shown = new Map();
  const NativeWebSocket = window.WebSocket;
  window.WebSocket = class extends NativeWebSocket {
    constructor(url, protocols) {
      super(url, protocols);
      this.addEventListener('message', (event) => {
        const at = performance.now();
        const match = /"runTrace":\\{"sequence":(\\d+)/.exec(String(event.data));
        if (match && !window.__arrived.has(Number(match[1]))) window.__arrived.set(Number(match[1]), at);
      });
    }
  };
  new MutationObserver(() => {
    const at = performance.now();
    for (const card of document.querySelectorAll('[data-step-sequence]')) {
      const sequence = Number(card.dataset.stepSequence);
      if (!window.__shown.has(sequence)) window.__shown.set(sequence, at);
    }
  }).observe(document, { childList: true, subtree: true });
`;

function gzipSize(file: string): number {
  return zlib.gzipSync(fs.readFileSync(file), { level: 9 }).length;
}

/** The files a page loads up front: its module script, the chunks it preloads, its style sheets. */
function pageAssets(html: string): string[] {
  const text = fs.readFileSync(path.join(root, 'dist', 'console', html), 'utf8');
  return [...text.matchAll(/(?:src|href)="\/(assets\/[^"]+)"/g)].map((match) => path.join(root, 'dist', 'console', match[1]!));
}

function percentile(values: number[], p: number): number {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.ceil((p / 100) * sorted.length) - 1)] ?? NaN;
}

async function main(): Promise<void> {
  const loadBefore = os.loadavg().map((value) => round(value, 2));
  buildConsole(false);
  const sizes = Object.fromEntries(
    ['index.html', 'playground.html'].map((html) => {
      const files = pageAssets(html);
      const js = files.filter((file) => file.endsWith('.js')).reduce((sum, file) => sum + gzipSize(file), 0);
      const css = files.filter((file) => file.endsWith('.css')).reduce((sum, file) => sum + gzipSize(file), 0);
      return [html, { jsGzipKb: round(js / 1024, 1), cssGzipKb: round(css / 1024, 1), files: files.map((file) => path.basename(file)) }];
    }),
  );
  const workers = fs.readdirSync(path.join(root, 'dist', 'console', 'assets')).filter((name) => /worker.*\.js$/.test(name));
  const workerGzipKb = round(workers.reduce((sum, name) => sum + gzipSize(path.join(root, 'dist', 'console', 'assets', name)), 0) / 1024, 1);

  const directory = fs.mkdtempSync(path.join(os.tmpdir(), 'promptwire-console-bench-'));
  const server = await createServer(
    loadConfig({ DATABASE_URL: `sqlite:${path.join(directory, 'app.sqlite')}`, PORT: '0', ADMIN_TOKEN: TOKEN, LOG_LEVEL: 'silent', NODE_ENV: 'production' }),
    { logger: pino({ level: 'silent' }), runs: { adapterFactory: () => createScriptedAdapter(Array.from({ length: 25 }, () => scriptedAnswer)) } },
  );
  const base = server.url.replace(/\/graphql$/, '');
  const gql = async <T>(query: string, variables: Record<string, unknown> = {}): Promise<T> => {
    const response = await fetch(server.url, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${TOKEN}` }, body: JSON.stringify({ query, variables }) });
    const body = (await response.json()) as { data: T; errors?: unknown[] };
    if (body.errors) throw new Error(JSON.stringify(body.errors));
    return body.data;
  };
  const startRun = async (prompt: string, tools = ['calculator']) =>
    (await gql<{ startRun: { id: string } }>('mutation($input: StartRunInput!) { startRun(input: $input) { id } }', { input: { configuration: 'demo-assistant', prompt, tools, maxRounds: 20 } })).startRun.id;
  const waitFinished = async (id: string): Promise<number> => {
    for (;;) {
      const { run } = await gql<{ run: { status: string; steps: { sequence: number }[] } }>('query($id: ID!) { run(id: $id) { status steps { sequence } } }', { id });
      if (['COMPLETED', 'FAILED', 'CANCELLED'].includes(run.status)) return run.steps.length;
      await new Promise((resolve) => setTimeout(resolve, 200));
    }
  };

  const signIn = `localStorage.setItem('promptwire.token', ${JSON.stringify(TOKEN)});`;
  const browser = await launchBrowser();
  try {
    const warm = await browser.context.newPage();
    await warm.addInitScript({ content: signIn });
    await warm.goto(`${base}/runs`);
    await warm.close();

    // A finished run of about 2,000 steps, opened fresh three times; the median is reported.
    const bigRun = await startRun('rounds=19 calls=105 delay=0 first=0');
    const bigSteps = await waitFinished(bigRun);
    const renders: number[] = [];
    const replays: { requests: number; firstStartMs: number; lastEndMs: number; responseKb: number }[] = [];
    for (let turn = 0; turn < 3; turn += 1) {
      const page = await browser.context.newPage();
      await page.addInitScript({ content: signIn });
      await page.goto(`${base}/runs/${bigRun}`);
      const handle = await page.waitForFunction(
        (count) => {
          const win = globalThis as unknown as InPage;
          const cards = win.document.querySelectorAll('[data-step-sequence]');
          return cards.length === count && cards[count - 1]?.getAttribute('data-step-kind') === 'END' ? win.performance.now() : false;
        },
        bigSteps,
        { polling: 'raf', timeout: 60_000 },
      );
      renders.push(round((await handle.jsonValue()) as number, 0));
      // Where the time went: the HTTP requests of the replay (their count, and when the last one ended).
      replays.push(
        await page.evaluate(() => {
          const win = globalThis as unknown as { performance: { getEntriesByType(type: string): { name: string; responseEnd: number; fetchStart: number; decodedBodySize: number }[] } };
          const requests = win.performance.getEntriesByType('resource').filter((entry) => entry.name.endsWith('/graphql'));
          return {
            requests: requests.length,
            firstStartMs: Math.round(Math.min(...requests.map((entry) => entry.fetchStart))),
            lastEndMs: Math.round(Math.max(...requests.map((entry) => entry.responseEnd))),
            // The JSON the page received over HTTP (the replay's pages, the run, the messages an ASSEMBLED card reads).
            responseKb: Math.round(requests.reduce((sum, entry) => sum + entry.decodedBodySize, 0) / 1024),
          };
        }),
      );
      await page.close();
    }

    // A live run: the page is open before the first step; each step's card is timed against its message.
    const live: number[] = [];
    const livePage = await browser.context.newPage();
    await livePage.addInitScript({ content: signIn + TIMING_SCRIPT });
    const liveRun = await startRun('rounds=19 calls=8 delay=25 first=3000');
    await livePage.goto(`${base}/runs/${liveRun}`);
    const liveSteps = await waitFinished(liveRun);
    await livePage.waitForSelector('[data-step-kind="END"]', { state: 'attached' });
    const pairs = await livePage.evaluate(() => {
      const win = globalThis as unknown as InPage;
      return [...win.__arrived.entries()].map(([sequence, arrived]) => [sequence, arrived, win.__shown.get(sequence) ?? Number.NaN]);
    });
    for (const [, arrived, shown] of pairs) live.push(shown! - arrived!);

    const result = {
      measuredAt: new Date().toISOString(),
      nodeEnv: process.env.NODE_ENV ?? '',
      loadAverage: { before: loadBefore, after: os.loadavg().map((value) => round(value, 2)) },
      sizes,
      workerGzipKb,
      finishedRun: { steps: bigSteps, renderMs: renders, medianMs: percentile(renders, 50), graphqlRequests: replays },
      liveRun: { steps: liveSteps, measured: live.length, p50Ms: round(percentile(live, 50), 1), p99Ms: round(percentile(live, 99), 1), maxMs: round(Math.max(...live), 1) },
    };
    console.log(JSON.stringify(result, null, 2));
    writeResult('console-render', result);
  } finally {
    await browser.close();
    await server.stop();
    fs.rmSync(directory, { recursive: true, force: true });
  }
}

main().catch((error: unknown) => {
  console.error(error);
  process.exit(1);
});
