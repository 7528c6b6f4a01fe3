import { describe, expect, it } from 'vitest';
import { backoffDelayMs } from './backoff.js';

describe('backoffDelayMs', () => {
  it('starts at initialMs, doubles each step and stops at maxMs', () => {
    const backoff = { initialMs: 5, maxMs: 100 };
    expect([0, 1, 2, 3, 4, 5, 6].map((step) => backoffDelayMs(backoff, step))).toEqual([5, 5, 10, 20, 40, 80, 100]);
  });

  it('stays finite and capped however many steps were taken', () => {
    expect(backoffDelayMs({ initialMs: 1_000, maxMs: 3_600_000 }, 10_000)).toBe(3_600_000);
  });
});
