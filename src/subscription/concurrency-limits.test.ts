import { describe, expect, it } from 'vitest';
import { DeclarationError, UnsupportedError } from '../errors.js';
import { createDialect } from '../dialect/create-dialect.js';
import { createTableSpec } from '../table/table-spec.js';
import { checkConcurrencyFits, MAX_ADVISORY_SLOTS, MAX_CONCURRENCY_LIMIT, MAX_ROW_LOCK_SLOTS, resolveConcurrency } from './concurrency-limits.js';

const where = 'subscription "emails"';
const postgres = createDialect('postgres');

describe('resolveConcurrency', () => {
  it('takes global, perKey or both, and nothing when the option is absent', () => {
    expect(resolveConcurrency(undefined, where)).toBeUndefined();
    expect(resolveConcurrency({ global: 5 }, where)).toEqual({ global: 5, perKey: undefined });
    expect(resolveConcurrency({ perKey: 1 }, where)).toEqual({ global: undefined, perKey: 1 });
    expect(resolveConcurrency({ global: 10, perKey: 2 }, where)).toEqual({ global: 10, perKey: 2 });
  });

  it('refuses limits that are not whole numbers from 1, unknown keys, and an empty object, saying what to write', () => {
    for (const bad of [0, -1, 1.5, Number.NaN, '3', MAX_CONCURRENCY_LIMIT + 1]) {
      expect(() => resolveConcurrency({ global: bad as number }, where)).toThrow(
        /subscription "emails": concurrency.global must be a whole number of rows from 1 to 100000/,
      );
    }
    expect(() => resolveConcurrency({ perKey: 0 }, where)).toThrow(/concurrency.perKey must be a whole number/);
    expect(() => resolveConcurrency({ limit: 3 } as never, where)).toThrow(/unknown concurrency option "limit"; the options are global and perKey/);
    expect(() => resolveConcurrency({}, where)).toThrow(/concurrency needs global, perKey or both/);
    expect(() => resolveConcurrency(5 as never, where)).toThrow(DeclarationError);
  });
});

describe('checkConcurrencyFits', () => {
  const lease = { table: 'jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until' } as const;

  it('accepts a lease table, and perKey where the table has a partition key', () => {
    expect(() => checkConcurrencyFits({ global: 3, perKey: undefined }, createTableSpec(lease), postgres, 'emails')).not.toThrow();
    const keyed = createTableSpec({ ...lease, partitionKey: 'customer' });
    expect(() => checkConcurrencyFits({ global: undefined, perKey: 1 }, keyed, postgres, 'emails')).not.toThrow();
  });

  it('takes global on row lock and advisory tables, perKey on row lock tables (MySQL: at read committed), and refuses perKey on advisory tables, saying what to do instead', () => {
    const rowLock = createTableSpec({ table: 'jobs', id: 'id' });
    expect(() => checkConcurrencyFits({ global: 3, perKey: undefined }, rowLock, postgres, 'emails')).not.toThrow();
    const keyedRowLock = { table: 'jobs', id: 'id', partitionKey: 'k' } as const;
    expect(() => checkConcurrencyFits({ global: 3, perKey: 1 }, createTableSpec(keyedRowLock), postgres, 'emails')).not.toThrow();
    const mysql = createDialect('mariadb');
    expect(() => checkConcurrencyFits({ global: undefined, perKey: 1 }, createTableSpec(keyedRowLock), mysql, 'emails')).toThrow(
      /at the server default \(repeatable read\) InnoDB also locks the gaps.*Declare isolation: 'read committed' on table "jobs"/,
    );
    const readCommitted = createTableSpec({ ...keyedRowLock, isolation: 'read committed' });
    expect(() => checkConcurrencyFits({ global: undefined, perKey: 1 }, readCommitted, mysql, 'emails')).not.toThrow();
    expect(() => checkConcurrencyFits({ global: undefined, perKey: MAX_ROW_LOCK_SLOTS + 1 }, readCommitted, mysql, 'emails')).toThrow(
      /perKey in the row lock form holds a transaction, so a connection, per row in work; give at most 1000/,
    );
    expect(() => checkConcurrencyFits({ global: MAX_ROW_LOCK_SLOTS + 1, perKey: undefined }, rowLock, postgres, 'emails')).toThrow(
      /holds a transaction, so a connection, per row in work; give at most 1000/,
    );
    const advisory = createTableSpec({ table: 'jobs', id: 'id', advisoryLock: 'jobs-{id}', partitionKey: 'customer' });
    expect(() => checkConcurrencyFits({ global: 3, perKey: undefined }, advisory, postgres, 'emails')).not.toThrow();
    expect(() => checkConcurrencyFits({ global: 3, perKey: 1 }, advisory, postgres, 'emails')).toThrow(UnsupportedError);
    expect(() => checkConcurrencyFits({ global: 3, perKey: 1 }, advisory, postgres, 'emails')).toThrow(
      /name the partition key in the advisoryLock template \(such as "customer-\{customer\}"\) instead/,
    );
    expect(() => checkConcurrencyFits({ global: MAX_ADVISORY_SLOTS + 1, perKey: undefined }, advisory, postgres, 'emails')).toThrow(
      /tries its slot keys one by one, so a claim that finds the limit reached costs one round trip per slot; give at most 100/,
    );
  });

  it('refuses FIFO tables and perKey without a partition key', () => {
    const fifo = createTableSpec({ ...lease, group: { column: 'queue', fifo: true } });
    expect(() => checkConcurrencyFits({ global: 3, perKey: undefined }, fifo, postgres, 'emails')).toThrow(
      /already run one row of a group at a time; remove concurrency/,
    );
    expect(() => checkConcurrencyFits({ global: undefined, perKey: 1 }, createTableSpec(lease), postgres, 'emails')).toThrow(
      /declare partitionKey in defineTable or remove perKey/,
    );
  });
});
