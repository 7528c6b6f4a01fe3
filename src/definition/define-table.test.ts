import { describe, expect, it } from 'vitest';
import { DeclarationError } from '../errors.js';
import { defineTable } from './define-table.js';

describe('createTableSql', () => {
  it('adds the rows-in-work index to a lease table when asked, and refuses it on a table without lockedUntil', () => {
    const lease = defineTable({ table: 'jobs', id: 'id', group: 'queue', lockedUntil: 'locked_until' });
    expect(lease.createTableSql('postgres', { inWorkIndex: true }).at(-1)).toBe(
      'CREATE INDEX "jobs_in_work" ON "jobs" ("queue", "locked_until") WHERE "locked_until" IS NOT NULL',
    );
    expect(lease.createTableSql('postgres').some((statement) => statement.includes('_in_work'))).toBe(false);
    const rowLock = defineTable({ table: 'jobs', id: 'id', group: 'queue' });
    expect(() => rowLock.createTableSql('postgres', { inWorkIndex: true })).toThrow(DeclarationError);
    expect(() => rowLock.createTableSql('mysql', { inWorkIndex: true })).toThrow(
      'table "jobs": inWorkIndex indexes the lockedUntil column, and the table declares none; a row lock table\'s rows in work are its locked rows, which need no index',
    );
  });
});
