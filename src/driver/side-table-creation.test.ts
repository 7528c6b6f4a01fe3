import { describe, expect, it } from 'vitest';
import { StatementError } from '../errors.js';
import { isCreatedByAnother } from './side-table-creation.js';

/** A failure as the drivers wrap one; pg's server error carries the violated index as `constraint`. */
function failure(fields: { sqlState?: string; errno?: number; constraint?: string }): StatementError {
  const cause = Object.assign(new Error('from the server'), fields.constraint === undefined ? {} : { constraint: fields.constraint });
  return new StatementError({ statement: 'heartbeat.createTable', database: 'postgres', sqlState: fields.sqlState, errno: fields.errno, cause });
}

describe('a side table created by another session', () => {
  it('is what 42P07, 42710 (the row type exists), 23505 on a catalogue name index and MySQL errno 1050 say', () => {
    expect(isCreatedByAnother(failure({ sqlState: '23505', constraint: 'pg_type_typname_nsp_index' }))).toBe(true);
    expect(isCreatedByAnother(failure({ sqlState: '23505', constraint: 'pg_class_relname_nsp_index' }))).toBe(true);
    expect(isCreatedByAnother(failure({ sqlState: '42P07' }))).toBe(true);
    expect(isCreatedByAnother(failure({ sqlState: '42710' }))).toBe(true);
    expect(isCreatedByAnother(failure({ sqlState: '42S01', errno: 1050 }))).toBe(true);
  });

  it('is not any other failure: a unique violation elsewhere, a missing right, a lost connection, a plain error', () => {
    expect(isCreatedByAnother(failure({ sqlState: '23505', constraint: 'jobs_pkey' }))).toBe(false);
    expect(isCreatedByAnother(failure({ sqlState: '23505' }))).toBe(false);
    expect(isCreatedByAnother(failure({ sqlState: '42501' }))).toBe(false);
    expect(isCreatedByAnother(failure({ sqlState: '08006' }))).toBe(false);
    expect(isCreatedByAnother(new Error('duplicate key value violates unique constraint "pg_type_typname_nsp_index"'))).toBe(false);
  });
});
