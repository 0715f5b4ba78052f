/**
 * What the adapter layer costs on top of parsing the provider's bytes.
 *
 * Two cases, each timed in the same run against a bare baseline on the same
 * bytes:
 * - a non-streamed OpenAI chat completion with 200 tool calls: `adapter.chat`
 *   (fetch stubbed, so decode + schema + mapping) vs `JSON.parse` of the body;
 * - a 1 MB OpenAI SSE stream: `adapter.stream` to the `done` event vs
 *   splitting the same bytes into `data:` lines and `JSON.parse` of each.
 *
 * Targets: < 3× for the first, < 5× for the second.
 *
 * Run: `npx tsc -p tsconfig.build.json && node dist/bench/adapter-overhead.js`
 */
import { performance } from 'node:perf_hooks';

import { createChatAdapter } from '../src/providers/adapters/registry';
import type { ChatAdapter, ChatRequest } from '../src/providers/adapters/types';

export interface BenchResult {
  name: string;
  ratio: number;
  detail: string;
}

const TARGETS: Record<string, number> = {
  'non-streamed, 200 tool calls': 3,
  'streamed, 1 MB SSE': 5,
};

const REQUEST: ChatRequest = {
  messages: [{ role: 'user', content: 'Benchmark' }],
  options: { model: 'gpt-4.1' },
};

function adapterAnswering(makeResponse: () => Response): ChatAdapter {
  return createChatAdapter(
    {
      identifier: 'bench',
      adapterType: 'openai',
      endpointUrl: 'http://127.0.0.1:1/v1',
      apiKey: 'bench-key',
      organizationId: '',
      apiTimeout: 60,
      maxRetries: 0,
      options: {},
    },
    { fetch: async () => makeResponse() },
  );
}

/** An OpenAI chat completion asking for 200 tool calls with realistic arguments. */
function toolCallsBody(): Uint8Array {
  const toolCalls = Array.from({ length: 200 }, (_, index) => ({
    id: `call_${index.toString(36).padStart(8, '0')}Xq9Lm2`,
    type: 'function',
    function: {
      name: index % 2 === 0 ? 'search_snippets' : 'get_weather',
      arguments: JSON.stringify({
        query: `Köln Wetter Vorhersage Nummer ${index}`,
        tags: ['weather', 'de', `t${index}`],
        limit: 10 + (index % 7),
        filters: { language: 'de', since: '2025-01-01', includeArchived: index % 3 === 0 },
      }),
    },
  }));
  const body = {
    id: 'chatcmpl-bench',
    object: 'chat.completion',
    created: 1741569952,
    model: 'gpt-4.1-2025-04-14',
    choices: [{ index: 0, message: { role: 'assistant', content: null, refusal: null, tool_calls: toolCalls }, finish_reason: 'tool_calls' }],
    usage: {
      prompt_tokens: 1200,
      completion_tokens: 9000,
      total_tokens: 10200,
      prompt_tokens_details: { cached_tokens: 0 },
      completion_tokens_details: { reasoning_tokens: 0 },
    },
  };
  return new TextEncoder().encode(JSON.stringify(body));
}

/** About 1 MB of OpenAI stream: content deltas of a few words, a finish chunk, a usage chunk, [DONE]. */
function streamBody(): Uint8Array {
  const words = ['Grüße', 'aus', 'Köln', '—', 'heute', 'ist', 'es', 'sonnig', 'und', 'warm', '👋', 'Morgen', 'regnet', 'es.'];
  const frames: string[] = [];
  let size = 0;
  for (let index = 0; size < 1024 * 1024; index++) {
    const text = `${words[index % words.length]} ${words[(index * 7) % words.length]} `;
    const chunk = {
      id: 'chatcmpl-bench',
      object: 'chat.completion.chunk',
      created: 1741569952,
      model: 'gpt-4.1-2025-04-14',
      system_fingerprint: 'fp_3f58d112f7',
      choices: [{ index: 0, delta: { content: text }, logprobs: null, finish_reason: null }],
      usage: null,
    };
    const frame = `data: ${JSON.stringify(chunk)}\n\n`;
    frames.push(frame);
    size += Buffer.byteLength(frame);
  }
  frames.push(
    `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', choices: [{ index: 0, delta: {}, finish_reason: 'stop' }] })}\n\n`,
    `data: ${JSON.stringify({ id: 'chatcmpl-bench', object: 'chat.completion.chunk', choices: [], usage: { prompt_tokens: 10, completion_tokens: frames.length } })}\n\n`,
    'data: [DONE]\n\n',
  );
  return new TextEncoder().encode(frames.join(''));
}

/** A body delivered in 16 KiB reads, as a socket would. */
function streamingResponse(bytes: Uint8Array): Response {
  let at = 0;
  const body = new ReadableStream<Uint8Array>({
    pull(controller) {
      if (at >= bytes.length) {
        controller.close();
        return;
      }
      controller.enqueue(bytes.subarray(at, at + 16 * 1024));
      at += 16 * 1024;
    },
  });
  return new Response(body, { status: 200, headers: { 'content-type': 'text/event-stream' } });
}

function bareParseWhole(bytes: Uint8Array): unknown {
  return JSON.parse(new TextDecoder().decode(bytes));
}

function bareParseStream(bytes: Uint8Array): number {
  const text = new TextDecoder().decode(bytes);
  let parsed = 0;
  for (const line of text.split('\n')) {
    if (!line.startsWith('data: ')) continue;
    const data = line.slice(6);
    if (data === '[DONE]') break;
    JSON.parse(data);
    parsed++;
  }
  return parsed;
}

/**
 * Times both contenders in alternating batches and takes the median of the
 * per-batch ratios: a slow moment of the machine (GC, frequency scaling, a
 * neighbour process) then moves both sides of one ratio instead of one side
 * of the result.
 */
async function compare(
  adapterRun: () => Promise<void>,
  bareRun: () => void,
  batches: number,
  perBatch: number,
): Promise<{ adapterMs: number; bareMs: number; ratio: number }> {
  // Steady state, not start-up: run until the JIT has settled (a second at least) before measuring.
  const warmUntil = performance.now() + 1000;
  while (performance.now() < warmUntil) {
    await adapterRun();
    bareRun();
  }
  const adapterTimes: number[] = [];
  const bareTimes: number[] = [];
  const ratios: number[] = [];
  for (let batch = 0; batch < batches; batch++) {
    let started = performance.now();
    for (let run = 0; run < perBatch; run++) await adapterRun();
    const adapterMs = (performance.now() - started) / perBatch;
    started = performance.now();
    for (let run = 0; run < perBatch; run++) bareRun();
    const bareMs = (performance.now() - started) / perBatch;
    adapterTimes.push(adapterMs);
    bareTimes.push(bareMs);
    ratios.push(adapterMs / bareMs);
  }
  return { adapterMs: median(adapterTimes), bareMs: median(bareTimes), ratio: median(ratios) };
}

function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = Math.floor(sorted.length / 2);
  return sorted.length % 2 === 1 ? (sorted[middle] ?? 0) : ((sorted[middle - 1] ?? 0) + (sorted[middle] ?? 0)) / 2;
}

function describe(name: string, timing: { adapterMs: number; bareMs: number; ratio: number }, size: number, extra: string): BenchResult {
  const { adapterMs, bareMs, ratio } = timing;
  const target = TARGETS[name] ?? Number.POSITIVE_INFINITY;
  return {
    name,
    ratio,
    detail:
      `${(size / 1024).toFixed(0)} KiB, ${extra}: adapter ${adapterMs.toFixed(3)} ms vs bare ${bareMs.toFixed(3)} ms (medians) ` +
      `(target < ${target}×: ${ratio < target ? 'met' : 'MISSED'})`,
  };
}

export async function runAdapterBench(): Promise<BenchResult[]> {
  const results: BenchResult[] = [];

  const whole = toolCallsBody();
  const wholeAdapter = adapterAnswering(() => new Response(whole, { status: 200, headers: { 'content-type': 'application/json' } }));
  const check = await wholeAdapter.chat(REQUEST);
  if (check.toolCalls.length !== 200) throw new Error(`expected 200 tool calls, got ${check.toolCalls.length}`);
  const plain = await compare(
    async () => {
      await wholeAdapter.chat(REQUEST);
    },
    () => {
      bareParseWhole(whole);
    },
    25,
    40,
  );
  results.push(describe('non-streamed, 200 tool calls', plain, whole.length, '200 tool calls'));

  const streamed = streamBody();
  const streamAdapter = adapterAnswering(() => streamingResponse(streamed));
  const frames = bareParseStream(streamed);
  const drain = async (): Promise<void> => {
    let done = false;
    for await (const event of streamAdapter.stream(REQUEST)) if (event.type === 'done') done = true;
    if (!done) throw new Error('stream ended without done');
  };
  const stream = await compare(drain, () => void bareParseStream(streamed), 15, 3);
  results.push(describe('streamed, 1 MB SSE', stream, streamed.length, `${frames} frames`));

  return results;
}

if (require.main === module) {
  runAdapterBench()
    .then((results) => {
      for (const result of results) console.log(`${result.name}: ${result.ratio.toFixed(2)}× — ${result.detail}`);
    })
    .catch((error: unknown) => {
      console.error(error);
      process.exitCode = 1;
    });
}
