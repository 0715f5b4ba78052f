import { createScriptedAdapter } from '../support/scripted-adapter';

const request = (content: string) => ({ messages: [{ role: 'user' as const, content }], options: { model: 'scripted' } });

describe('createScriptedAdapter', () => {
  it('records a copy of every request by default', async () => {
    const adapter = createScriptedAdapter([{ content: 'one' }, { content: 'two' }]);
    const sent = request('first');
    await adapter.chat(sent);
    sent.messages[0]!.content = 'changed afterwards';
    await adapter.chat(request('second'));
    expect(adapter.requests.map((r) => r.messages[0]!.content)).toEqual(['first', 'second']);
  });

  it('with recordRequests false keeps no request and still numbers its calls', async () => {
    const adapter = createScriptedAdapter(
      [{ toolCalls: [{ name: 'calculator', arguments: { expression: '1 + 1' } }] }, { toolCalls: [{ name: 'calculator', arguments: { expression: '2 + 2' } }] }],
      { recordRequests: false },
    );
    const first = await adapter.chat(request('first'));
    const second = await adapter.chat(request('second'));
    expect(adapter.requests).toEqual([]);
    expect([first.toolCalls[0]!.id, second.toolCalls[0]!.id]).toEqual(['call_1_1', 'call_2_1']);
  });
});
