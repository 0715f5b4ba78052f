import { LeaseClock, leaseIsStale, leaseSafeForMs } from './lease-clock';

describe('LeaseClock', () => {
  let now = 1_000_000;
  const clock = () => new LeaseClock(15, () => now);

  beforeEach(() => {
    now = 1_000_000;
  });

  it('counts on a lease for its period less a third (at least 1 s) after the write began', () => {
    expect(leaseSafeForMs(15)).toBe(10_000);
    expect(leaseSafeForMs(3)).toBe(2_000);
    expect(leaseSafeForMs(1)).toBe(0);
    const leases = clock();
    leases.taken(7, now);
    now += 9_999;
    expect(leases.mayOverlap(7)).toBe(true);
    now += 1;
    expect(leases.mayOverlap(7)).toBe(false);
  });

  it('knows nothing of runs it did not take, or released', () => {
    const leases = clock();
    expect(leases.mayOverlap(7)).toBe(false);
    leases.taken(7, now);
    leases.released(7);
    expect(leases.mayOverlap(7)).toBe(false);
  });

  it('extends held leases on a heartbeat, never backwards, and ignores runs it no longer holds', () => {
    const leases = clock();
    leases.taken(7, now);
    now += 8_000;
    leases.renewed([7, 8], now - 100);
    now += 9_000;
    expect(leases.mayOverlap(7)).toBe(true);
    expect(leases.mayOverlap(8)).toBe(false);
    leases.renewed([7], now - 20_000);
    expect(leases.mayOverlap(7)).toBe(true);
  });

  it('with a lease too short for a margin, never lets a write overlap', () => {
    const leases = new LeaseClock(1, () => now);
    leases.taken(7, now);
    expect(leases.mayOverlap(7)).toBe(false);
  });
});

describe('leaseIsStale', () => {
  it('is stale once its heartbeat is older than the lease period, not at the boundary', () => {
    expect(leaseIsStale(100, 115, 15)).toBe(false);
    expect(leaseIsStale(100, 116, 15)).toBe(true);
    expect(leaseIsStale(100, 100, 15)).toBe(false);
  });
});
