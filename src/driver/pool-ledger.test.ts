import { describe, expect, it } from 'vitest';
import { PoolLedger } from './pool-ledger.js';

describe('PoolLedger', () => {
  it('counts what this driver holds and the most it ever held', () => {
    const ledger = new PoolLedger();
    ledger.countLent();
    ledger.countLent();
    ledger.countReturned();
    ledger.countLent();
    ledger.countReturned();
    expect(ledger.stats({ size: 5, open: 2, idle: 1, waiting: 0 })).toEqual({
      size: 5,
      held: 1,
      idle: 1,
      spare: 4,
      maxHeld: 2,
      reservedForRenewals: 0,
    });
  });

  it('counts idle connections plus room to open as spare, less what queued callers will take', () => {
    const ledger = new PoolLedger();
    expect(ledger.stats({ size: 4, open: 4, idle: 1, waiting: 0 }).spare).toBe(1);
    expect(ledger.stats({ size: 4, open: 2, idle: 0, waiting: 1 }).spare).toBe(1);
    expect(ledger.stats({ size: 4, open: 4, idle: 0, waiting: 3 }).spare).toBe(0);
  });
});
