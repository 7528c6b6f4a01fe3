import { describe, expect, it } from 'vitest';
import { PoolExhaustedError } from '../errors.js';
import { PoolGate, poolGateFor } from './pool-gate.js';

const describe_ = (timeoutMs: number) => `no connection within ${timeoutMs} ms`;

function enter(gate: PoolGate, purpose: 'work' | 'renewal', timeoutMs = 5_000): Promise<void> {
  return gate.enter({ purpose, timeoutMs, describe: describe_ });
}

describe('PoolGate', () => {
  it('admits work up to the pool size, then in arrival order as connections leave', async () => {
    const gate = new PoolGate(() => 2);
    await enter(gate, 'work');
    await enter(gate, 'work');
    const order: string[] = [];
    const third = enter(gate, 'work').then(() => order.push('third'));
    const fourth = enter(gate, 'work').then(() => order.push('fourth'));
    expect(gate.availableForWork).toBe(0);
    gate.leave();
    await third;
    gate.leave();
    await fourth;
    expect(order).toEqual(['third', 'fourth']);
    expect(gate.lent).toBe(2);
  });

  it('keeps one connection of a pool of three or more for renewals while a lease subscription holds it', async () => {
    const gate = new PoolGate(() => 4);
    const release = gate.holdForRenewals();
    expect(gate.reservedForRenewals).toBe(1);
    for (let n = 0; n < 3; n += 1) await enter(gate, 'work');
    let isFourthIn = false;
    const fourth = enter(gate, 'work').then(() => (isFourthIn = true));
    // Work waits while the renewal's connection is free; a renewal takes it at once.
    await enter(gate, 'renewal');
    expect(isFourthIn).toBe(false);
    gate.leave();
    expect(isFourthIn).toBe(false);
    release();
    await fourth;
    expect(gate.reservedForRenewals).toBe(0);
  });

  it('keeps nothing for renewals on a pool of two, where a transactional delivery needs both', () => {
    const gate = new PoolGate(() => 2);
    gate.holdForRenewals();
    expect(gate.reservedForRenewals).toBe(0);
    expect(gate.availableForWork).toBe(2);
  });

  it('lets a waiting renewal enter before work that waited longer', async () => {
    const gate = new PoolGate(() => 1);
    await enter(gate, 'work');
    const order: string[] = [];
    const work = enter(gate, 'work').then(() => order.push('work'));
    const renewal = enter(gate, 'renewal').then(() => order.push('renewal'));
    gate.leave();
    await renewal;
    gate.leave();
    await work;
    expect(order).toEqual(['renewal', 'work']);
  });

  it('fails a wait that outlasts its timeout with a PoolExhaustedError, and the next waiter still enters', async () => {
    const gate = new PoolGate(() => 1);
    await enter(gate, 'work');
    await expect(enter(gate, 'work', 20)).rejects.toThrow(PoolExhaustedError);
    const next = enter(gate, 'work');
    gate.leave();
    await next;
    expect(gate.lent).toBe(1);
  });

  it('is one gate per pool object, shared by every driver on it', () => {
    const pool = {};
    expect(poolGateFor(pool, () => 3)).toBe(poolGateFor(pool, () => 3));
    expect(poolGateFor({}, () => 3)).not.toBe(poolGateFor(pool, () => 3));
  });
});
