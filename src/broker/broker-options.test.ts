import { describe, expect, it } from 'vitest';
import { createDialect } from '../dialect/create-dialect.js';
import { defineDialect } from '../dialect/define-dialect.js';
import { DeclarationError, DialectVersionError } from '../errors.js';
import { resolveBrokerOptions } from './broker-options.js';
import { Broker } from './broker.js';

describe('the listen option', () => {
  it('is left to start() when not given, and kept when true or false', () => {
    expect(resolveBrokerOptions({ database: 'postgres://db/app' }).listen).toBeUndefined();
    expect(resolveBrokerOptions({ database: {}, listen: true }).listen).toBe(true);
    expect(resolveBrokerOptions({ database: 'postgres://db/app', listen: false }).listen).toBe(false);
  });

  it('refuses anything but a boolean or { url }', () => {
    expect(() => resolveBrokerOptions({ database: 'postgres://db/app', listen: 'yes' as unknown as boolean })).toThrow(
      new DeclarationError("new Broker: listen must be true, false or { url: 'postgres://…' } (the LISTEN connection's own URL), got yes"),
    );
    expect(() => resolveBrokerOptions({ database: 'postgres://db/app', listen: { url: 'x', also: 1 } as unknown as { url: string } })).toThrow(
      new DeclarationError(
        `new Broker: listen must be true, false or { url: 'postgres://…' } (the LISTEN connection's own URL), got an object with ["url","also"]`,
      ),
    );
  });

  it('turns on with { url }, which must be a postgres:// URL', () => {
    const resolved = resolveBrokerOptions({ database: 'postgres://bouncer:6432/app', listen: { url: 'postgres://db:5432/app' } });
    expect(resolved).toMatchObject({ listen: true, listenUrl: 'postgres://db:5432/app' });
    expect(() => resolveBrokerOptions({ database: 'postgres://db/app', listen: { url: 'mysql://db/app' } })).toThrow(
      new DeclarationError('new Broker: listen.url must be a postgres:// URL: LISTEN/NOTIFY is PostgreSQL-only'),
    );
    expect(() => resolveBrokerOptions({ database: 'postgres://db/app', listen: { url: 'db:5432' } })).toThrow(/^new Broker: listen\.url: the database URL/);
  });
});

describe('the pooler option', () => {
  it("takes 'transaction' or 'session', PgBouncer's pool modes", () => {
    expect(resolveBrokerOptions({ database: 'postgres://db/app', pooler: 'transaction' }).pooler).toBe('transaction');
    expect(resolveBrokerOptions({ database: 'postgres://db/app' }).pooler).toBeUndefined();
    expect(() => resolveBrokerOptions({ database: 'postgres://db/app', pooler: 'statement' as 'session' })).toThrow(
      new DeclarationError("new Broker: pooler must be 'transaction' or 'session' (PgBouncer's pool_mode), got statement"),
    );
  });
});

describe('the galera option', () => {
  it('takes whether every broker writes through one node of the cluster', () => {
    expect(resolveBrokerOptions({ database: 'mysql://db/app', galera: { singleWriter: true } }).galera).toEqual({ singleWriter: true });
    expect(resolveBrokerOptions({ database: 'mysql://db/app', galera: { singleWriter: false } }).galera).toEqual({ singleWriter: false });
    expect(resolveBrokerOptions({ database: 'mysql://db/app' }).galera).toBeUndefined();
    const refusal = (got: string) =>
      new DeclarationError(
        `new Broker: galera must be { singleWriter: true } (every broker writes through one node of the cluster) or { singleWriter: false }, got ${got}`,
      );
    expect(() => resolveBrokerOptions({ database: 'mysql://db/app', galera: { singleWriter: 'yes' as unknown as boolean } })).toThrow(
      refusal('an object with ["singleWriter"] and singleWriter yes'),
    );
    expect(() => resolveBrokerOptions({ database: 'mysql://db/app', galera: true as unknown as { singleWriter: boolean } })).toThrow(
      refusal('true'),
    );
    expect(() => resolveBrokerOptions({ database: 'mysql://db/app', galera: {} as { singleWriter: boolean } })).toThrow(refusal('an object with []'));
  });
});

describe('millisecond options', () => {
  it.each([
    [{ pollIntervalMs: 2 ** 31 }, 'new Broker: pollIntervalMs must be a number of milliseconds above 0 and at most 2147483647, got 2147483648'],
    [{ stopTimeoutMs: 2 ** 31 }, 'new Broker: stopTimeoutMs must be a number of milliseconds above 0 and at most 2147483647, got 2147483648'],
    [{ leaseMs: 3_600_001 }, 'new Broker: leaseMs must be a number of milliseconds above 0 and at most 3600000, got 3600001'],
    [{ leaseMs: 0 }, 'new Broker: leaseMs must be a number of milliseconds above 0 and at most 3600000, got 0'],
  ])('refuses what Node timers cannot keep and leases past an hour: %j', (options, message) => {
    expect(() => resolveBrokerOptions({ database: 'sqlite::memory:', ...options })).toThrow(new DeclarationError(message));
  });

  it('accepts the longest timer and a lease of an hour', () => {
    expect(
      resolveBrokerOptions({ database: 'sqlite::memory:', pollIntervalMs: 2 ** 31 - 1, stopTimeoutMs: 2 ** 31 - 1, leaseMs: 3_600_000 }),
    ).toMatchObject({ pollIntervalMs: 2 ** 31 - 1, stopTimeoutMs: 2 ** 31 - 1, leaseMs: 3_600_000 });
  });
});

describe('broker.stop', () => {
  it('refuses a timeout no timer keeps, and leaves the broker as it was', async () => {
    const broker = new Broker({ database: 'sqlite::memory:' });
    await expect(broker.stop({ timeoutMs: 2 ** 31 })).rejects.toThrow(
      new DeclarationError('broker.stop: timeoutMs must be a number of milliseconds from 0 to 2147483647, got 2147483648'),
    );
    await expect(broker.stop({ timeoutMs: 0 })).resolves.toBeUndefined();
  });
});

describe('the dialect option', () => {
  it('refuses a dialect of another interface version when the broker is made, and one that is not a dialect', () => {
    const old = defineDialect({ basedOn: 'sqlite', label: 'old', interfaceVersion: 0 });
    expect(() => new Broker({ database: 'sqlite::memory:', dialect: old })).toThrow(DialectVersionError);
    expect(() => new Broker({ database: 'sqlite::memory:', dialect: 'postgres' as never })).toThrow(
      new DeclarationError(
        "new Broker: dialect must be a Dialect object, such as defineDialect({ basedOn: 'postgres', … }) or builtInDialect('postgres'); got string",
      ),
    );
  });

  it('keeps the dialect it was given, guarded, and leaves the built-in to start() without one', () => {
    expect(resolveBrokerOptions({ database: 'sqlite::memory:' }).dialect).toBeUndefined();
    const given = resolveBrokerOptions({ database: 'sqlite::memory:', dialect: createDialect('sqlite') }).dialect;
    expect(given).toMatchObject({ name: 'sqlite', label: 'sqlite', basedOn: 'sqlite', interfaceVersion: 1 });
  });
});
