import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { isOutcome, Outcome } from './outcome.js';

describe('Outcome', () => {
  it('builds each outcome as a value', () => {
    expect(Outcome.ack()).toEqual({ kind: 'ack' });
    expect(Outcome.retry()).toEqual({ kind: 'retry' });
    expect(Outcome.retryAfter(5_000)).toEqual({ kind: 'retryAfter', delayMs: 5_000 });
    expect(Outcome.drop()).toEqual({ kind: 'drop' });
    expect(isOutcome(Outcome.drop())).toBe(true);
    expect(isOutcome(undefined)).toBe(false);
    expect(isOutcome({ kind: 'later' })).toBe(false);
  });

  it('refuses a negative or non-finite delay', () => {
    expect(() => Outcome.retryAfter(-1)).toThrow(DeclarationError);
    expect(() => Outcome.retryAfter(Number.NaN)).toThrow(DeclarationError);
  });
});
