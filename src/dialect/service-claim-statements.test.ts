import { describe, expect, it } from 'vitest';
import { createTableSpec } from '../table/table-spec.js';
import { createServiceClaimStatements } from './service-claim-statements.js';
import { everyRoleLeaseTable, everyRoleTable, minimalLeaseTable } from './test-tables.fixture.js';

const postgres = createServiceClaimStatements('postgres');
const mysql = createServiceClaimStatements('mysql');
const sqlite = createServiceClaimStatements('sqlite');

describe("what tablequeue runs around a claim of the service's own", () => {
  it('stamps each id with the lease and the attempt only while it is still claimable: its group, due, unfinished, no live lease', () => {
    expect(postgres.stamp(everyRoleLeaseTable.spec)).toEqual({
      name: 'serviceClaim.stamp',
      sql: 'UPDATE "email_jobs" SET "locked_until" = $1, "attempt" = "attempt" + 1 WHERE "job_id" = $2 AND "queue" = $3 AND "retry_after" <= $4 AND "processed_at" IS NULL AND ("locked_until" IS NULL OR "locked_until" <= $5)',
      params: ['lockedUntil', 'id', 'group', 'now', 'leaseNow'],
    });
    const backticked = {
      name: 'serviceClaim.stamp',
      sql: 'UPDATE `email_jobs` SET `locked_until` = ?, `attempt` = `attempt` + 1 WHERE `job_id` = ? AND `queue` = ? AND `retry_after` <= ? AND `processed_at` IS NULL AND (`locked_until` IS NULL OR `locked_until` <= ?)',
      params: ['lockedUntil', 'id', 'group', 'now', 'leaseNow'],
    };
    expect(mysql.stamp(everyRoleLeaseTable.spec)).toEqual(backticked);
    expect(sqlite.stamp(everyRoleLeaseTable.spec)).toEqual(backticked);
    expect(postgres.stamp(minimalLeaseTable.spec)).toEqual({
      name: 'serviceClaim.stamp',
      sql: 'UPDATE "jobs" SET "locked_until" = $1 WHERE "id" = $2 AND ("locked_until" IS NULL OR "locked_until" <= $3)',
      params: ['lockedUntil', 'id', 'leaseNow'],
    });
  });

  it('locks each id for the row lock claim while it is still claimable, skipping a row another transaction holds', () => {
    expect(postgres.lock(everyRoleTable.spec)).toEqual({
      name: 'serviceClaim.lock',
      sql: 'SELECT "job_id" FROM "email_jobs" WHERE "job_id" = $1 AND "queue" = $2 AND "retry_after" <= $3 AND "processed_at" IS NULL FOR UPDATE SKIP LOCKED',
      params: ['id', 'group', 'now'],
    });
    expect(mysql.lock(createTableSpec({ table: 'jobs', id: 'id', retryAfter: 'due', clock: 'database' }))).toEqual({
      name: 'serviceClaim.lock',
      sql: 'SELECT `id` FROM `jobs` WHERE `id` = ? AND `due` <= UTC_TIMESTAMP(6) FOR UPDATE SKIP LOCKED',
      params: ['id'],
    });
  });

  it('fetches the taken rows by an array of ids on PostgreSQL, and has no fetch where no list binds', () => {
    expect(postgres.fetch(everyRoleLeaseTable.spec, ['job_id', 'queue', 'attempt', 'payload'])).toEqual({
      name: 'serviceClaim.fetch',
      sql: 'SELECT "job_id", "queue", "attempt", "payload" FROM "email_jobs" WHERE "job_id" = ANY($1)',
      params: ['ids'],
    });
    expect(mysql.fetch(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns)).toBeUndefined();
    expect(sqlite.fetch(everyRoleLeaseTable.spec, everyRoleLeaseTable.columns)).toBeUndefined();
  });
});
