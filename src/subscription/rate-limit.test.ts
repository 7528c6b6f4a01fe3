import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { createRateLimitsByKeyTableSql, createRateLimitsTableSql, MAX_RATE_LIMIT, resolveRate, type RateOption } from './rate-limit.js';

const WHERE = 'subscription "jobs/emails"';

describe('resolveRate', () => {
  it('keeps a limit and a window, and nothing without a rate', () => {
    expect(resolveRate({ limit: 50, perMs: 1_000 }, WHERE)).toEqual({ limit: 50, perMs: 1_000, key: false });
    expect(resolveRate({ limit: 50, perMs: 1_000, key: false }, WHERE)).toEqual({ limit: 50, perMs: 1_000, key: false });
    expect(resolveRate(undefined, WHERE)).toBeUndefined();
  });

  it('keeps a rate per key, and refuses a key that is not true or false', () => {
    expect(resolveRate({ limit: 5, perMs: 1_000, key: true }, WHERE)).toEqual({ limit: 5, perMs: 1_000, key: true });
    expect(() => resolveRate({ limit: 5, perMs: 1_000, key: 'tenant' } as unknown as RateOption, WHERE)).toThrow(
      'subscription "jobs/emails": rate.key must be true (a limit per partition key) or false, got "tenant"',
    );
  });

  it('refuses limits and windows that are not whole numbers in range, and unknown options', () => {
    const refused = (value: unknown) => () => resolveRate(value as RateOption, WHERE);
    expect(refused({ limit: 0, perMs: 1_000 })).toThrow(DeclarationError);
    expect(refused({ limit: MAX_RATE_LIMIT + 1, perMs: 1_000 })).toThrow(/rate.limit must be a whole number of claims from 1 to 1000, got 1001 \(for a higher rate, shorten perMs\)/);
    expect(refused({ limit: 5 })).toThrow(/rate.perMs must be a whole number of milliseconds from 1 to 86400000, got undefined/);
    expect(refused({ limit: 5, perMs: 10, burst: 2 })).toThrow(/unknown rate option "burst"; the options are limit, perMs and key/);
    expect(refused(50)).toThrow(/rate must be an object such as \{ limit: 50, perMs: 1000 \}/);
  });
});

describe('createRateLimitsByKeyTableSql', () => {
  it('spells the uses table of rates per key beside the rate limits table', () => {
    expect(createRateLimitsByKeyTableSql('postgres', 'app.rates')).toBe(
      'CREATE TABLE IF NOT EXISTS "app"."rates_by_key" (\n  "queue_table" text NOT NULL,\n  "queue_name" text NOT NULL,\n  "used_at_ms" bigint NOT NULL,\n  "rate_key" text NOT NULL,\n  "uses" integer NOT NULL,\n  PRIMARY KEY ("queue_table", "queue_name", "used_at_ms", "rate_key")\n)',
    );
  });
});

describe('createRateLimitsTableSql', () => {
  it('spells the table for a migration, in a schema when named so', () => {
    expect(createRateLimitsTableSql('postgres', 'app.rates')).toBe(
      'CREATE TABLE IF NOT EXISTS "app"."rates" (\n  "queue_table" text NOT NULL,\n  "queue_name" text NOT NULL,\n  "slot" integer NOT NULL,\n  "used_at_ms" bigint NOT NULL,\n  PRIMARY KEY ("queue_table", "queue_name", "slot")\n)',
    );
    expect(createRateLimitsTableSql('mariadb')).toBe(
      'CREATE TABLE IF NOT EXISTS `tablequeue_rate_limits` (\n  `queue_table` varbinary(1020) NOT NULL,\n  `queue_name` varbinary(1020) NOT NULL,\n  `slot` integer NOT NULL,\n  `used_at_ms` bigint NOT NULL,\n  PRIMARY KEY (`queue_table`, `queue_name`, `slot`)\n)',
    );
  });
});
