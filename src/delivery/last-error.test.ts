import { describe, expect, it } from 'vitest';
import { boundLastError, describeRetryRequested, describeThrown, MAX_LAST_ERROR_CHARACTERS } from './last-error.js';

describe('describeThrown', () => {
  it('gives a plain Error its message alone, and other errors their name first', () => {
    expect(describeThrown(new Error('smtp refused'))).toBe('smtp refused');
    expect(describeThrown(new TypeError('x is not a function'))).toBe('TypeError: x is not a function');
    class QuotaError extends Error {
      override name = 'QuotaError';
    }
    expect(describeThrown(new QuotaError('over quota'))).toBe('QuotaError: over quota');
  });

  it('names an error without a message by its name', () => {
    expect(describeThrown(new Error(''))).toBe('Error');
    expect(describeThrown(new RangeError(''))).toBe('RangeError');
  });

  it('reads error-like objects, and shows other values as text or JSON', () => {
    expect(describeThrown({ name: 'WorkerError', message: 'lost' })).toBe('WorkerError: lost');
    expect(describeThrown('just text')).toBe('just text');
    expect(describeThrown({ code: 7 })).toBe('{"code":7}');
    expect(describeThrown(undefined)).toBe('undefined');
    expect(describeThrown(12n)).toBe('12');
  });
});

describe('describeRetryRequested', () => {
  it('says which outcome asked for another attempt, and at which', () => {
    expect(describeRetryRequested('retry', 5, 5)).toBe('retry requested at attempt 5 of 5');
    expect(describeRetryRequested('retryAfter', 3, 3)).toBe('retryAfter requested at attempt 3 of 3');
  });
});

describe('boundLastError', () => {
  it('keeps storable text within the limit as it is', () => {
    expect(boundLastError('quotes " and \\ and\nlines é 😀')).toBe('quotes " and \\ and\nlines é 😀');
    const exactly = '😀'.repeat(MAX_LAST_ERROR_CHARACTERS);
    expect(boundLastError(exactly)).toBe(exactly);
  });

  it('replaces NUL and unpaired surrogates instead of refusing them', () => {
    expect(boundLastError('a\u0000b\uD800c\uDC00d😀')).toBe('a\uFFFDb\uFFFDc\uFFFDd😀');
  });

  it('cuts between characters, never inside a surrogate pair, and says it cut', () => {
    const cut = boundLastError(`x${'😀'.repeat(MAX_LAST_ERROR_CHARACTERS)}`);
    expect([...cut]).toHaveLength(MAX_LAST_ERROR_CHARACTERS);
    expect(cut.endsWith('😀…')).toBe(true);
    expect(boundLastError('a'.repeat(MAX_LAST_ERROR_CHARACTERS + 1))).toBe(`${'a'.repeat(MAX_LAST_ERROR_CHARACTERS - 1)}…`);
  });
});
