import { describe, expect, it } from 'vitest';
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

  it.each([
    [{ workers: 0 }, /workers must be a whole number of at least 1, got 0/],
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
});
