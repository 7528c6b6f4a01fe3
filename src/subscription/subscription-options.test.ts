import { describe, expect, expectTypeOf, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { resolveSubscribeOptions, type SubscribeOptions } from './subscription-options.js';

const defaults = { pollIntervalMs: 1_000, leaseMs: 30_000 };

function refusal(options: SubscribeOptions<unknown>): string {
  try {
    resolveSubscribeOptions(options, defaults, 'subscription "jobs/emails"');
  } catch (error) {
    expect(error).toBeInstanceOf(DeclarationError);
    return (error as Error).message;
  }
  throw new Error('expected a DeclarationError');
}

describe('resolveSubscribeOptions', () => {
  it('defaults to one worker, the broker intervals and the drop decode policy', () => {
    const resolved = resolveSubscribeOptions({}, defaults, 'here');
    expect(resolved).toMatchObject({ workers: 1, isKeyed: false, batch: undefined, pollIntervalMs: 1_000, leaseMs: 30_000 });
    expect(resolved.onDecodeFailure).toBe('drop');
  });

  it('turns transactional mode on only when asked, with workers or lanes', () => {
    expect(resolveSubscribeOptions({}, defaults, 'here').transactional).toBe(false);
    expect(resolveSubscribeOptions({ transactional: true, workersByKey: 2 }, defaults, 'here')).toMatchObject({
      transactional: true,
      workers: 2,
    });
  });

  it('counts lanes and threads as the workers of the subscription', () => {
    expect(resolveSubscribeOptions({ workersByKey: 3 }, defaults, 'here')).toMatchObject({ workers: 3, isKeyed: true });
    expect(
      resolveSubscribeOptions({ onThreads: { threads: 2, byKey: true, module: './handler.js' } }, defaults, 'here'),
    ).toMatchObject({ workers: 2, isKeyed: true, onThreads: { threads: 2, connections: 1, export: 'default' } });
  });

  it('makes maxAttempts without deadLetter, or deadLetter without maxAttempts, a type error too', () => {
    // Checked by the typecheck, which covers this file: each line below fails to compile without its directive.
    // @ts-expect-error maxAttempts needs deadLetter
    const withoutDeadLetter: SubscribeOptions = { workers: 2, maxAttempts: 3 };
    // @ts-expect-error deadLetter needs maxAttempts
    const withoutMaxAttempts: SubscribeOptions = { deadLetter: 'failed' };
    const both: SubscribeOptions = { workers: 2, maxAttempts: 3, deadLetter: 'failed' };
    const neither: SubscribeOptions = { workers: 2 };
    expectTypeOf<{ maxAttempts: number }>().not.toMatchTypeOf<SubscribeOptions>();
    expectTypeOf<{ maxAttempts: number; deadLetter: string }>().toMatchTypeOf<SubscribeOptions>();
    // Code the types do not check still gets the DeclarationError.
    expect(refusal(withoutDeadLetter)).toMatch(/maxAttempts and deadLetter come together/);
    expect(refusal(withoutMaxAttempts)).toMatch(/maxAttempts and deadLetter come together/);
    expect(resolveSubscribeOptions(both, defaults, 'here')).toMatchObject({ maxAttempts: 3, deadLetter: 'failed' });
    expect(resolveSubscribeOptions(neither, defaults, 'here')).toMatchObject({ maxAttempts: undefined, deadLetter: undefined });
  });

  it.each([
    [{ workers: 0 }, /workers must be a whole number from 1 to 1000, got 0/],
    [{ workers: -2 }, /workers must be a whole number/],
    [{ workers: 1.5 }, /workers must be a whole number/],
    [{ workersByKey: 0 }, /workersByKey must be a whole number/],
    [{ batch: 0 }, /batch must be a whole number/],
    [{ workers: 2, workersByKey: 2 }, /workers or workersByKey, not both/],
    [{ batch: 10, workersByKey: 2 }, /batch cannot be combined with workersByKey/],
    [{ onThreads: { threads: 2 } as never }, /onThreads needs the module/],
    [{ onThreads: { threads: 0, module: './h.js' } }, /onThreads.threads must be a whole number/],
    [{ onThreads: { threads: 2, module: './h.js' }, workers: 4 }, /onThreads sets its own concurrency/],
    [{ maxAttempts: 3 }, /maxAttempts and deadLetter come together/],
    [{ deadLetter: 'failed' }, /maxAttempts and deadLetter come together/],
    [{ onDecodeFailure: 'explode' as never }, /onDecodeFailure must be/],
    [{ wrokers: 2 } as never, /unknown subscription option "wrokers"/],
    [{ transactional: true, batch: 5 }, /transactional mode lends one delivery's transaction.*cannot be combined with batch/],
    [{ transactional: true, onThreads: { threads: 2, module: './h.js' } }, /cannot be combined with onThreads/],
    [{ transactional: 'yes' as never }, /transactional must be true or false/],
  ])('refuses %j', (options, message) => {
    expect(refusal(options as SubscribeOptions<unknown>)).toMatch(message);
  });

  it.each([
    [{ workers: 10_000_000 }, /workers must be a whole number from 1 to 1000, got 10000000/],
    [{ workersByKey: 1_001 }, /workersByKey must be a whole number from 1 to 1000/],
    [{ batch: 1_001 }, /batch must be a whole number from 1 to 1000/],
    [{ prefetch: 10_001 }, /prefetch must be a whole number of rows from 0 to 10000, got 10001/],
    [{ onThreads: { threads: 257, module: './h.js' } }, /onThreads.threads must be a whole number from 1 to 256/],
    [{ onThreads: { threads: 2, connections: 101, module: './h.js' } }, /onThreads.connections must be a whole number from 1 to 100/],
  ])('bounds concurrency and claim sizes: refuses %j', (options, message) => {
    expect(refusal(options as SubscribeOptions<unknown>)).toMatch(message);
  });

  it('accepts the largest concurrency and claim sizes', () => {
    expect(resolveSubscribeOptions({ workers: 1_000, prefetch: 10_000 }, defaults, 'here')).toMatchObject({ workers: 1_000, prefetch: 10_000 });
    expect(resolveSubscribeOptions({ batch: 1_000 }, defaults, 'here').batch).toBe(1_000);
    expect(resolveSubscribeOptions({ onThreads: { threads: 256, connections: 100, module: './h.js' } }, defaults, 'here').workers).toBe(256);
  });

  it.each([
    [{ pollIntervalMs: 2 ** 31 }, /pollIntervalMs must be a number of milliseconds above 0 and at most 2147483647, got 2147483648/],
    [{ leaseMs: 3_600_001 }, /leaseMs must be a number of milliseconds above 0 and at most 3600000/],
    [{ timeoutMs: 0 }, /timeoutMs must be a number of milliseconds above 0 and at most 2147483647, got 0/],
    [{ timeoutMs: 2 ** 31 }, /timeoutMs must be a number of milliseconds above 0 and at most 2147483647, got 2147483648/],
    [{ timeoutMs: Number.NaN }, /timeoutMs must be a number of milliseconds above 0/],
    [{ settlementWindowMs: 2 ** 31 }, /settlementWindowMs must be a number of milliseconds from 0 to 2147483647/],
    [{ retryBackoff: { initialMs: 2 ** 31 } }, /retryBackoff.initialMs must be a number of milliseconds above 0 and at most 2147483647/],
    [{ retryBackoff: { maxMs: Number.POSITIVE_INFINITY } }, /retryBackoff.maxMs must be a number of milliseconds/],
    [{ onDecodeFailure: { retryAfterMs: 2 ** 31 } }, /onDecodeFailure.retryAfterMs must be a number of milliseconds from 0 to 2147483647/],
  ])('refuses milliseconds no timer keeps: %j', (options, message) => {
    expect(refusal(options as SubscribeOptions<unknown>)).toMatch(message);
  });

  it('has no timeout unless asked, and accepts the longest timer', () => {
    expect(resolveSubscribeOptions({}, defaults, 'here').timeoutMs).toBeUndefined();
    expect(resolveSubscribeOptions({ timeoutMs: 2 ** 31 - 1 }, defaults, 'here').timeoutMs).toBe(2 ** 31 - 1);
  });

  it('refuses timeoutMs for handlers on worker threads, whose signal it cannot abort', () => {
    expect(refusal({ timeoutMs: 1_000, onThreads: { threads: 2, module: './h.js' } })).toBe(
      "subscription \"jobs/emails\": timeoutMs aborts the handler's context.signal, which a handler on a worker thread does not share; remove timeoutMs or onThreads",
    );
  });

  it('accepts the longest timer and the longest lease', () => {
    const resolved = resolveSubscribeOptions(
      { pollIntervalMs: 2 ** 31 - 1, leaseMs: 3_600_000, settlementWindowMs: 0, onDecodeFailure: { retryAfterMs: 0 } },
      defaults,
      'here',
    );
    expect(resolved).toMatchObject({ pollIntervalMs: 2 ** 31 - 1, leaseMs: 3_600_000, settlementWindowMs: 0 });
  });

  it.each([
    ['', /deadLetter must be a non-empty string/],
    ['dead\u0000letters', /deadLetter "dead\\u0000letters" contains a NUL character/],
    ['\uD800', /contains a NUL character or an unpaired surrogate/],
    ['x'.repeat(256), /deadLetter is 256 characters long; the group column holds at most 255/],
  ])('refuses a dead-letter group the group column cannot hold: %j', (deadLetter, message) => {
    expect(refusal({ maxAttempts: 3, deadLetter })).toMatch(message);
  });
});
