import { describe, expect, it } from 'vitest';
import { StatementError } from '../errors.js';
import { contentionOf, isRolledBackByConflict } from './contention.js';

const failure = (fields: { sqlState?: string; errno?: number }) => new StatementError({ statement: 'lease.claim', database: 'test', cause: new Error('from the server'), ...fields });

describe('contention', () => {
  it.each([
    ['a MySQL or MariaDB deadlock, and a Galera certification failure or brute-force abort', { sqlState: '40001', errno: 1213 }, 'conflict'],
    ['a PostgreSQL deadlock', { sqlState: '40P01' }, 'conflict'],
    ['a PostgreSQL serialization failure', { sqlState: '40001' }, 'conflict'],
    ['a MySQL or MariaDB lock wait timeout', { sqlState: 'HY000', errno: 1205 }, 'lock wait timeout'],
    ['a duplicate key', { sqlState: '23000', errno: 1062 }, undefined],
    ['a lost session', { sqlState: '08S01' }, undefined],
  ] as const)('%s', (_what, fields, expected) => {
    expect(contentionOf(failure(fields))).toBe(expected);
    expect(isRolledBackByConflict(failure(fields))).toBe(expected === 'conflict');
  });

  it('is never what an error other than a failed statement met', () => {
    expect(contentionOf(Object.assign(new Error('deadlock'), { errno: 1213 }))).toBeUndefined();
  });
});
