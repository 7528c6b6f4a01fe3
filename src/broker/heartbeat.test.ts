import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { resolveBrokerOptions } from './broker-options.js';
import { DEFAULT_HEARTBEAT_INTERVAL_MS } from './heartbeat.js';

describe('heartbeat option', () => {
  it('is off unless asked for, and takes defaults for what is left out', () => {
    expect(resolveBrokerOptions({ database: 'sqlite::memory:' }).heartbeat).toBeUndefined();
    expect(resolveBrokerOptions({ database: 'sqlite::memory:', heartbeat: {} }).heartbeat).toEqual({
      table: 'tablequeue_brokers',
      intervalMs: DEFAULT_HEARTBEAT_INTERVAL_MS,
    });
    expect(resolveBrokerOptions({ database: 'sqlite::memory:', heartbeat: { table: 'ops.brokers', intervalMs: 250 } }).heartbeat).toEqual({
      table: 'ops.brokers',
      intervalMs: 250,
    });
  });

  it('refuses a table name that is not an identifier and an interval that is not whole milliseconds', () => {
    expect(() => resolveBrokerOptions({ database: 'sqlite::memory:', heartbeat: { table: 'brokers; --' } })).toThrow(DeclarationError);
    expect(() => resolveBrokerOptions({ database: 'sqlite::memory:', heartbeat: { intervalMs: 0 } })).toThrow(/heartbeat.intervalMs/);
    expect(() => resolveBrokerOptions({ database: 'sqlite::memory:', heartbeat: { intervalMs: 1.5 } })).toThrow(/whole number/);
  });
});
