import { NextPrefixes } from './frames';

// One server's table of prefixes (serveSubscriptions creates it).
const prefixes = new NextPrefixes();
const nextPrefix = (id: string) => prefixes.of(id);

describe('nextPrefix', () => {
  it('is the start of graphql-ws\'s next message, one buffer per id, in memory of its own', () => {
    const prefix = nextPrefix('sub "7"');
    expect(prefix.toString()).toBe('{"id":"sub \\"7\\"","type":"next","payload":');
    expect(nextPrefix('sub "7"')).toBe(prefix);
    // Not a slice of Node's shared pool, which it would keep alive for as long as a subscription lasts.
    const pooled = Buffer.from('{"id":"1"}');
    expect(pooled.buffer.byteLength).toBeGreaterThan(pooled.length);
    expect([prefix.byteOffset, prefix.buffer.byteLength]).toEqual([0, prefix.length]);
  });
});
