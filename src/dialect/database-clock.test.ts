import { describe, expect, it } from 'vitest';
import { UnsupportedError } from '../errors.js';
import { createTableSpec, type TableSpec } from '../table/table-spec.js';
import { createDialect } from './create-dialect.js';
import { BACKTICK_STYLE, databaseClock, renderStatement, sql } from './quoting.js';
import { statementText } from './test-tables.fixture.js';

const postgres = createDialect('postgres');
const mysql = createDialect('mysql');
const sqlite = createDialect('sqlite');

/** Every role that reads a time, on the database clock (row lock form). */
const clockTable = createTableSpec({
  table: 'email_jobs',
  id: 'job_id',
  group: 'queue',
  priority: 'priority',
  retryAfter: 'retry_after',
  attempt: 'attempt',
  processedAt: 'processed_at',
  payload: 'payload',
  clock: 'database',
});
const clockColumns = ['job_id', 'queue', 'priority', 'retry_after', 'attempt', 'processed_at', 'payload'];
const fifoClockTable = createTableSpec({
  table: 'email_jobs',
  id: 'job_id',
  group: { column: 'queue', fifo: true },
  retryAfter: 'retry_after',
  clock: 'database',
});
const insertColumns = ['queue', 'retry_after', 'payload'];

describe('postgres on the database clock', () => {
  it('claims rows due by statement_timestamp(), binding no now', () => {
    expect(statementText(postgres.rowLock.claim(clockTable, clockColumns))).toEqual({
      name: 'rowLock.claim',
      sql: 'SELECT "job_id", "queue", "priority", "retry_after", "attempt", "processed_at", "payload" FROM "email_jobs" WHERE "queue" = $1 AND "retry_after" <= statement_timestamp() AND "processed_at" IS NULL ORDER BY "priority", "retry_after", "job_id" LIMIT $2 FOR UPDATE SKIP LOCKED',
      params: ['group', 'limit'],
    });
  });

  it('WP-11: claims the head of a FIFO group when due by statement_timestamp()', () => {
    expect(statementText(postgres.rowLock.claim(fifoClockTable, ['job_id', 'queue', 'retry_after']))).toEqual({
      name: 'rowLock.claim',
      sql: 'SELECT "job_id", "queue", "retry_after" FROM "email_jobs" WHERE "job_id" = (SELECT "job_id" FROM "email_jobs" WHERE "queue" = $1 ORDER BY "retry_after", "job_id" LIMIT 1) AND "queue" = $2 AND "retry_after" <= statement_timestamp() FOR UPDATE SKIP LOCKED',
      params: ['group', 'group'],
    });
  });

  it('delays by a bound number of microseconds, typed by its cast', () => {
    expect(statementText(postgres.rowLock.retryAfter(clockTable)!)).toEqual({
      name: 'rowLock.retryAfter',
      sql: `UPDATE "email_jobs" SET "retry_after" = statement_timestamp() + $1::bigint * interval '1 microsecond', "attempt" = "attempt" + 1 WHERE "job_id" = $2`,
      params: ['delayMicroseconds', 'id'],
    });
  });

  it('marks processed rows at statement_timestamp()', () => {
    expect(statementText(postgres.settle.finish(clockTable, { fenced: false }))).toEqual({
      name: 'settle.finish',
      sql: 'UPDATE "email_jobs" SET "processed_at" = statement_timestamp() WHERE "job_id" = $1',
      params: ['id'],
    });
  });

  it('publishes rows due a bound delay after statement_timestamp()', () => {
    expect(statementText(postgres.insert.rows(clockTable, insertColumns, 2, { retryAfterAsDelay: true }))).toEqual({
      name: 'insert.rows',
      sql: `INSERT INTO "email_jobs" ("queue", "retry_after", "payload") VALUES ($1, statement_timestamp() + $2::bigint * interval '1 microsecond', $3), ($4, statement_timestamp() + $5::bigint * interval '1 microsecond', $6) RETURNING "job_id"`,
      params: ['column:queue', 'column:retry_after', 'column:payload', 'column:queue', 'column:retry_after', 'column:payload'],
    });
  });

  it('binds the instant of a publish with runAt as it is', () => {
    expect(statementText(postgres.insert.rows(clockTable, insertColumns, 1))).toEqual({
      name: 'insert.rows',
      sql: 'INSERT INTO "email_jobs" ("queue", "retry_after", "payload") VALUES ($1, $2, $3) RETURNING "job_id"',
      params: ['column:queue', 'column:retry_after', 'column:payload'],
    });
  });
});

describe('mysql on the database clock', () => {
  it('claims rows due by UTC_TIMESTAMP(6), binding no now', () => {
    expect(statementText(mysql.rowLock.claim(clockTable, clockColumns))).toEqual({
      name: 'rowLock.claim',
      sql:
        'SELECT `job_id`, `queue`, `priority`, `retry_after`, `attempt`, `processed_at`, `payload` FROM (' +
        'SELECT `job_id` AS tablequeue_candidate FROM `email_jobs` WHERE `queue` = ? AND `retry_after` <= UTC_TIMESTAMP(6) AND `processed_at` IS NULL ORDER BY `priority`, `retry_after`, `job_id` LIMIT ?' +
        ') AS tablequeue_candidates STRAIGHT_JOIN `email_jobs` ON `job_id` = tablequeue_candidates.tablequeue_candidate ' +
        'WHERE `queue` = ? AND `retry_after` <= UTC_TIMESTAMP(6) AND `processed_at` IS NULL LIMIT ? FOR UPDATE SKIP LOCKED',
      params: ['group', 'candidates', 'group', 'limit'],
    });
  });

  it('WP-11: claims the head of a FIFO group when due by UTC_TIMESTAMP(6)', () => {
    expect(statementText(mysql.rowLock.claim(fifoClockTable, ['job_id', 'queue', 'retry_after']))).toEqual({
      name: 'rowLock.claim',
      sql: 'SELECT `job_id`, `queue`, `retry_after` FROM `email_jobs` WHERE `job_id` = (SELECT `job_id` FROM `email_jobs` WHERE `queue` = ? ORDER BY `retry_after`, `job_id` LIMIT 1) AND `queue` = ? AND `retry_after` <= UTC_TIMESTAMP(6) FOR UPDATE SKIP LOCKED',
      params: ['group', 'group'],
    });
  });

  it('delays by a bound interval of microseconds', () => {
    expect(statementText(mysql.rowLock.retryAfter(clockTable)!)).toEqual({
      name: 'rowLock.retryAfter',
      sql: 'UPDATE `email_jobs` SET `retry_after` = UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, `attempt` = `attempt` + 1 WHERE `job_id` = ?',
      params: ['delayMicroseconds', 'id'],
    });
  });

  it('marks processed rows at UTC_TIMESTAMP(6)', () => {
    expect(statementText(mysql.settle.finish(clockTable, { fenced: false }))).toEqual({
      name: 'settle.finish',
      sql: 'UPDATE `email_jobs` SET `processed_at` = UTC_TIMESTAMP(6) WHERE `job_id` = ?',
      params: ['id'],
    });
  });

  it('publishes rows due a bound delay after UTC_TIMESTAMP(6)', () => {
    expect(statementText(mysql.insert.rows(clockTable, insertColumns, 2, { retryAfterAsDelay: true }))).toEqual({
      name: 'insert.rows',
      sql: 'INSERT INTO `email_jobs` (`queue`, `retry_after`, `payload`) VALUES (?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?), (?, UTC_TIMESTAMP(6) + INTERVAL ? MICROSECOND, ?)',
      params: ['column:queue', 'column:retry_after', 'column:payload', 'column:queue', 'column:retry_after', 'column:payload'],
    });
  });
});

describe('sqlite on the database clock', () => {
  it('marks processed rows in the fixed-width layout of every time column', () => {
    expect(statementText(sqlite.settle.finish(clockTable, { fenced: false }))).toEqual({
      name: 'settle.finish',
      sql: "UPDATE `email_jobs` SET `processed_at` = strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now') WHERE `job_id` = ?",
      params: ['id'],
    });
  });

  it('publishes rows due a bound delay after its now, as a strftime modifier in seconds', () => {
    expect(statementText(sqlite.insert.rows(clockTable, insertColumns, 1, { retryAfterAsDelay: true }))).toEqual({
      name: 'insert.rows',
      sql: "INSERT INTO `email_jobs` (`queue`, `retry_after`, `payload`) VALUES (?, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now', (? / 1000000.0) || ' seconds'), ?) RETURNING `job_id`",
      params: ['column:queue', 'column:retry_after', 'column:payload'],
    });
  });
});

describe('database clock refusals', () => {
  // defineTable refuses the pair; a spec assembled by hand still meets the dialects' refusal.
  const leaseOnDatabaseClock: TableSpec = {
    ...createTableSpec({ table: 'jobs', id: 'id', retryAfter: 'due', lockedUntil: 'locked_until' }),
    clock: 'database',
  };

  it('refuses the lease form on every database, naming the host clock', () => {
    for (const dialect of [postgres, mysql, sqlite]) {
      expect(() => dialect.lease.claim(leaseOnDatabaseClock, ['id', 'due', 'locked_until'])).toThrow(UnsupportedError);
      expect(() => dialect.lease.claim(leaseOnDatabaseClock, ['id', 'due', 'locked_until'])).toThrow(
        /lease form computes its tokens on the host.*use clock: "host"/,
      );
    }
  });

  it('refuses to render the clock with a style that spells none', () => {
    expect(() => renderStatement(BACKTICK_STYLE, 'probe', sql`SELECT ${databaseClock()}`)).toThrow(TypeError);
  });
});
