import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { isOutcome, Outcome, retryDelayProblem } from './outcome.js';

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

describe('Outcome.retryAfter', () => {
  const yearMs = 365.25 * 24 * 3_600_000;

  it('refuses a delay that ends after year 9999, which no database stores, and names it', () => {
    expect(() => Outcome.retryAfter(9_000 * yearMs)).toThrow(DeclarationError);
    expect(() => Outcome.retryAfter(1e16)).toThrow(
      'Outcome.retryAfter: a delay of 10000000000000000 ms ends after year 9999, past what every database stores; use a shorter delay',
    );
  });

  it('accepts a delay of decades', () => {
    expect(Outcome.retryAfter(100 * yearMs)).toEqual({ kind: 'retryAfter', delayMs: 100 * yearMs });
  });
});

describe('retryDelayProblem', () => {
  it('says what is wrong with a delay built without Outcome.retryAfter', () => {
    const now = Date.parse('2026-01-01T00:00:00Z');
    expect(retryDelayProblem(1_000, now)).toBeUndefined();
    expect(retryDelayProblem(Date.parse('9999-12-31T23:59:59.999Z') - now, now)).toBeUndefined();
    expect(retryDelayProblem(Date.parse('9999-12-31T23:59:59.999Z') - now + 1, now)).toMatch(/ends after year 9999/);
    expect(retryDelayProblem('5' as unknown as number, now)).toMatch(/zero or more milliseconds, got 5/);
    expect(retryDelayProblem(-1, now)).toMatch(/zero or more milliseconds/);
  });
});
