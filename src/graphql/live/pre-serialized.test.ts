import { isPreSerialized, PreSerializedMarkers } from './pre-serialized';

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
