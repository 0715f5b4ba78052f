import type { ExecutionResult } from 'graphql';
import { isPreSerialized, PreSerializedMarkers } from './pre-serialized';

// One server's table of markers (serveSubscriptions creates it).
const markers = new PreSerializedMarkers();
const preSerialized = (result: ExecutionResult) => markers.preSerialized(result);
const expandPreSerialized = (message: string) => markers.expand(message);

describe('PreSerializedMarkers', () => {
  it('keeps each table\'s markers to itself: two servers in one process never expand each other\'s results', () => {
    const one = new PreSerializedMarkers();
    const two = new PreSerializedMarkers();
    const first = one.preSerialized({ data: { n: 1 } });
    const second = two.preSerialized({ data: { n: 2 } });
    expect(isPreSerialized(first) && isPreSerialized(second)).toBe(true);
    // Each table numbers its markers from 1; its nonce tells them apart.
    const fromTwo = JSON.stringify({ payload: second });
    const fromOne = JSON.stringify({ payload: first });
    expect(fromOne).not.toBe(fromTwo);
    expect(one.expand(fromTwo)).toBe(fromTwo);
    expect(JSON.parse(two.expand(fromTwo))).toEqual({ payload: { data: { n: 2 } } });
    expect(JSON.parse(one.expand(fromOne))).toEqual({ payload: { data: { n: 1 } } });
  });
});

describe('expandPreSerialized', () => {
  it('splices each result\'s JSON where its marker stands, and leaves other messages alone', () => {
    const one = preSerialized({ data: { text: 'quote " and \\ backslash, \u2028 and emoji 🚀' } });
    const two = preSerialized({ data: { n: 2 } });
    const message = JSON.stringify({ id: 'a', type: 'next', payload: one, extra: [two, one] });
    expect(JSON.parse(expandPreSerialized(message))).toEqual({ id: 'a', type: 'next', payload: one.result, extra: [two.result, one.result] });
    const plain = JSON.stringify({ id: 'b', type: 'next', payload: { data: { text: '"pw-serialized-not-ours-1"' } } });
    expect(expandPreSerialized(plain)).toBe(plain);
  });
});
