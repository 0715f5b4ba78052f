import type { ChatMessage } from '../../providers/adapters/types';
import { asHistorySent, historySentOf, withHistory, withoutHistory } from './history-sent';

const at = { session: 7, throughSequence: 5 };
const history: ChatMessage[] = [
  { role: 'user', content: 'u0' },
  { role: 'assistant', content: 'a1' },
  { role: 'user', content: 'u2' },
  { role: 'assistant', content: 'a3' },
  { role: 'user', content: 'u4' },
  { role: 'assistant', content: 'a5' },
];
const system: ChatMessage = { role: 'system', content: 'Be brief.' };
const prompt: ChatMessage = { role: 'user', content: 'now' };
/** The same history read again: equal messages, other objects. */
const readAgain = () => history.map((message) => ({ ...message }) as ChatMessage);

describe('a REQUEST names its history instead of copying it', () => {
  test('a fit that dropped turns: the head and the rest are two runs; stored without them; put back exactly', () => {
    // [system, u0, (a1, u2 dropped), a3, u4, a5, prompt, a tool round]
    const sent: ChatMessage[] = [system, history[0]!, history[3]!, history[4]!, history[5]!, prompt, { role: 'assistant', content: null, tool_calls: [] }];
    const reference = historySentOf(sent, history, at)!;
    expect(reference).toMatchObject({ session: 7, throughSequence: 5, count: 6, runs: [[1, 0, 1], [2, 3, 6]] });
    expect(reference.digest).toMatch(/^[A-Za-z0-9+/]{43}=$/);
    const stored = withoutHistory(sent, reference);
    expect(stored).toEqual([system, prompt, sent[6]]);
    const back = withHistory(JSON.parse(JSON.stringify(stored)) as ChatMessage[], asHistorySent(JSON.parse(JSON.stringify(reference)))!, readAgain());
    expect(back).toEqual({ messages: sent, complete: true });
  });

  test('the whole history in one run, and a history message the assembly changed (the skill block) stored as sent', () => {
    const withSkill: ChatMessage = { role: 'user', content: 'SKILLS\n\nu0' };
    const sent = [withSkill, ...history.slice(1), prompt];
    const reference = historySentOf(sent, history, at)!;
    expect(reference.runs).toEqual([[1, 1, 6]]);
    expect(withoutHistory(sent, reference)).toEqual([withSkill, prompt]);
    expect(withHistory([withSkill, prompt], reference, readAgain()).messages).toEqual(sent);
  });

  test('no history message sent (or none to send): nothing to name', () => {
    expect(historySentOf([system, prompt], history, at)).toBeNull();
    expect(historySentOf([system, prompt], [], at)).toBeNull();
  });

  test('a history no longer stored as it was sent is left out, never misplaced', () => {
    const sent = [system, ...history, prompt];
    const reference = historySentOf(sent, history, at)!;
    const stored = withoutHistory(sent, reference);
    const incomplete = { messages: [system, prompt], complete: false };
    expect(withHistory(stored, reference, null)).toEqual(incomplete);
    expect(withHistory(stored, reference, [])).toEqual(incomplete);
    expect(withHistory(stored, reference, readAgain().slice(1))).toEqual(incomplete);
    const edited = readAgain();
    edited[2] = { role: 'user', content: 'u2 edited' };
    expect(withHistory(stored, reference, edited)).toEqual(incomplete);
    // Same count and characters, other texts (another session under a reused uid): left out too.
    const other = readAgain();
    other[0] = { role: 'user', content: 'U0' };
    expect(withHistory(stored, reference, other)).toEqual(incomplete);
  });

  test('a stored reference that is not one is not used', () => {
    for (const value of [null, 'x', {}, { ...at, count: 1, digest: 'x', runs: 'no' }, { ...at, count: 1, digest: 'x', runs: [[0, 1, 1]] }, { ...at, count: 1, digest: 'x', runs: [[0, 0, 2]] }, { ...at, count: 1.5, digest: 'x', runs: [] }, { ...at, count: 1, chars: 1, runs: [] }]) {
      expect(asHistorySent(value)).toBeNull();
    }
    // Runs that claim more stored messages than there are: left out.
    expect(withHistory([system], { ...at, count: 6, digest: historySentOf(history, history, at)!.digest, runs: [[3, 0, 6]] }, readAgain()).complete).toBe(false);
  });

  test('any mix of history messages (in order, with gaps, changed ones) and others: the runs name exactly the history messages sent, and put back give what was sent', () => {
    let seed = 42;
    const random = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648);
    const long: ChatMessage[] = Array.from({ length: 40 }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: `m${i}` }) as ChatMessage);
    for (let round = 0; round < 200; round += 1) {
      const sent: ChatMessage[] = [];
      const expected: number[] = [];
      if (random() < 0.5) sent.push(system);
      for (let i = 0; i < long.length; i += 1) {
        const r = random();
        if (r < 0.15) continue; // left out by a fit
        if (r < 0.2) sent.push({ ...long[i]! } as ChatMessage); // made again (another object)
        else {
          expected[sent.length] = i;
          sent.push(long[i]!);
        }
        if (random() < 0.05) sent.push({ role: 'tool', tool_call_id: `c${i}`, content: 'x' } as ChatMessage);
      }
      sent.push(prompt);
      const reference = historySentOf(sent, long, at);
      // Every history object sent is named, at its place, by exactly one run; nothing else is.
      const named: number[] = [];
      for (const [position, from, to] of reference?.runs ?? []) for (let k = 0; k < to - from; k += 1) named[position + k] = from + k;
      expect(named).toEqual(expected);
      if (reference) expect(withHistory(withoutHistory(sent, reference), reference, long.map((message) => ({ ...message }) as ChatMessage)).messages).toEqual(sent);
    }
  });
});
