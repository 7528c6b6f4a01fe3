import { describe, expect, it } from 'vitest';
import { DeclarationError } from './errors.js';
import { MAX_TIMER_MS, millisecondsFromZero, positiveInteger, positiveMilliseconds } from './option-checks.js';

describe('option checks', () => {
  it('keep milliseconds within what Node timers keep: 2^31 - 1', () => {
    expect(MAX_TIMER_MS).toBe(2 ** 31 - 1);
    expect(positiveMilliseconds(MAX_TIMER_MS, 'pollIntervalMs', 'here')).toBe(MAX_TIMER_MS);
    expect(() => positiveMilliseconds(MAX_TIMER_MS + 1, 'pollIntervalMs', 'here')).toThrow(
      new DeclarationError('here: pollIntervalMs must be a number of milliseconds above 0 and at most 2147483647, got 2147483648'),
    );
    expect(() => positiveMilliseconds(0, 'pollIntervalMs', 'here')).toThrow(DeclarationError);
    expect(() => positiveMilliseconds(Number.NaN, 'pollIntervalMs', 'here')).toThrow(DeclarationError);
    expect(() => positiveMilliseconds(5_000, 'leaseMs', 'here', 4_000)).toThrow(/at most 4000, got 5000/);
    expect(millisecondsFromZero(0, 'window', 'here')).toBe(0);
    expect(() => millisecondsFromZero(MAX_TIMER_MS + 1, 'window', 'here')).toThrow(/from 0 to 2147483647/);
    expect(() => millisecondsFromZero(-1, 'window', 'here')).toThrow(DeclarationError);
  });

  it('bound whole numbers when given a maximum', () => {
    expect(positiveInteger(10, 'workers', 'here', 10)).toBe(10);
    expect(() => positiveInteger(11, 'workers', 'here', 10)).toThrow(
      new DeclarationError('here: workers must be a whole number from 1 to 10, got 11'),
    );
    expect(() => positiveInteger(0, 'batch', 'here')).toThrow(new DeclarationError('here: batch must be a whole number of at least 1, got 0'));
  });
});
