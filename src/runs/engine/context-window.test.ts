import type { ChatMessage, ToolDefinition } from '../../providers/adapters/types';
import {
  calibratedEstimate,
  contextBudget,
  dropOrphanedToolMessages,
  estimateTokens,
  fitContext,
  nextCalibration,
  partitionTranscript,
} from './context-window';

const system = (content: string): ChatMessage => ({ role: 'system', content });
const user = (content: string): ChatMessage => ({ role: 'user', content });
const assistantCalling = (...ids: string[]): ChatMessage => ({
  role: 'assistant',
  content: null,
  tool_calls: ids.map((id) => ({ id, type: 'function', function: { name: 'echo', arguments: '{}' } })),
});
const toolResult = (id: string, content: string): ChatMessage => ({ role: 'tool', tool_call_id: id, content });

function hasOrphanedToolMessage(messages: readonly ChatMessage[]): boolean {
  const declared = new Set<string>();
  for (const message of messages) {
    if (message.role === 'assistant') {
      for (const call of message.tool_calls ?? []) declared.add(call.id);
    }
    if (message.role === 'tool' && !declared.has(message.tool_call_id)) return true;
  }
  return false;
}

describe('contextBudget', () => {
  it('gives the unknown model 8192 − 1000 − 246 = 6946', () => {
    expect(contextBudget({ contextLength: 0 })).toEqual({ window: 8192, reserve: 1000, safety: 246, budget: 6946 });
    expect(contextBudget({ contextLength: 0, callMaxTokens: 0, modelMaxOutputTokens: 0 }).budget).toBe(6946);
  });

  it("reserves the call's max_tokens first, then the model's max output, then max(1000, 2 % of the window)", () => {
    expect(contextBudget({ contextLength: 100000, callMaxTokens: 500, modelMaxOutputTokens: 4000 })).toEqual({
      window: 100000,
      reserve: 500,
      safety: 3000,
      budget: 96500,
    });
    expect(contextBudget({ contextLength: 100000, callMaxTokens: 0, modelMaxOutputTokens: 4000 }).reserve).toBe(4000);
    expect(contextBudget({ contextLength: 100000 }).reserve).toBe(2000);
    expect(contextBudget({ contextLength: 10000 }).reserve).toBe(1000);
  });

  it('rounds the safety margin up', () => {
    expect(contextBudget({ contextLength: 1001, callMaxTokens: 1 }).safety).toBe(31);
  });

  it('may give a budget of zero or less (the caller then sends as is)', () => {
    expect(contextBudget({ contextLength: 1000 }).budget).toBe(1000 - 1000 - 30);
  });
});

describe('estimateTokens', () => {
  it('charges 8 per message plus prose bytes ÷ 3.5, rounded up', () => {
    expect(estimateTokens([system('abcdefg')])).toBe(8 + 2);
    expect(estimateTokens([user('abcdefgh')])).toBe(8 + 3);
    expect(estimateTokens([])).toBe(0);
  });

  it('counts UTF-8 bytes, not characters', () => {
    // "é" is two bytes: 7 × 2 = 14 bytes → 4 tokens.
    expect(estimateTokens([user('ééééééé')])).toBe(8 + 4);
  });

  it('charges tool results and call ids as dense (÷ 2.5)', () => {
    // 5 content bytes + 2 id bytes = 7 dense bytes → 3 tokens.
    expect(estimateTokens([toolResult('c1', 'hello')])).toBe(8 + 3);
  });

  it('charges 12 per tool call, its name as prose, its arguments and id as dense', () => {
    const message: ChatMessage = {
      role: 'assistant',
      content: null,
      tool_calls: [{ id: 'c1', type: 'function', function: { name: 'calc', arguments: '{"a":1}' } }],
    };
    // prose: "calc" 4 → 2; dense: 7 + 2 = 9 → 4.
    expect(estimateTokens([message])).toBe(8 + 12 + 2 + 4);
  });

  it('sums each class over the whole transcript before rounding', () => {
    // Two 1-byte messages: 2 prose bytes → 1 token, not 1 + 1.
    expect(estimateTokens([user('a'), user('b')])).toBe(16 + 1);
  });

  it('charges the JSON of the offered tool schemas as dense, and nothing without tools', () => {
    const tools: ToolDefinition[] = [{ name: 'echo', description: 'Echoes.', parameters: { type: 'object' } }];
    const bytes = Buffer.byteLength(JSON.stringify(tools));
    expect(estimateTokens([user('a')], tools)).toBe(8 + 1 + Math.ceil(bytes / 2.5));
    expect(estimateTokens([user('a')], [])).toBe(9);
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
  it('grows to the ratio of reported prompt tokens to the raw estimate', () => {
    expect(nextCalibration(1, 150, 100)).toBe(1.5);
  });

  it('never shrinks', () => {
    expect(nextCalibration(1.5, 100, 100)).toBe(1.5);
    expect(nextCalibration(1.5, 50, 100)).toBe(1.5);
  });

  it('ignores calls that report no prompt tokens', () => {
    expect(nextCalibration(1.2, 0, 100)).toBe(1.2);
    expect(nextCalibration(1.2, 100, 0)).toBe(1.2);
  });

  it('scales the estimate and rounds up, never below the raw estimate', () => {
    expect(calibratedEstimate(101, 1.5)).toBe(152);
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

describe('fitContext', () => {
  const head = [system('system prompt'), user('the task')];
  const turn = (id: string, size: number): ChatMessage[] => [assistantCalling(id), toolResult(id, 'r'.repeat(size))];

  it('returns the transcript unchanged when it fits', () => {
    const messages = [...head, ...turn('a', 10)];
    const fit = fitContext(messages, [], 10000, 1);
    expect(fit).toEqual({
      messages,
      droppedTurns: 0,
      estimate: estimateTokens(messages),
      rawEstimate: estimateTokens(messages),
      fits: true,
    });
  });

  it('drops the oldest whole turns until it fits, keeping the head', () => {
    const messages = [...head, ...turn('a', 1000), ...turn('b', 1000), ...turn('c', 100)];
    const budget = estimateTokens([...head, ...turn('b', 1000), ...turn('c', 100)]);
    const fit = fitContext(messages, [], budget, 1);
    expect(fit.messages).toEqual([...head, ...turn('b', 1000), ...turn('c', 100)]);
    expect(fit.droppedTurns).toBe(1);
    expect(fit.fits).toBe(true);
    expect(fit.estimate).toBeLessThanOrEqual(budget);
  });

  it('keeps the newest turn and reports that it does not fit when even the floor is over budget', () => {
    const messages = [...head, ...turn('a', 1000), ...turn('b', 5000)];
    const fit = fitContext(messages, [], 100, 1);
    expect(fit.messages).toEqual([...head, ...turn('b', 5000)]);
    expect(fit.droppedTurns).toBe(1);
    expect(fit.fits).toBe(false);
  });

  it('does not fit when the head alone is over budget', () => {
    const fit = fitContext([system('s'), user('x'.repeat(10000))], [], 100, 1);
    expect(fit.fits).toBe(false);
    expect(fit.droppedTurns).toBe(0);
  });

  it('sends as is when the budget is zero or less', () => {
    const messages = [...head, ...turn('a', 100000)];
    const fit = fitContext(messages, [], 0, 1);
    expect(fit.fits).toBe(true);
    expect(fit.messages).toEqual(messages);
    expect(fitContext(messages, [], -30, 1).fits).toBe(true);
  });

  it('applies the calibration factor to the estimate it compares', () => {
    const messages = [...head, ...turn('a', 100)];
    const raw = estimateTokens(messages);
    expect(fitContext(messages, [], raw, 1).fits).toBe(true);
    const calibrated = fitContext(messages, [], raw, 1.5);
    expect(calibrated.estimate).toBe(Math.ceil(raw * 1.5));
    expect(calibrated.rawEstimate).toBe(raw);
    expect(calibrated.fits).toBe(false);
  });

  it('counts the offered tools against the budget', () => {
    const messages = [...head];
    const tools: ToolDefinition[] = [{ name: 't', description: 'd'.repeat(1000), parameters: { type: 'object' } }];
    const budget = estimateTokens(messages) + 10;
    expect(fitContext(messages, [], budget, 1).fits).toBe(true);
    expect(fitContext(messages, tools, budget, 1).fits).toBe(false);
  });

  it('never leaves a tool message whose call id no earlier assistant message declared', () => {
    // A tool result right after the user message belongs to no assistant turn.
    const messages = [...head, toolResult('ghost', 'x'), ...turn('a', 10)];
    const fit = fitContext(messages, [], 100000, 1);
    expect(hasOrphanedToolMessage(fit.messages)).toBe(false);
    expect(fit.messages).toEqual([...head, ...turn('a', 10)]);
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
      const budget = Math.floor(random() * estimateTokens(messages));
      const fit = fitContext(messages, [], budget, 1 + random());
      expect(hasOrphanedToolMessage(fit.messages)).toBe(false);
      expect(fit.messages.slice(0, 2)).toEqual(messages.slice(0, 2));
    }
  });
});

describe('dropOrphanedToolMessages', () => {
  it('keeps results whose call was declared earlier, drops the others', () => {
    const messages = [user('u'), toolResult('x', '1'), assistantCalling('y'), toolResult('y', '2'), toolResult('z', '3')];
    expect(dropOrphanedToolMessages(messages)).toEqual([user('u'), assistantCalling('y'), toolResult('y', '2')]);
  });
});
