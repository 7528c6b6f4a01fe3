import { afterEach, describe, expect, it } from 'vitest';
import { DestinationError } from '../errors.js';
import { NameBackoffs } from './name-backoffs.js';

describe('NameBackoffs', () => {
  const backoffs = new NameBackoffs({ initialMs: 1_000, maxMs: 60_000 }, () => undefined);
  afterEach(() => backoffs.clear());

  it('lists the names waiting, the soonest to go again first, with their failures in a row and the last error', () => {
    const now = Date.now();
    for (let failure = 0; failure < 3; failure += 1) backoffs.delayMs('orders', true);
    backoffs.wakeAt('orders', new Date(now + 120_000), new DestinationError({ destination: 'webhook', message: 'HTTP 503' }));
    backoffs.delayMs('invoices', true);
    backoffs.wakeAt('invoices', new Date(now + 60_000), undefined);
    expect(backoffs.waitingCount).toBe(2);
    expect(backoffs.waiting(10)).toEqual([
      { name: 'invoices', failedSends: 1, retryAt: new Date(now + 60_000), error: null },
      { name: 'orders', failedSends: 3, retryAt: new Date(now + 120_000), error: 'DestinationError: HTTP 503' },
    ]);
    expect(backoffs.waiting(1).map(({ name }) => name)).toEqual(['invoices']);
  });

  it('keeps the last error of a name, cut as a dead letter cuts its last error', () => {
    backoffs.wakeAt('orders', new Date(Date.now() + 60_000), new Error('first'));
    backoffs.wakeAt('orders', new Date(Date.now() + 60_000), new Error('x'.repeat(5_000)));
    const [waiting] = backoffs.waiting(10);
    expect(waiting!.error).toHaveLength(2_000);
    expect(waiting!.error!.endsWith('…')).toBe(true);
    backoffs.clear();
    expect(backoffs.waiting(10)).toEqual([]);
  });
});
