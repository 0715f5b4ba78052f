import type { ChatMessage, ToolDefinition } from '../../providers/adapters/types';
import {
  CALIBRATION_SEED,
  calibrateFromUsage,
  calibratedEstimate,
  calibrationAfterFit,
  contextBudget,
  estimateTokens,
  firstSendCalibration,
  fitContext,
  partitionTranscript,
  toolCallArgumentBytes,
  toolMessagesArePaired,
  toolSchemaBytes,
  toolSchemaJson,
  type ContextBudget,
  type ContextCalibration,
} from './context-window';

const system = (content: string): ChatMessage => ({ role: 'system', content });
const user = (content: string): ChatMessage => ({ role: 'user', content });
const assistantCalling = (...ids: string[]): ChatMessage => ({
  role: 'assistant',
  content: null,
  tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'echo', arguments: '{}' } })),
});
const toolResult = (id: string, content: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content });
const callWithArguments = (args: string): ChatMessage => ({
  role: 'assistant',
  content: null,
  tool_calls: [{ id: 'c1', type: 'function', function: { name: 'calc', arguments: args } }],
});

/** A budget of `tokens` (the other figures as a 100000 window with a 1000 reserve would give). */
const budgetOf = (tokens: number): ContextBudget => ({ window: 100000, reserve: 1000, safety: 3000, budget: tokens });

/** The tool of the wire-shape case: 141 bytes as a bare definition, 172 in the wire shape. */
const echoTool: ToolDefinition = {
  name: 'echo',
  description: 'Echoes.',
  parameters: { type: 'object', properties: { text: { type: 'string' } }, additionalProperties: false },
};

describe('contextBudget', () => {
  it('gives the unknown model 8192 − 1000 − 246 = 6946', () => {
    expect(contextBudget({ contextLength: 0 })).toEqual({ window: 8192, reserve: 1000, safety: 246, budget: 6946 });
    expect(contextBudget({ contextLength: 0, runMaxTokens: 0, modelMaxOutputTokens: 0 }).budget).toBe(6946);
  });

  it("reserves the run's own max_tokens first, then the model's max output, then max(1000, 2 % of the window)", () => {
    expect(contextBudget({ contextLength: 100000, runMaxTokens: 500, modelMaxOutputTokens: 4000 })).toEqual({
      window: 100000,
      reserve: 500,
      safety: 3000,
      budget: 96500,
    });
    expect(contextBudget({ contextLength: 100000, runMaxTokens: 0, modelMaxOutputTokens: 4000 }).reserve).toBe(4000);
    expect(contextBudget({ contextLength: 100000 }).reserve).toBe(2000);
    expect(contextBudget({ contextLength: 10000 }).reserve).toBe(1000);
  });

  it("reserves a 128000 model's 16384 output tokens: 107776, not the 123160 a configuration's max_tokens of 1000 would leave", () => {
    expect(contextBudget({ contextLength: 128000, modelMaxOutputTokens: 16384 })).toEqual({
      window: 128000,
      reserve: 16384,
      safety: 3840,
      budget: 107776,
    });
  });

  it('rounds the safety margin up', () => {
    expect(contextBudget({ contextLength: 1001, runMaxTokens: 1 }).safety).toBe(31);
  });

  it('may give a budget of zero or less (the fit then sends as is)', () => {
    expect(contextBudget({ contextLength: 1000 }).budget).toBe(1000 - 1000 - 30);
  });
});

describe('estimateTokens', () => {
  it('counts a single user message "Go" as 8 + 1 prose + 1 for the empty tool list `[]`: 10, and 12 on a first send', () => {
    expect(estimateTokens([user('Go')])).toBe(10);
    expect(estimateTokens([user('Go')], [])).toBe(10);
    expect(calibratedEstimate(estimateTokens([user('Go')]), CALIBRATION_SEED)).toBe(12);
  });

  it('counts each offered tool in its wire shape: "Go" with one tool is 78, and 90 on a first send', () => {
    expect(Buffer.byteLength(JSON.stringify([echoTool]))).toBe(141);
    expect(toolSchemaJson([echoTool])).toBe(
      '[{"type":"function","function":{"name":"echo","description":"Echoes.","parameters":{"type":"object","properties":{"text":{"type":"string"}},"additionalProperties":false}}}]',
    );
    // 172 dense bytes → 69; 8 + 1 + 69 = 78; ceil(78 × 1.15) = 90.
    expect(estimateTokens([user('Go')], [echoTool])).toBe(78);
    expect(calibratedEstimate(78, CALIBRATION_SEED)).toBe(90);
  });

  it('writes the tool list as PHP does with unescaped slashes and unicode', () => {
    const tool: ToolDefinition = { name: 'fetch', description: 'Reads a/b — “quoted”\u2028', parameters: { type: 'object', properties: {}, maximum: 1.5 } };
    expect(toolSchemaJson([tool])).toBe(
      '[{"type":"function","function":{"name":"fetch","description":"Reads a/b — “quoted”\\u2028","parameters":{"type":"object","properties":[],"maximum":1.5}}}]',
    );
  });

  it('measures the tool list entry by entry to the byte of toolSchemaJson, whatever the tools hold', () => {
    const lists: ToolDefinition[][] = [
      [],
      [echoTool],
      [echoTool, { name: 'fetch', description: 'Reads a/b — “quoted”\u2028', parameters: { type: 'object', properties: {}, maximum: 1.5 } }],
      [echoTool, { name: 'b', description: '', parameters: { type: 'object', enum: ['x,y', '[', ']'] } }, { name: 'c', description: 'ü', parameters: {} }],
    ];
    for (const tools of lists) {
      expect(toolSchemaBytes(tools)).toBe(Buffer.byteLength(toolSchemaJson(tools)));
      // The second time from the memo: the same figure.
      expect(toolSchemaBytes(tools)).toBe(Buffer.byteLength(toolSchemaJson(tools)));
    }
    // An unpaired surrogate fails the whole list, as PHP's json_encode does: nothing is counted.
    const broken: ToolDefinition = { name: 'x', description: '\ud800', parameters: {} };
    expect(toolSchemaJson([echoTool, broken])).toBe('');
    expect(toolSchemaBytes([echoTool, broken])).toBe(0);
    expect(toolSchemaBytes([echoTool])).toBe(Buffer.byteLength(toolSchemaJson([echoTool])));
  });

  it('gives the same estimate for a transcript measured again (remembered argument bytes)', () => {
    const transcript = [user('Go'), callWithArguments('{ "a" : 1, "u": "a/é" }'), toolResult('c1', 'ok'), callWithArguments('not json')];
    const first = estimateTokens(transcript, [echoTool]);
    expect(estimateTokens(transcript, [echoTool])).toBe(first);
    // A call with other arguments is measured on its own.
    expect(estimateTokens([user('Go'), callWithArguments('{"a":12345678901234567890}'), toolResult('c1', 'ok'), callWithArguments('not json')], [echoTool])).not.toBe(first);
  });

  it('charges 8 per message plus prose bytes ÷ 3.5, rounded up', () => {
    expect(estimateTokens([system('abcdefg')])).toBe(8 + 2 + 1);
    expect(estimateTokens([user('abcdefgh')])).toBe(8 + 3 + 1);
    expect(estimateTokens([])).toBe(1);
  });

  it('counts UTF-8 bytes, not characters', () => {
    // "é" is two bytes: 7 × 2 = 14 bytes → 4 tokens.
    expect(estimateTokens([user('ééééééé')])).toBe(8 + 4 + 1);
  });

  it('charges tool results and call ids as dense (÷ 2.5), in one sum with the tool list', () => {
    // 5 content bytes + 2 id bytes + 2 for `[]` = 9 dense bytes → 4 tokens.
    expect(estimateTokens([toolResult('c1', 'hello')])).toBe(8 + 4);
  });

  it('charges 12 per tool call, its name as prose, its arguments and id as dense', () => {
    // prose: "calc" 4 → 2; dense: 7 + 2 + 2 = 11 → 5.
    expect(estimateTokens([callWithArguments('{"a":1}')])).toBe(8 + 12 + 2 + 5);
  });

  it('counts arguments as PHP re-encodes them after decoding', () => {
    expect(toolCallArgumentBytes('{"a":1}')).toBe(7);
    expect(toolCallArgumentBytes('{ "a" : 1 }')).toBe(7);
    // `{"u":"a\/\u00e9"}`
    expect(toolCallArgumentBytes('{"u":"a/é"}')).toBe(17);
    expect(toolCallArgumentBytes('{"n":1.50,"m":1e2}')).toBe('{"n":1.5,"m":100}'.length);
    expect(toolCallArgumentBytes('[1, 2]')).toBe(5);
    // No arguments, a scalar and text that is not JSON all count as `{}`.
    for (const text of ['', '{}', '[]', '"x"', '42', 'not json', '{"a":']) expect(toolCallArgumentBytes(text)).toBe(2);
    // PHP could not encode it again: counted as sent.
    expect(toolCallArgumentBytes('{"big":1e400}')).toBe(13);
  });

  it('sums each class over the whole transcript before rounding', () => {
    // Two 1-byte messages: 2 prose bytes → 1 token, not 1 + 1.
    expect(estimateTokens([user('a'), user('b')])).toBe(16 + 1 + 1);
  });

  it('charges the system prompt and the skill block, which are part of the messages', () => {
    const bare = estimateTokens([user('question')]);
    const withSystem = estimateTokens([system('x'.repeat(350)), user('question')]);
    const withSkills = estimateTokens([user('y'.repeat(700) + '\n\nquestion')]);
    expect(withSystem - bare).toBe(8 + 100);
    expect(withSkills - bare).toBeGreaterThanOrEqual(200);
  });
});

describe('calibration', () => {
  it('starts every first send at 1.15, with nothing sent yet', () => {
    expect(firstSendCalibration()).toEqual({ factor: 1.15, lastSentEstimate: null });
  });

  it('divides the reported prompt tokens by the calibrated estimate last approved, growing only', () => {
    const sent: ContextCalibration = { factor: 1.15, lastSentEstimate: 117 };
    expect(calibrateFromUsage(sent, 150)).toEqual({ factor: 150 / 117, lastSentEstimate: 117 });
    // 130 / 117 ≈ 1.11 is below 1.15: no change, though it is above 1.
    expect(calibrateFromUsage(sent, 130)).toEqual(sent);
    expect(calibrateFromUsage({ factor: 1.5, lastSentEstimate: 100 }, 50).factor).toBe(1.5);
  });

  it('changes nothing before a measured fit, or when no prompt tokens were reported', () => {
    expect(calibrateFromUsage(firstSendCalibration(), 1000)).toEqual(firstSendCalibration());
    expect(calibrateFromUsage({ factor: 1.2, lastSentEstimate: 100 }, 0).factor).toBe(1.2);
  });

  it("remembers a measured fit's estimate; a fit reported as 0 / 0 leaves the last one in place", () => {
    const first = firstSendCalibration();
    expect(calibrationAfterFit(first, { budget: 6946, estimate: 117 })).toEqual({ factor: 1.15, lastSentEstimate: 117 });
    expect(calibrationAfterFit({ factor: 1.2, lastSentEstimate: 117 }, { budget: 0, estimate: 0 })).toEqual({ factor: 1.2, lastSentEstimate: 117 });
  });

  it('scales the estimate and rounds up, never below the raw estimate', () => {
    expect(calibratedEstimate(101, 1.15)).toBe(117);
    expect(calibratedEstimate(100, 0.5)).toBe(100);
  });
});

describe('partitionTranscript', () => {
  it('keeps everything up to and including the first user message as head, turns open at assistant messages', () => {
    const messages = [
      system('s'),
      user('u'),
      assistantCalling('a'),
      toolResult('a', 'ra'),
      assistantCalling('b', 'c'),
      toolResult('b', 'rb'),
      toolResult('c', 'rc'),
    ];
    const { head, turns } = partitionTranscript(messages);
    expect(head).toEqual([system('s'), user('u')]);
    expect(turns).toEqual([
      [assistantCalling('a'), toolResult('a', 'ra')],
      [assistantCalling('b', 'c'), toolResult('b', 'rb'), toolResult('c', 'rc')],
    ]);
  });

  it('treats a transcript without a user message as all head', () => {
    expect(partitionTranscript([system('s'), assistantCalling('a')])).toEqual({
      head: [system('s'), assistantCalling('a')],
      turns: [],
    });
  });
});

describe('toolMessagesArePaired', () => {
  it('wants every tool message after an assistant message declaring its call id; a call still waiting is fine', () => {
    expect(toolMessagesArePaired([user('u'), assistantCalling('y'), toolResult('y', '2'), assistantCalling('z')])).toBe(true);
    expect(toolMessagesArePaired([user('u'), toolResult('x', '1'), assistantCalling('x')])).toBe(false);
    expect(toolMessagesArePaired([user('u'), assistantCalling(''), toolResult('', '1')])).toBe(false);
  });
});

describe('fitContext', () => {
  const head = [system('system prompt'), user('the task')];
  const turn = (id: string, size: number): ChatMessage[] => [assistantCalling(id), toolResult(id, 'r'.repeat(size))];
  const measured = (messages: ChatMessage[], factor: number, tools: ToolDefinition[] = []): number =>
    calibratedEstimate(estimateTokens(messages, tools), factor);

  it('returns the transcript unchanged when it fits, with the figures of the CONTEXT step', () => {
    const messages = [...head, ...turn('a', 10)];
    const fit = fitContext(messages, [], budgetOf(10000), 1.15);
    expect(fit).toEqual({
      messages,
      report: { window: 100000, reserve: 1000, safety: 3000, budget: 10000, estimate: measured(messages, 1.15), droppedTurns: 0, calibration: 1.15, fits: true },
      deferred: null,
      sentEstimate: measured(messages, 1.15),
    });
  });

  it('drops the oldest whole turns until it fits, keeping the head', () => {
    const messages = [...head, ...turn('a', 1000), ...turn('b', 1000), ...turn('c', 100)];
    const kept = [...head, ...turn('b', 1000), ...turn('c', 100)];
    const fit = fitContext(messages, [], budgetOf(measured(kept, 1.15)), 1.15);
    expect(fit.messages).toEqual(kept);
    expect(fit.report).toMatchObject({ droppedTurns: 1, fits: true, estimate: measured(kept, 1.15) });
  });

  it('keeps the newest turn and reports that it does not fit when even the floor is over budget', () => {
    const messages = [...head, ...turn('a', 1000), ...turn('b', 5000)];
    const fit = fitContext(messages, [], budgetOf(100), 1.15);
    expect(fit.messages).toEqual([...head, ...turn('b', 5000)]);
    expect(fit.report).toMatchObject({ droppedTurns: 1, fits: false, budget: 100 });
  });

  it('does not fit when the head alone is over budget', () => {
    const fit = fitContext([system('s'), user('x'.repeat(10000))], [], budgetOf(100), 1.15);
    expect(fit.report).toMatchObject({ fits: false, droppedTurns: 0 });
  });

  it('sends as is when the budget is zero or less, reported as 0 / 0', () => {
    const messages = [...head, ...turn('a', 100000)];
    for (const budget of [0, -30]) {
      const fit = fitContext(messages, [], { window: 1000, reserve: 1000, safety: 30, budget }, 1.15);
      expect(fit.messages).toEqual(messages);
      expect(fit.report).toEqual({ window: 0, reserve: 0, safety: 0, budget: 0, estimate: 0, droppedTurns: 0, calibration: 1.15, fits: true });
      expect(fit.deferred).toBe('no_budget');
      expect(fit.sentEstimate).toBe(measured(messages, 1.15));
    }
  });

  it('passes a tool message with an undeclared call id through unchanged, reported as 0 / 0, even over budget', () => {
    // A tool result right after the user message belongs to no assistant turn; one in the newest turn answers no call of it.
    const cases: [ChatMessage[], number][] = [
      [[...head, toolResult('ghost', 'x'), ...turn('a', 10)], 100000],
      [[...head, ...turn('a', 10), ...turn('b', 10), toolResult('ghost', 'x')], 100000],
      [[...head, ...turn('a', 10), ...turn('b', 10), toolResult('ghost', 'x')], 10],
    ];
    for (const [messages, budget] of cases) {
      const fit = fitContext(messages, [], budgetOf(budget), 1.15);
      expect(fit.messages).toEqual(messages);
      expect(fit.report).toEqual({ window: 0, reserve: 0, safety: 0, budget: 0, estimate: 0, droppedTurns: 0, calibration: 1.15, fits: true });
      expect(fit.deferred).toBe('unpaired_tool_message');
    }
  });

  it('sends the pruned list when dropping the unpaired fragment is what makes it fit', () => {
    const messages = [...head, toolResult('ghost', 'x'.repeat(2000)), ...turn('a', 10)];
    const kept = [...head, ...turn('a', 10)];
    const fit = fitContext(messages, [], budgetOf(measured(kept, 1.15)), 1.15);
    expect(fit.messages).toEqual(kept);
    expect(fit.report).toMatchObject({ droppedTurns: 1, fits: true });
  });

  it('applies the calibration factor to the estimate it compares', () => {
    const messages = [...head, ...turn('a', 100)];
    const raw = estimateTokens(messages);
    expect(fitContext(messages, [], budgetOf(raw), 1).report.fits).toBe(true);
    const calibrated = fitContext(messages, [], budgetOf(raw), 1.5);
    expect(calibrated.report.estimate).toBe(Math.ceil(raw * 1.5));
    expect(calibrated.report.calibration).toBe(1.5);
    expect(calibrated.report.fits).toBe(false);
  });

  it('counts the offered tools against the budget', () => {
    const tools: ToolDefinition[] = [{ name: 't', description: 'd'.repeat(1000), parameters: { type: 'object' } }];
    const budget = budgetOf(measured(head, 1.15) + 10);
    expect(fitContext(head, [], budget, 1.15).report.fits).toBe(true);
    expect(fitContext(head, tools, budget, 1.15).report.fits).toBe(false);
  });

  it('never orphans a tool message while dropping turns (randomised transcripts)', () => {
    let seed = 7;
    const random = (): number => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed / 2147483648;
    };
    for (let attempt = 0; attempt < 200; attempt += 1) {
      const messages: ChatMessage[] = [system('s'.repeat(Math.floor(random() * 200))), user('task')];
      const turns = 1 + Math.floor(random() * 6);
      for (let index = 0; index < turns; index += 1) {
        const calls = Math.floor(random() * 3);
        const ids = Array.from({ length: calls }, (_, call) => `t${index}_${call}`);
        if (calls === 0) {
          messages.push({ role: 'assistant', content: 'thinking aloud '.repeat(Math.floor(random() * 50)) });
          continue;
        }
        messages.push(assistantCalling(...ids));
        for (const id of ids) messages.push(toolResult(id, 'r'.repeat(Math.floor(random() * 2000))));
      }
      const budget = budgetOf(1 + Math.floor(random() * estimateTokens(messages)));
      const fit = fitContext(messages, [], budget, 1.15 + random());
      expect(fit.deferred).toBeNull();
      expect(toolMessagesArePaired(fit.messages)).toBe(true);
      expect(fit.messages.slice(0, 2)).toEqual(messages.slice(0, 2));
    }
  });
});

describe('a run over several rounds', () => {
  // The agent loop's sends: the head, then one more turn per round, the tool offered each time.
  const bulky: ToolDefinition = {
    name: 'bulky',
    description: 'The bulky tool.',
    parameters: { type: 'object', properties: { text: { type: 'string' } }, additionalProperties: false },
  };
  const head = [system('You are a helpful assistant.'), user('What is 2 + 3?')];
  const turn = (id: string): ChatMessage[] => [
    { role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'bulky', arguments: '{}' } }] },
    toolResult(id, 'z'.repeat(1500)),
  ];
  // A 2578 window without a model maximum: 2578 − 1000 − 78.
  const budget = contextBudget({ contextLength: 2578 });

  /** Fits each send in turn, then folds in the prompt tokens the provider reports for it. */
  function simulate(sends: ChatMessage[][], reported: number[]): ReturnType<typeof fitContext>[] {
    let calibration = firstSendCalibration();
    return sends.map((messages, index) => {
      const fit = fitContext(messages, [bulky], budget, calibration.factor);
      calibration = calibrationAfterFit(calibration, fit.report);
      calibration = calibrateFromUsage(calibration, reported[index] ?? 0);
      return fit;
    });
  }

  it('drops the oldest turn in round 3: reports below the calibrated estimate leave the factor at 1.15', () => {
    expect(budget.budget).toBe(1500);
    expect([head, [...head, ...turn('t1')], [...head, ...turn('t1'), ...turn('t2')]].map((messages) => estimateTokens(messages, [bulky]))).toEqual([101, 733, 1365]);
    const fits = simulate([head, [...head, ...turn('t1')], [...head, ...turn('t1'), ...turn('t2')]], [90, 760]);
    expect(fits.map((fit) => fit.report)).toEqual([
      // ceil(101 × 1.15); 90 / 117 < 1.15
      { ...budget, estimate: 117, droppedTurns: 0, calibration: 1.15, fits: true },
      // ceil(733 × 1.15); 760 / 843 < 1.15
      { ...budget, estimate: 843, droppedTurns: 0, calibration: 1.15, fits: true },
      // ceil(1365 × 1.15) = 1570 > 1500: t1 goes, ceil(733 × 1.15) = 843 is sent.
      { ...budget, estimate: 843, droppedTurns: 1, calibration: 1.15, fits: true },
    ]);
    expect(fits[2]?.messages).toEqual([...head, ...turn('t2')]);
    // Calibrating against the raw estimate instead (90 / 101, 760 / 733 ≈ 1.037) would give
    // ceil(1365 × 1.037) = 1416 and keep both turns.
    expect(calibratedEstimate(1365, Math.max(1, 90 / 101, 760 / 733))).toBe(1416);
  });

  it('grows the factor to reported ÷ approved estimate and scales later rounds by it, in floating point as nr_llm does', () => {
    const fits = simulate([head, [...head, ...turn('t1')], [...head, ...turn('t1'), ...turn('t2')]], [150, 900]);
    const factor = 150 / 117;
    expect(fits.map((fit) => [fit.report.calibration, fit.report.estimate, fit.report.droppedTurns])).toEqual([
      [1.15, 117, 0],
      // ceil(733 × 1.2820512820512822) = 940; then 900 / 940 leaves the factor.
      [factor, 940, 0],
      // 1365 × 1.2820512820512822 = 1750.0000000000002 → 1751 > 1500: t1 goes.
      [factor, 940, 1],
    ]);
  });
});
