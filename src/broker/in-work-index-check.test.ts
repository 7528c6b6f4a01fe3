import { describe, expect, it } from 'vitest';
import { everyRoleLeaseTable, minimalLeaseTable } from '../dialect/test-tables.fixture.js';
import { servesRowsInWork } from './in-work-index-check.js';

const grouped = everyRoleLeaseTable.spec;
const ungrouped = minimalLeaseTable.spec;

function indexes(entries: Record<string, (string | null)[]>): Map<string, (string | null)[]> {
  return new Map(Object.entries(entries));
}

describe('servesRowsInWork', () => {
  it('takes an index led by the group then locked_until, or by locked_until alone', () => {
    expect(servesRowsInWork(grouped, indexes({ email_jobs_in_work: ['queue', 'locked_until'] }))).toBe(true);
    expect(servesRowsInWork(grouped, indexes({ by_lease: ['locked_until', 'queue'] }))).toBe(true);
    expect(servesRowsInWork(ungrouped, indexes({ jobs_in_work: ['locked_until'] }))).toBe(true);
  });

  it('refuses the claim-order index, an index with locked_until further in, an expression, and no index at all', () => {
    expect(servesRowsInWork(grouped, indexes({ email_jobs_claim_order: ['queue', 'priority', 'retry_after', 'job_id'] }))).toBe(false);
    expect(servesRowsInWork(grouped, indexes({ late: ['queue', 'priority', 'locked_until'] }))).toBe(false);
    expect(servesRowsInWork(grouped, indexes({ expression: [null, 'locked_until'] }))).toBe(false);
    expect(servesRowsInWork(ungrouped, indexes({ other_group: ['queue', 'locked_until'] }))).toBe(false);
    expect(servesRowsInWork(ungrouped, indexes({}))).toBe(false);
  });

  it('compares column names without case, as MySQL, MariaDB and SQLite name them', () => {
    expect(servesRowsInWork(grouped, indexes({ upper: ['QUEUE', 'Locked_Until'] }))).toBe(true);
  });
});
