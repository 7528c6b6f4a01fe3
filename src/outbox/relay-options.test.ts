import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { resolveRelayOptions, type RelayOptions } from './relay-options.js';

const defaults = { pollIntervalMs: 1_000, leaseMs: 30_000 };

describe('resolveRelayOptions', () => {
  it.each([
    [{ pollIntervalMs: 2 ** 31 }, /pollIntervalMs must be a number of milliseconds above 0 and at most 2147483647, got 2147483648/],
    [{ leaseMs: 3_600_001 }, /leaseMs must be a number of milliseconds above 0 and at most 3600000/],
    [{ retryBackoff: { maxMs: 2 ** 31 } }, /retryBackoff.maxMs must be a number of milliseconds above 0 and at most 2147483647/],
  ])('refuses milliseconds no timer keeps and leases past an hour: %j', (options: RelayOptions, message) => {
    expect(() => resolveRelayOptions(options, defaults, 'relay "outbox"')).toThrow(DeclarationError);
    expect(() => resolveRelayOptions(options, defaults, 'relay "outbox"')).toThrow(message);
  });

  it('accepts the longest timer and a lease of an hour', () => {
    expect(
      resolveRelayOptions({ pollIntervalMs: 2 ** 31 - 1, leaseMs: 3_600_000, retryBackoff: { maxMs: 2 ** 31 - 1 } }, defaults, 'here'),
    ).toMatchObject({ pollIntervalMs: 2 ** 31 - 1, leaseMs: 3_600_000 });
  });
});
