import { describe, expect, it } from 'vitest';
import {
  createCancellationRecordStatements,
  createCancelRowStatements,
  parseCancellationsTable,
  type CancellationDatabase,
} from './cancellation-statements.js';
import { everyRoleLeaseTable, everyRoleTable, minimalLeaseTable, minimalTable } from './test-tables.fixture.js';

const records = (database: CancellationDatabase) => createCancellationRecordStatements(database);
const rows = (database: CancellationDatabase) => createCancelRowStatements(database);
const plain = parseCancellationsTable('tablequeue_cancellations', 'postgres');
const qualified = parseCancellationsTable('ops.cancels', 'postgres');

describe('postgres cancellations', () => {
  it('creates the table if it is missing, keyed by queue table and row id', () => {
    expect(records('postgres').createTable(plain)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS "tablequeue_cancellations" (',
        '  "queue_table" text NOT NULL,',
        '  "row_id" text NOT NULL,',
        '  "cancelled_at" timestamptz NOT NULL,',
        '  PRIMARY KEY ("queue_table", "row_id")',
        ')',
      ].join('\n'),
    );
  });

  it('records a cancel on the database clock, keeping the first; finds many ids in one array; removes one', () => {
    const statements = records('postgres');
    expect(statements.record(qualified)).toEqual({
      name: 'cancellations.record',
      sql: 'INSERT INTO "ops"."cancels" ("queue_table", "row_id", "cancelled_at") VALUES ($1, $2, statement_timestamp()) ON CONFLICT DO NOTHING',
      params: ['column:queue_table', 'column:row_id'],
    });
    expect(statements.idParams).toBe('array');
    expect(statements.find(plain, 1)).toEqual(statements.find(plain, 16));
    expect(statements.find(plain, 3)).toEqual({
      name: 'cancellations.find',
      sql: 'SELECT "row_id" FROM "tablequeue_cancellations" WHERE "queue_table" = $1 AND "row_id" = ANY($2::text[])',
      params: ['column:queue_table', 'ids'],
    });
    expect(statements.remove(plain)).toEqual({
      name: 'cancellations.remove',
      sql: 'DELETE FROM "tablequeue_cancellations" WHERE "queue_table" = $1 AND "row_id" = $2',
      params: ['column:queue_table', 'column:row_id'],
    });
  });

  it('removes a waiting lease row only while no live lease holds it, and a leased one whoever holds it', () => {
    const statements = rows('postgres');
    expect(statements.removeWaiting(minimalLeaseTable.spec)).toEqual({
      name: 'cancel.removeWaiting',
      sql: 'DELETE FROM "jobs" WHERE "id" = $1 AND ("locked_until" IS NULL OR "locked_until" <= $2)',
      params: ['id', 'leaseNow'],
    });
    expect(statements.removeWaiting(everyRoleLeaseTable.spec)).toEqual({
      name: 'cancel.removeWaiting',
      sql:
        'UPDATE "email_jobs" SET "processed_at" = $1 WHERE "job_id" = $2 AND "queue" = $3 AND "processed_at" IS NULL ' +
        'AND ("locked_until" IS NULL OR "locked_until" <= $4)',
      params: ['now', 'id', 'group', 'leaseNow'],
    });
    expect(statements.removeInWork(minimalLeaseTable.spec)).toEqual({
      name: 'cancel.removeInWork',
      sql: 'DELETE FROM "jobs" WHERE "id" = $1',
      params: ['id'],
    });
    expect(statements.removeInWork(everyRoleLeaseTable.spec)).toEqual({
      name: 'cancel.removeInWork',
      sql: 'UPDATE "email_jobs" SET "processed_at" = $1, "locked_until" = NULL WHERE "job_id" = $2 AND "queue" = $3 AND "processed_at" IS NULL',
      params: ['now', 'id', 'group'],
    });
  });

  it('locks a waiting row lock row without waiting, removes it, and reads whether it exists', () => {
    const statements = rows('postgres');
    expect(statements.lockWaiting(everyRoleTable.spec)).toEqual({
      name: 'cancel.lockWaiting',
      sql: 'SELECT "job_id" FROM "email_jobs" WHERE "job_id" = $1 AND "queue" = $2 AND "processed_at" IS NULL FOR UPDATE SKIP LOCKED',
      params: ['id', 'group'],
    });
    expect(statements.removeLocked(everyRoleTable.spec)).toEqual({
      name: 'cancel.removeLocked',
      sql: 'UPDATE "email_jobs" SET "processed_at" = $1 WHERE "job_id" = $2 AND "queue" = $3 AND "processed_at" IS NULL',
      params: ['now', 'id', 'group'],
    });
    expect(statements.removeLocked(minimalTable.spec)).toEqual({
      name: 'cancel.removeLocked',
      sql: 'DELETE FROM "jobs" WHERE "id" = $1',
      params: ['id'],
    });
    expect(statements.exists(everyRoleTable.spec)).toEqual({
      name: 'cancel.exists',
      sql: 'SELECT "job_id" FROM "email_jobs" WHERE "job_id" = $1 AND "queue" = $2 AND "processed_at" IS NULL',
      params: ['id', 'group'],
    });
  });
});

describe('mysql and mariadb cancellations', () => {
  it('spell everything alike', () => {
    const table = parseCancellationsTable('tablequeue_cancellations', 'mysql');
    for (const render of [records, rows] as const) {
      const mysql: object = render('mysql');
      const mariadb: object = render('mariadb');
      for (const [name, statement] of Object.entries(mysql)) {
        if (typeof statement !== 'function') continue;
        const argument = render === records ? table : everyRoleLeaseTable.spec;
        const other = (mariadb as Record<string, (value: unknown, count: number) => unknown>)[name]!;
        expect(other(argument, 2)).toEqual((statement as (value: unknown, count: number) => unknown)(argument, 2));
      }
    }
  });

  it('creates the table with exact text columns and a microsecond time', () => {
    expect(records('mysql').createTable(parseCancellationsTable('tablequeue_cancellations', 'mysql'))).toBe(
      [
        'CREATE TABLE IF NOT EXISTS `tablequeue_cancellations` (',
        '  `queue_table` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,',
        '  `row_id` varchar(255) CHARACTER SET utf8mb4 COLLATE utf8mb4_bin NOT NULL,',
        '  `cancelled_at` datetime(6) NOT NULL,',
        '  PRIMARY KEY (`queue_table`, `row_id`)',
        ')',
      ].join('\n'),
    );
  });

  it('records with an update that changes nothing, and finds ids through a list of placeholders', () => {
    const statements = records('mariadb');
    const table = parseCancellationsTable('tablequeue_cancellations', 'mariadb');
    expect(statements.record(table)).toEqual({
      name: 'cancellations.record',
      sql:
        'INSERT INTO `tablequeue_cancellations` (`queue_table`, `row_id`, `cancelled_at`) VALUES (?, ?, UTC_TIMESTAMP(6)) ' +
        'ON DUPLICATE KEY UPDATE `cancelled_at` = `cancelled_at`',
      params: ['column:queue_table', 'column:row_id'],
    });
    expect(statements.idParams).toBe('repeated');
    expect(statements.find(table, 2)).toEqual({
      name: 'cancellations.find',
      sql: 'SELECT `row_id` FROM `tablequeue_cancellations` WHERE `queue_table` = ? AND `row_id` IN (?, ?)',
      params: ['column:queue_table', 'id', 'id'],
    });
    expect(statements.remove(table)).toEqual({
      name: 'cancellations.remove',
      sql: 'DELETE FROM `tablequeue_cancellations` WHERE `queue_table` = ? AND `row_id` = ?',
      params: ['column:queue_table', 'column:row_id'],
    });
    expect(() => statements.find(table, 0)).toThrow(/at least 1, got 0/);
  });

  it('removes queue rows as on Postgres, with question marks', () => {
    const statements = rows('mysql');
    expect(statements.removeWaiting(everyRoleLeaseTable.spec)).toEqual({
      name: 'cancel.removeWaiting',
      sql:
        'UPDATE `email_jobs` SET `processed_at` = ? WHERE `job_id` = ? AND `queue` = ? AND `processed_at` IS NULL ' +
        'AND (`locked_until` IS NULL OR `locked_until` <= ?)',
      params: ['now', 'id', 'group', 'leaseNow'],
    });
    expect(statements.removeInWork(minimalLeaseTable.spec).sql).toBe('DELETE FROM `jobs` WHERE `id` = ?');
    expect(statements.lockWaiting(minimalTable.spec)).toEqual({
      name: 'cancel.lockWaiting',
      sql: 'SELECT `id` FROM `jobs` WHERE `id` = ? FOR UPDATE SKIP LOCKED',
      params: ['id'],
    });
    expect(statements.removeLocked(everyRoleTable.spec).sql).toBe(
      'UPDATE `email_jobs` SET `processed_at` = ? WHERE `job_id` = ? AND `queue` = ? AND `processed_at` IS NULL',
    );
    expect(statements.exists(minimalTable.spec).sql).toBe('SELECT `id` FROM `jobs` WHERE `id` = ?');
  });
});

describe('sqlite cancellations', () => {
  const table = parseCancellationsTable('tablequeue_cancellations', 'sqlite');

  it('creates the table with text columns, the time as fixed-width text', () => {
    expect(records('sqlite').createTable(table)).toBe(
      [
        'CREATE TABLE IF NOT EXISTS `tablequeue_cancellations` (',
        '  `queue_table` text NOT NULL,',
        '  `row_id` text NOT NULL,',
        '  `cancelled_at` text NOT NULL,',
        '  PRIMARY KEY (`queue_table`, `row_id`)',
        ')',
      ].join('\n'),
    );
  });

  it('records on its own clock, finds through a list of placeholders and removes one', () => {
    const statements = records('sqlite');
    expect(statements.record(table)).toEqual({
      name: 'cancellations.record',
      sql:
        'INSERT INTO `tablequeue_cancellations` (`queue_table`, `row_id`, `cancelled_at`) ' +
        "VALUES (?, ?, strftime('%Y-%m-%dT%H:%M:%f+00:00', 'now')) ON CONFLICT DO NOTHING",
      params: ['column:queue_table', 'column:row_id'],
    });
    expect(statements.find(table, 1)).toEqual({
      name: 'cancellations.find',
      sql: 'SELECT `row_id` FROM `tablequeue_cancellations` WHERE `queue_table` = ? AND `row_id` IN (?)',
      params: ['column:queue_table', 'id'],
    });
    expect(statements.remove(table).sql).toBe('DELETE FROM `tablequeue_cancellations` WHERE `queue_table` = ? AND `row_id` = ?');
  });

  it('removes lease rows', () => {
    const statements = rows('sqlite');
    expect(statements.removeWaiting(minimalLeaseTable.spec)).toEqual({
      name: 'cancel.removeWaiting',
      sql: 'DELETE FROM `jobs` WHERE `id` = ? AND (`locked_until` IS NULL OR `locked_until` <= ?)',
      params: ['id', 'leaseNow'],
    });
    expect(statements.removeInWork(everyRoleLeaseTable.spec)).toEqual({
      name: 'cancel.removeInWork',
      sql: 'UPDATE `email_jobs` SET `processed_at` = ?, `locked_until` = NULL WHERE `job_id` = ? AND `queue` = ? AND `processed_at` IS NULL',
      params: ['now', 'id', 'group'],
    });
    expect(statements.exists(everyRoleLeaseTable.spec).sql).toBe(
      'SELECT `job_id` FROM `email_jobs` WHERE `job_id` = ? AND `queue` = ? AND `processed_at` IS NULL',
    );
  });
});

describe('cancellations table names', () => {
  it('takes a schema and refuses a Postgres name longer than 63 bytes', () => {
    expect(parseCancellationsTable('ops.cancels', 'mysql')).toEqual({ schema: 'ops', name: 'cancels' });
    expect(() => parseCancellationsTable('x'.repeat(64), 'postgres')).toThrow(/63/);
  });
});
